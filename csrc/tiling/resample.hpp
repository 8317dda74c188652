// Image resampling that reproduces Pillow's Image.resize (bilinear and bicubic, always
// antialiased: the filter support widens by the downscale factor) bit for bit on 8-bit images,
// and the fused patch preprocessing built on it: convert the pixel format, crop, resize,
// normalise by mean/std and write a float32 / float16 / bfloat16 NCHW batch.
//
// Pillow's algorithm (src/libImaging/Resample.c, documented behaviour of Image.resize): separable
// convolution, horizontal pass first into an 8-bit intermediate, then vertical; per output pixel
// the normalised filter taps are quantised to 22-bit fixed point, accumulated in 32-bit integers
// from a rounding offset of one half, then shifted and clipped to [0, 255]. Bicubic uses
// Keys' kernel with a = -0.5.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace tb::tiling {

enum class Filter { kBilinear = 0, kBicubic = 1 };

// Fixed-point taps of one axis: for output index o, taps k[o * ksize + t] for t < count[o] apply
// to input indices first[o] + t.
struct Taps {
  int ksize = 0;
  std::vector<std::int32_t> first, count, k;
};
Taps resample_taps(std::int64_t in_size, std::int64_t out_size, Filter f);

// Resizes an interleaved h x w x channels (1..4) uint8 image to out_h x out_w exactly as
// PIL.Image.resize((out_w, out_h), filter) does. Parallel over rows.
void resize_image(const std::uint8_t* src, std::int64_t h, std::int64_t w, int channels,
                  std::int64_t out_h, std::int64_t out_w, Filter f, std::uint8_t* dst,
                  int threads);

// Source pixel layouts.
//  kRGB:    3 bytes per pixel.
//  kRGBA:   4 bytes, straight alpha; composited over white.
//  kARGB32: one native-endian uint32 per pixel, premultiplied alpha in the top byte (OpenSlide's
//           openslide_read_region buffer, cairo's ARGB32); composited over white, so pixels
//           outside the slide (alpha 0) become white.
enum class PixelFormat { kRGB = 0, kRGBA = 1, kARGB32 = 2 };
enum class OutType { kFloat32 = 0, kFloat16 = 1, kBFloat16 = 2, kUInt8 = 3 };

// Bytes of one output value of type t.
inline std::size_t value_bytes(OutType t) {
  return t == OutType::kFloat32 ? 4 : t == OutType::kUInt8 ? 1 : 2;
}

struct PreprocessParams {
  PixelFormat format = PixelFormat::kRGB;
  std::int64_t out_h = 224, out_w = 224;
  Filter filter = Filter::kBilinear;
  float mean[3] = {0.485f, 0.456f, 0.406f};
  float std[3] = {0.229f, 0.224f, 0.225f};
  OutType type = OutType::kFloat32;
};

// n source images of h x w pixels, contiguous. crops (n x 4: x, y, width, height, inside the
// image) or nullptr for the whole image. Output: n x 3 x out_h x out_w of `type` (float16 and
// bfloat16 as their uint16 bit patterns), value = (u / 255 - mean) / std in float32 as
// torchvision's ToTensor + Normalize compute it, u the 8-bit pixel of the PIL-exact resize, then
// rounded to nearest-even for the 16-bit types. kUInt8 writes u itself (no normalisation: the
// uint8 batch a GPU normalises after a 4x smaller host-to-device copy). Parallel over images.
void preprocess_batch(const void* src, std::int64_t n, std::int64_t h, std::int64_t w,
                      const std::int32_t* crops, const PreprocessParams& p, void* out,
                      int threads);

// Premultiplied ARGB32 pixels -> packed RGB composited over white (alpha 0 becomes white).
void argb32_to_rgb(const std::uint32_t* src, std::size_t n, std::uint8_t* dst, int threads);

// IEEE float32 -> float16 / bfloat16 bit patterns, round to nearest even.
std::uint16_t float_to_half(float f);
std::uint16_t float_to_bfloat16(float f);

}  // namespace tb::tiling
