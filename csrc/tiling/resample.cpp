// Pillow's filter taps are computed in double precision; a fused multiply-add would change their
// last bit and occasionally a fixed-point tap, so contraction is disabled in this file.
#if defined(__clang__)
#pragma clang fp contract(off)
#elif defined(__GNUC__)
#pragma GCC optimize("fp-contract=off")
#endif

#include "tiling/resample.hpp"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <stdexcept>
#include <type_traits>

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#include <immintrin.h>
#endif

#include "common/parallel.hpp"

namespace tb::tiling {

namespace {

constexpr int kPrecisionBits = 32 - 8 - 2;  // Pillow's PRECISION_BITS for 8-bit images
constexpr std::int32_t kHalf = 1 << (kPrecisionBits - 1);

double bilinear_kernel(double x) {
  if (x < 0.0) x = -x;
  if (x < 1.0) return 1.0 - x;
  return 0.0;
}

double bicubic_kernel(double x) {  // Keys (1981), a = -0.5
  constexpr double a = -0.5;
  if (x < 0.0) x = -x;
  if (x < 1.0) return ((a + 2.0) * x - (a + 3.0)) * x * x + 1;
  if (x < 2.0) return (((x - 5) * x + 8) * x - 4) * a;
  return 0.0;
}

inline std::uint8_t clip8(std::int32_t v) {
  // arithmetic shift (floor), then clamp: what Pillow's clip8 lookup table does
  const std::int32_t q = v >> kPrecisionBits;
  return static_cast<std::uint8_t>(q < 0 ? 0 : (q > 255 ? 255 : q));
}

// Hot loops are compiled twice on x86-64 Linux/GCC (AVX2 and baseline), picked at load time.
#if defined(__GNUC__) && !defined(__clang__) && defined(__x86_64__) && defined(__linux__)
#define TB_SIMD_CLONES __attribute__((target_clones("avx2", "default")))
#else
#define TB_SIMD_CLONES
#endif

// Horizontal taps rewritten with one fixed count K per output (the window slid back inside the
// image and padded with zero taps, which add exactly nothing), so the inner loops unroll.
struct FixedTaps {
  int K = 0;
  std::vector<std::int32_t> first, k;
  std::vector<std::int32_t> first3, k_by_tap;  // first * 3 and the taps tap-major (SIMD path)
};

FixedTaps fix_taps(const Taps& t, std::int64_t in_size) {
  FixedTaps f;
  for (std::int32_t c : t.count) f.K = std::max(f.K, static_cast<int>(c));
  if (f.K > in_size) f.K = static_cast<int>(in_size);
  const std::size_t n = t.first.size();
  f.first.resize(n);
  f.k.assign(n * static_cast<std::size_t>(f.K), 0);
  for (std::size_t o = 0; o < n; ++o) {
    const std::int64_t first = std::min<std::int64_t>(t.first[o], in_size - f.K);
    f.first[o] = static_cast<std::int32_t>(first);
    for (std::int32_t j = 0; j < t.count[o]; ++j) {
      f.k[o * f.K + (t.first[o] - first) + j] = t.k[o * t.ksize + j];
    }
  }
  f.first3.resize(n);
  f.k_by_tap.resize(n * static_cast<std::size_t>(f.K));
  for (std::size_t o = 0; o < n; ++o) {
    f.first3[o] = 3 * f.first[o];
    for (int j = 0; j < f.K; ++j) f.k_by_tap[j * n + o] = f.k[o * f.K + j];
  }
  return f;
}

template <int C, int K>
inline void h_rows_fixed(const std::uint8_t* in, std::int64_t stride, std::int64_t row0,
                         std::int64_t rows, const FixedTaps& t, std::int64_t out_w,
                         std::uint8_t* out) {
  const int k_n = K > 0 ? K : t.K;
  std::int64_t r = 0;
  // two rows at a time share the tap loads
  for (; r + 1 < rows; r += 2) {
    const std::uint8_t* s0 = in + (row0 + r) * stride;
    const std::uint8_t* s1 = s0 + stride;
    std::uint8_t* d0 = out + r * out_w * C;
    std::uint8_t* d1 = d0 + out_w * C;
    for (std::int64_t xx = 0; xx < out_w; ++xx) {
      const std::int32_t* k = t.k.data() + xx * k_n;
      const std::int64_t off = static_cast<std::int64_t>(t.first[xx]) * C;
      const std::uint8_t* p0 = s0 + off;
      const std::uint8_t* p1 = s1 + off;
      std::int32_t a0[C], a1[C];
      for (int c = 0; c < C; ++c) a0[c] = a1[c] = kHalf;
      for (int j = 0; j < (K > 0 ? K : k_n); ++j) {
        const std::int32_t kj = k[j];
        for (int c = 0; c < C; ++c) {
          a0[c] += static_cast<std::int32_t>(p0[j * C + c]) * kj;
          a1[c] += static_cast<std::int32_t>(p1[j * C + c]) * kj;
        }
      }
      for (int c = 0; c < C; ++c) {
        d0[xx * C + c] = clip8(a0[c]);
        d1[xx * C + c] = clip8(a1[c]);
      }
    }
  }
  for (; r < rows; ++r) {
    const std::uint8_t* src = in + (row0 + r) * stride;
    std::uint8_t* dst = out + r * out_w * C;
    for (std::int64_t xx = 0; xx < out_w; ++xx) {
      const std::int32_t* k = t.k.data() + xx * k_n;
      const std::uint8_t* p = src + static_cast<std::int64_t>(t.first[xx]) * C;
      std::int32_t acc[C];
      for (int c = 0; c < C; ++c) acc[c] = kHalf;
      for (int j = 0; j < (K > 0 ? K : k_n); ++j) {
        for (int c = 0; c < C; ++c) acc[c] += static_cast<std::int32_t>(p[j * C + c]) * k[j];
      }
      for (int c = 0; c < C; ++c) dst[xx * C + c] = clip8(acc[c]);
    }
  }
}

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#define TB_HAVE_AVX2_GATHER 1
// RGB rows with AVX2: eight output pixels at a time, each tap of each channel fetched with one
// gather, the same 32-bit integer arithmetic as the scalar path (bit-identical results). Output
// pixels whose 4-byte gathers could pass the end of the row are left to the scalar loop.
__attribute__((target("avx2"))) void h_rows_rgb_avx2(const std::uint8_t* in, std::int64_t stride,
                                                     std::int64_t row0, std::int64_t rows,
                                                     const FixedTaps& t, std::int64_t in_w,
                                                     std::int64_t out_w, std::uint8_t* out) {
  const int K = t.K;
  const std::int64_t row_bytes = 3 * in_w;
  std::int64_t n_vec = 0;  // outputs [0, n_vec) are safe for the gathers
  while (n_vec + 8 <= out_w && t.first3[n_vec + 7] + 3 * (K - 1) + 2 + 4 <= row_bytes) n_vec += 8;
  const __m256i byte_mask = _mm256_set1_epi32(0xff);
  const __m256i half = _mm256_set1_epi32(kHalf);
  const __m256i zero = _mm256_setzero_si256();
  const __m256i max8 = _mm256_set1_epi32(255);
  alignas(32) std::int32_t res[3][8];
  for (std::int64_t r = 0; r < rows; ++r) {
    const std::uint8_t* src = in + (row0 + r) * stride;
    std::uint8_t* dst = out + r * out_w * 3;
    for (std::int64_t xx = 0; xx < n_vec; xx += 8) {
      const __m256i idx =
          _mm256_loadu_si256(reinterpret_cast<const __m256i*>(t.first3.data() + xx));
      __m256i a0 = half, a1 = half, a2 = half;
      for (int j = 0; j < K; ++j) {
        const __m256i kj = _mm256_loadu_si256(
            reinterpret_cast<const __m256i*>(t.k_by_tap.data() + j * out_w + xx));
        const auto* base = reinterpret_cast<const int*>(src + 3 * j);
        const __m256i v0 = _mm256_and_si256(_mm256_i32gather_epi32(base, idx, 1), byte_mask);
        const __m256i v1 = _mm256_and_si256(
            _mm256_i32gather_epi32(reinterpret_cast<const int*>(src + 3 * j + 1), idx, 1),
            byte_mask);
        const __m256i v2 = _mm256_and_si256(
            _mm256_i32gather_epi32(reinterpret_cast<const int*>(src + 3 * j + 2), idx, 1),
            byte_mask);
        a0 = _mm256_add_epi32(a0, _mm256_mullo_epi32(v0, kj));
        a1 = _mm256_add_epi32(a1, _mm256_mullo_epi32(v1, kj));
        a2 = _mm256_add_epi32(a2, _mm256_mullo_epi32(v2, kj));
      }
      auto clip = [&](__m256i a) {
        return _mm256_min_epi32(_mm256_max_epi32(_mm256_srai_epi32(a, kPrecisionBits), zero), max8);
      };
      _mm256_store_si256(reinterpret_cast<__m256i*>(res[0]), clip(a0));
      _mm256_store_si256(reinterpret_cast<__m256i*>(res[1]), clip(a1));
      _mm256_store_si256(reinterpret_cast<__m256i*>(res[2]), clip(a2));
      std::uint8_t* o = dst + xx * 3;
      for (int i = 0; i < 8; ++i) {
        o[3 * i] = static_cast<std::uint8_t>(res[0][i]);
        o[3 * i + 1] = static_cast<std::uint8_t>(res[1][i]);
        o[3 * i + 2] = static_cast<std::uint8_t>(res[2][i]);
      }
    }
    for (std::int64_t xx = n_vec; xx < out_w; ++xx) {  // scalar tail
      const std::int32_t* k = t.k.data() + xx * K;
      const std::uint8_t* p = src + t.first3[xx];
      std::int32_t a[3] = {kHalf, kHalf, kHalf};
      for (int j = 0; j < K; ++j) {
        for (int c = 0; c < 3; ++c) a[c] += static_cast<std::int32_t>(p[3 * j + c]) * k[j];
      }
      for (int c = 0; c < 3; ++c) dst[xx * 3 + c] = clip8(a[c]);
    }
  }
}

// TUMORBOARD_DISABLE_AVX2=1 forces the portable paths (used by the tests).
bool cpu_has_avx2() {
  static const bool has = [] {
    const char* off = std::getenv("TUMORBOARD_DISABLE_AVX2");
    if (off != nullptr && *off != '\0' && *off != '0') return false;
    __builtin_cpu_init();
    return __builtin_cpu_supports("avx2") != 0;
  }();
  return has;
}
#endif

// Horizontal pass over rows [row0, row0 + rows) of `in` (row stride in bytes) into a packed
// rows x out_w x C buffer.
template <int C>
TB_SIMD_CLONES void h_pass_scalar(const std::uint8_t* in, std::int64_t stride, std::int64_t row0,
                                  std::int64_t rows, const FixedTaps& t, std::int64_t out_w,
                                  std::uint8_t* out) {
  switch (t.K) {
    case 1: return h_rows_fixed<C, 1>(in, stride, row0, rows, t, out_w, out);
    case 2: return h_rows_fixed<C, 2>(in, stride, row0, rows, t, out_w, out);
    case 3: return h_rows_fixed<C, 3>(in, stride, row0, rows, t, out_w, out);
    case 4: return h_rows_fixed<C, 4>(in, stride, row0, rows, t, out_w, out);
    case 5: return h_rows_fixed<C, 5>(in, stride, row0, rows, t, out_w, out);
    case 6: return h_rows_fixed<C, 6>(in, stride, row0, rows, t, out_w, out);
    default: return h_rows_fixed<C, 0>(in, stride, row0, rows, t, out_w, out);
  }
}

// in_w: input pixels per row (the gathers must stay inside a row).
template <int C>
void h_pass(const std::uint8_t* in, std::int64_t stride, std::int64_t row0, std::int64_t rows,
            const FixedTaps& t, std::int64_t in_w, std::int64_t out_w, std::uint8_t* out) {
#ifdef TB_HAVE_AVX2_GATHER
  if (C == 3 && t.K > 0 && cpu_has_avx2()) {
    return h_rows_rgb_avx2(in, stride, row0, rows, t, in_w, out_w, out);
  }
#endif
  (void)in_w;
  h_pass_scalar<C>(in, stride, row0, rows, t, out_w, out);
}

// Vertical taps of output row yy applied to rows of `in` (row stride in bytes, first stored row is
// source row `shift`), `len` bytes per row, clipped into out; acc is scratch of len int32.
TB_SIMD_CLONES void v_row(const std::uint8_t* in, std::int64_t stride, std::int64_t shift,
                          const Taps& t, std::int64_t yy, std::int64_t len, std::int32_t* acc,
                          std::uint8_t* out) {
  for (std::int64_t i = 0; i < len; ++i) acc[i] = kHalf;
  const std::int32_t* k = t.k.data() + yy * t.ksize;
  for (std::int32_t j = 0; j < t.count[yy]; ++j) {
    const std::uint8_t* row = in + (t.first[yy] + j - shift) * stride;
    const std::int32_t kj = k[j];
    for (std::int64_t i = 0; i < len; ++i) acc[i] += static_cast<std::int32_t>(row[i]) * kj;
  }
  for (std::int64_t i = 0; i < len; ++i) {
    const std::int32_t q = acc[i] >> kPrecisionBits;
    out[i] = static_cast<std::uint8_t>(q < 0 ? 0 : (q > 255 ? 255 : q));
  }
}

// Pillow 13 runs the vertical pass first when the image shrinks vertically by more than twice
// the horizontal shrink (in pixels): out_h < h and 2 * (w - out_w) < h - out_h. Determined
// empirically against Pillow 13.0 (the two orders differ by intermediate rounding); the test
// suite checks both regimes against PIL.
bool vertical_first(std::int64_t h, std::int64_t w, std::int64_t oh, std::int64_t ow) {
  return oh < h && 2 * (w - ow) < (h - oh);
}

template <int C>
void resize_impl(const std::uint8_t* src, std::int64_t h, std::int64_t w, std::int64_t oh,
                 std::int64_t ow, Filter f, std::uint8_t* dst, int threads) {
  const bool need_h = ow != w;
  const bool need_v = oh != h;
  if (!need_h && !need_v) {
    std::memcpy(dst, src, static_cast<std::size_t>(h * w * C));
    return;
  }
  const Taps ty = need_v ? resample_taps(h, oh, f) : Taps{};
  const FixedTaps tx = need_h ? fix_taps(resample_taps(w, ow, f), w) : FixedTaps{};
  auto v_rows = [&](const std::uint8_t* in, std::int64_t stride, std::int64_t shift,
                    std::int64_t len, std::uint8_t* out) {
    parallel_blocks(oh, threads, [&](std::int64_t a, std::int64_t b) {
      std::vector<std::int32_t> acc(static_cast<std::size_t>(len));
      for (std::int64_t yy = a; yy < b; ++yy) {
        v_row(in, stride, shift, ty, yy, len, acc.data(), out + yy * len);
      }
    });
  };
  auto h_rows = [&](const std::uint8_t* in, std::int64_t stride, std::int64_t r0,
                    std::int64_t rows, std::uint8_t* out) {
    parallel_blocks(rows, threads, [&](std::int64_t a, std::int64_t b) {
      h_pass<C>(in, stride, r0 + a, b - a, tx, w, ow, out + a * ow * C);
    });
  };
  if (!need_v) return h_rows(src, w * C, 0, h, dst);
  if (!need_h) return v_rows(src, w * C, 0, w * C, dst);
  std::vector<std::uint8_t> tmp;
  if (vertical_first(h, w, oh, ow)) {
    tmp.resize(static_cast<std::size_t>(oh * w * C));
    v_rows(src, w * C, 0, w * C, tmp.data());
    h_rows(tmp.data(), w * C, 0, oh, dst);
  } else {
    const std::int64_t r0 = ty.first[0], r1 = ty.first[oh - 1] + ty.count[oh - 1];
    tmp.resize(static_cast<std::size_t>((r1 - r0) * ow * C));
    h_rows(src, w * C, r0, r1 - r0, tmp.data());
    v_rows(tmp.data(), ow * C, r0, ow * C, dst);
  }
}

// ---- fused preprocessing ---------------------------------------------------------------------

template <class T>
struct Lut {
  T v[3][256];
};

template <class T>
Lut<T> make_lut(const PreprocessParams& p) {
  Lut<T> lut;
  for (int c = 0; c < 3; ++c) {
    const float mean = p.mean[c], sd = p.std[c];
    for (int u = 0; u < 256; ++u) {
      const float x = static_cast<float>(u) / 255.0f;  // torchvision to_tensor: div(255)
      const float y = (x - mean) / sd;                   // Normalize: sub_(mean).div_(std)
      if constexpr (sizeof(T) == 1) {
        lut.v[c][u] = static_cast<T>(u);  // kUInt8: the resized pixel, normalised later
      } else if constexpr (sizeof(T) == 4) {
        lut.v[c][u] = y;
      } else if (p.type == OutType::kFloat16) {
        lut.v[c][u] = float_to_half(y);
      } else {
        lut.v[c][u] = float_to_bfloat16(y);
      }
    }
  }
  return lut;
}

inline void argb_pixel(std::uint32_t px, std::uint8_t* o) {
  const int white = 255 - static_cast<int>(px >> 24);  // premultiplied "over white"
  o[0] = static_cast<std::uint8_t>(std::min(255, static_cast<int>((px >> 16) & 255) + white));
  o[1] = static_cast<std::uint8_t>(std::min(255, static_cast<int>((px >> 8) & 255) + white));
  o[2] = static_cast<std::uint8_t>(std::min(255, static_cast<int>(px & 255) + white));
}

template <class T>
TB_SIMD_CLONES void emit_planes(const std::uint8_t* row, std::int64_t ow, const Lut<T>& lut,
                                T* o0, T* o1, T* o2) {
  for (std::int64_t xx = 0; xx < ow; ++xx) o0[xx] = lut.v[0][row[3 * xx]];
  for (std::int64_t xx = 0; xx < ow; ++xx) o1[xx] = lut.v[1][row[3 * xx + 1]];
  for (std::int64_t xx = 0; xx < ow; ++xx) o2[xx] = lut.v[2][row[3 * xx + 2]];
}

#ifdef TB_HAVE_AVX2_GATHER
// float32 planes with AVX2: bytes and table entries fetched by gathers, 8 pixels at a time.
__attribute__((target("avx2"))) void emit_planes_f32_avx2(const std::uint8_t* row, std::int64_t ow,
                                                          const Lut<float>& lut, float* o0,
                                                          float* o1, float* o2) {
  const __m256i byte_mask = _mm256_set1_epi32(0xff);
  const __m256i step = _mm256_setr_epi32(0, 3, 6, 9, 12, 15, 18, 21);
  float* outs[3] = {o0, o1, o2};
  std::int64_t xx = 0;
  for (; xx + 8 <= ow && 3 * (xx + 7) + 2 + 4 <= 3 * ow; xx += 8) {  // 4-byte reads stay in row
    for (int c = 0; c < 3; ++c) {
      const auto* base = reinterpret_cast<const int*>(row + 3 * xx + c);
      const __m256i idx = _mm256_and_si256(_mm256_i32gather_epi32(base, step, 1), byte_mask);
      _mm256_storeu_ps(outs[c] + xx, _mm256_i32gather_ps(lut.v[c], idx, 4));
    }
  }
  for (; xx < ow; ++xx) {
    for (int c = 0; c < 3; ++c) outs[c][xx] = lut.v[c][row[3 * xx + c]];
  }
}
#endif

// Writes the crop of image i as packed RGB into buf (stride cw * 3); returns a pointer and stride
// to read it from (the source itself for unpadded RGB).
const std::uint8_t* packed_rgb(const void* src, PixelFormat fmt, std::int64_t i, std::int64_t h,
                               std::int64_t w, std::int64_t x0, std::int64_t y0, std::int64_t cw,
                               std::int64_t ch, std::vector<std::uint8_t>& buf,
                               std::int64_t& stride) {
  if (fmt == PixelFormat::kRGB) {
    stride = w * 3;
    return static_cast<const std::uint8_t*>(src) + ((i * h + y0) * w + x0) * 3;
  }
  buf.resize(static_cast<std::size_t>(cw * ch * 3));
  stride = cw * 3;
  for (std::int64_t y = 0; y < ch; ++y) {
    std::uint8_t* o = buf.data() + y * cw * 3;
    if (fmt == PixelFormat::kRGBA) {
      const std::uint8_t* s = static_cast<const std::uint8_t*>(src) + ((i * h + y0 + y) * w + x0) * 4;
      for (std::int64_t x = 0; x < cw; ++x, s += 4, o += 3) {
        const int a = s[3];
        if (a == 255) {
          o[0] = s[0], o[1] = s[1], o[2] = s[2];
        } else {
          for (int c = 0; c < 3; ++c) o[c] = static_cast<std::uint8_t>((s[c] * a + 255 * (255 - a) + 127) / 255);
        }
      }
    } else {
      const std::uint32_t* s = static_cast<const std::uint32_t*>(src) + (i * h + y0 + y) * w + x0;
      for (std::int64_t x = 0; x < cw; ++x, o += 3) argb_pixel(s[x], o);
    }
  }
  return buf.data();
}

template <class T>
void preprocess_impl(const void* src, std::int64_t n, std::int64_t h, std::int64_t w,
                     const std::int32_t* crops, const PreprocessParams& p, T* out, int threads) {
  const Lut<T> lut = make_lut<T>(p);
  const std::int64_t oh = p.out_h, ow = p.out_w;
  const std::int64_t plane = oh * ow;
  // Taps for the common crop size, shared by all images that have it.
  const std::int64_t cw0 = crops ? crops[2] : w, ch0 = crops ? crops[3] : h;
  const FixedTaps tx0 = fix_taps(resample_taps(cw0, ow, p.filter), cw0);
  const Taps ty0 = resample_taps(ch0, oh, p.filter);
  parallel_blocks(n, threads, [&](std::int64_t a, std::int64_t b) {
    std::vector<std::uint8_t> conv, tmp, vrow, hrow;
    std::vector<std::int32_t> acc;
    FixedTaps tx_own;
    Taps ty_own;
    for (std::int64_t i = a; i < b; ++i) {
      const std::int64_t x0 = crops ? crops[4 * i] : 0, y0 = crops ? crops[4 * i + 1] : 0;
      const std::int64_t cw = crops ? crops[4 * i + 2] : w, ch = crops ? crops[4 * i + 3] : h;
      const FixedTaps* tx = &tx0;
      const Taps* ty = &ty0;
      if (cw != cw0) tx = &(tx_own = fix_taps(resample_taps(cw, ow, p.filter), cw));
      if (ch != ch0) ty = &(ty_own = resample_taps(ch, oh, p.filter));
      std::int64_t stride = 0;
      const std::uint8_t* rgb = packed_rgb(src, p.format, i, h, w, x0, y0, cw, ch, conv, stride);
      T* o = out + i * 3 * plane;
      auto emit = [&](std::int64_t yy, const std::uint8_t* row) {  // packed RGB row -> planes
        T* o0 = o + yy * ow;
#ifdef TB_HAVE_AVX2_GATHER
        if constexpr (std::is_same_v<T, float>) {
          if (cpu_has_avx2()) return emit_planes_f32_avx2(row, ow, lut, o0, o0 + plane, o0 + 2 * plane);
        }
#endif
        emit_planes<T>(row, ow, lut, o0, o0 + plane, o0 + 2 * plane);
      };
      const bool need_h = cw != ow, need_v = ch != oh;
      if (!need_v) {
        if (need_h) {
          tmp.resize(static_cast<std::size_t>(ch * ow * 3));
          h_pass<3>(rgb, stride, 0, ch, *tx, cw, ow, tmp.data());
        }
        for (std::int64_t yy = 0; yy < oh; ++yy) {
          emit(yy, need_h ? tmp.data() + yy * ow * 3 : rgb + yy * stride);
        }
        continue;
      }
      if (need_h && vertical_first(ch, cw, oh, ow)) {
        // vertical taps on the source row by row, then the horizontal pass of that row
        acc.resize(static_cast<std::size_t>(cw * 3));
        vrow.resize(static_cast<std::size_t>(cw * 3));
        hrow.resize(static_cast<std::size_t>(ow * 3));
        for (std::int64_t yy = 0; yy < oh; ++yy) {
          v_row(rgb, stride, 0, *ty, yy, cw * 3, acc.data(), vrow.data());
          h_pass<3>(vrow.data(), 0, 0, 1, *tx, cw, ow, hrow.data());
          emit(yy, hrow.data());
        }
        continue;
      }
      const std::uint8_t* vin = rgb;
      std::int64_t shift = 0;
      if (need_h) {
        const std::int64_t r0 = ty->first[0], r1 = ty->first[oh - 1] + ty->count[oh - 1];
        tmp.resize(static_cast<std::size_t>((r1 - r0) * ow * 3));
        h_pass<3>(rgb, stride, r0, r1 - r0, *tx, cw, ow, tmp.data());
        vin = tmp.data();
        stride = ow * 3;
        shift = r0;
      }
      acc.resize(static_cast<std::size_t>(ow * 3));
      hrow.resize(static_cast<std::size_t>(ow * 3));
      for (std::int64_t yy = 0; yy < oh; ++yy) {
        v_row(vin, stride, shift, *ty, yy, ow * 3, acc.data(), hrow.data());
        emit(yy, hrow.data());
      }
    }
  });
}

}  // namespace

Taps resample_taps(std::int64_t in_size, std::int64_t out_size, Filter f) {
  if (in_size <= 0 || out_size <= 0) throw std::invalid_argument("resample sizes must be positive");
  const double base_support = f == Filter::kBilinear ? 1.0 : 2.0;
  double (*kernel)(double) = f == Filter::kBilinear ? bilinear_kernel : bicubic_kernel;
  const double scale = static_cast<double>(in_size) / static_cast<double>(out_size);
  const double filterscale = scale < 1.0 ? 1.0 : scale;
  const double support = base_support * filterscale;
  Taps t;
  t.ksize = static_cast<int>(std::ceil(support)) * 2 + 1;
  t.first.resize(static_cast<std::size_t>(out_size));
  t.count.resize(static_cast<std::size_t>(out_size));
  t.k.assign(static_cast<std::size_t>(out_size * t.ksize), 0);
  std::vector<double> kk(static_cast<std::size_t>(t.ksize));
  const double ss = 1.0 / filterscale;
  for (std::int64_t xx = 0; xx < out_size; ++xx) {
    const double center = (static_cast<double>(xx) + 0.5) * scale;
    auto xmin = static_cast<std::int64_t>(center - support + 0.5);
    if (xmin < 0) xmin = 0;
    auto xmax = static_cast<std::int64_t>(center + support + 0.5);
    if (xmax > in_size) xmax = in_size;
    xmax -= xmin;
    double ww = 0.0;
    for (std::int64_t x = 0; x < xmax; ++x) {
      const double wgt = kernel((static_cast<double>(x + xmin) - center + 0.5) * ss);
      kk[x] = wgt;
      ww += wgt;
    }
    for (std::int64_t x = 0; x < xmax; ++x) {
      if (ww != 0.0) kk[x] /= ww;
      const double q = kk[x] * (1 << kPrecisionBits);
      t.k[xx * t.ksize + x] = static_cast<std::int32_t>(kk[x] < 0 ? -0.5 + q : 0.5 + q);
    }
    t.first[xx] = static_cast<std::int32_t>(xmin);
    t.count[xx] = static_cast<std::int32_t>(xmax);
  }
  return t;
}

void resize_image(const std::uint8_t* src, std::int64_t h, std::int64_t w, int channels,
                  std::int64_t out_h, std::int64_t out_w, Filter f, std::uint8_t* dst,
                  int threads) {
  if (h <= 0 || w <= 0 || out_h <= 0 || out_w <= 0) {
    throw std::invalid_argument("resize sizes must be positive");
  }
  switch (channels) {
    case 1: return resize_impl<1>(src, h, w, out_h, out_w, f, dst, threads);
    case 2: return resize_impl<2>(src, h, w, out_h, out_w, f, dst, threads);
    case 3: return resize_impl<3>(src, h, w, out_h, out_w, f, dst, threads);
    case 4: return resize_impl<4>(src, h, w, out_h, out_w, f, dst, threads);
    default: throw std::invalid_argument("resize: channels must be 1 to 4");
  }
}

void preprocess_batch(const void* src, std::int64_t n, std::int64_t h, std::int64_t w,
                      const std::int32_t* crops, const PreprocessParams& p, void* out,
                      int threads) {
  if (n <= 0) return;
  if (h <= 0 || w <= 0 || p.out_h <= 0 || p.out_w <= 0) {
    throw std::invalid_argument("preprocess sizes must be positive");
  }
  for (std::int64_t i = 0; crops && i < n; ++i) {
    const std::int32_t* c = crops + 4 * i;
    if (c[0] < 0 || c[1] < 0 || c[2] <= 0 || c[3] <= 0 || c[0] + static_cast<std::int64_t>(c[2]) > w ||
        c[1] + static_cast<std::int64_t>(c[3]) > h) {
      throw std::invalid_argument("crop box " + std::to_string(i) + " is not inside the image");
    }
  }
  if (p.type == OutType::kFloat32) {
    preprocess_impl<float>(src, n, h, w, crops, p, static_cast<float*>(out), threads);
  } else if (p.type == OutType::kUInt8) {
    preprocess_impl<std::uint8_t>(src, n, h, w, crops, p, static_cast<std::uint8_t*>(out),
                                  threads);
  } else {
    preprocess_impl<std::uint16_t>(src, n, h, w, crops, p, static_cast<std::uint16_t*>(out),
                                   threads);
  }
}

void argb32_to_rgb(const std::uint32_t* src, std::size_t n, std::uint8_t* dst, int threads) {
  parallel_blocks(static_cast<std::int64_t>(n), threads, [&](std::int64_t a, std::int64_t b) {
    for (std::int64_t i = a; i < b; ++i) argb_pixel(src[i], dst + 3 * i);
  });
}

std::uint16_t float_to_half(float f) {
  std::uint32_t x;
  std::memcpy(&x, &f, 4);
  const auto sign = static_cast<std::uint16_t>((x >> 16) & 0x8000u);
  const std::uint32_t ax = x & 0x7fffffffu;
  if (ax >= 0x7f800000u) return sign | (ax > 0x7f800000u ? 0x7e00u : 0x7c00u);  // NaN, inf
  if (ax >= 0x47800000u) return sign | 0x7c00u;  // >= 65536 overflows
  if (ax < 0x38800000u) {                        // below 2^-14: half subnormal or zero
    if (ax < 0x33000000u) return sign;           // <= 2^-25 rounds to zero
    const std::uint32_t e = ax >> 23;
    const std::uint32_t mant = (ax & 0x7fffffu) | 0x800000u;
    const std::uint32_t shift = 126 - e;  // 14..24
    std::uint32_t q = mant >> shift;
    const std::uint32_t rem = mant & ((1u << shift) - 1);
    const std::uint32_t halfway = 1u << (shift - 1);
    if (rem > halfway || (rem == halfway && (q & 1u))) ++q;
    return static_cast<std::uint16_t>(sign | q);
  }
  std::uint32_t hbits = (ax - 0x38000000u) >> 13;  // rebias 127 -> 15
  const std::uint32_t rem = ax & 0x1fffu;
  if (rem > 0x1000u || (rem == 0x1000u && (hbits & 1u))) ++hbits;  // may carry into inf
  return static_cast<std::uint16_t>(sign | hbits);
}

std::uint16_t float_to_bfloat16(float f) {
  std::uint32_t x;
  std::memcpy(&x, &f, 4);
  if ((x & 0x7fffffffu) > 0x7f800000u) return static_cast<std::uint16_t>((x >> 16) | 0x0040u);
  x += 0x7fffu + ((x >> 16) & 1u);
  return static_cast<std::uint16_t>(x >> 16);
}

}  // namespace tb::tiling
