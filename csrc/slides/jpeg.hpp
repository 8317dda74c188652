// JPEG tile decoding through libjpeg(-turbo), loaded at run time.
//
// The core is compiled against the libjpeg API header (jpeglib.h, from the system's libjpeg-turbo
// development files) but links no libjpeg: the library is opened with dlopen, from a path the
// Python package chooses (the libjpeg-turbo that Pillow's wheel bundles, or the system's
// libjpeg). That keeps the wheel free of a second copy of libjpeg and lets one build use
// whichever compatible library a machine has. A library whose ABI differs from the header's
// (JPEG_LIB_VERSION 62 vs 80) is refused when loaded: jpeg_CreateDecompress checks the version
// and the struct size, and its error is reported instead of a crash.
//
// Decoding follows what tifffile + imagecodecs do for TIFF JPEG tiles (tifffile's
// jpeg_decode_colorspace): abbreviated streams are decoded after the JPEGTables stream (TIFF
// Technical Note 2, "JPEGTables" field), photometric RGB without a JFIF marker is decoded as
// RGB components (Aperio SVS), everything else as libjpeg detects it, always to RGB output; the
// default integer IDCT (JDCT_ISLOW) and fancy upsampling, so pixels equal imagecodecs' and
// OpenSlide's (same decoder, same settings). Warnings (e.g. a premature end of data) are not
// errors, as in those readers; errors throw tb::slides::jpeg_error.
#pragma once

#include <cstddef>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

namespace tb::slides {

class jpeg_error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// JPEG_LIB_VERSION of the header this core was compiled against; 0 when it was built without
// jpeglib.h (then no JPEG decoding is available and jpeg_load always fails).
int jpeg_abi_version();

// Opens the libjpeg at `path` (dlopen) and checks that it speaks this build's ABI. Returns "" on
// success (also when a library is already loaded: the first loaded library stays for the life of
// the process) or the reason this library cannot be used. Thread-safe.
std::string jpeg_load(const std::string& path);

// The path of the loaded library, or "" when none is loaded.
std::string jpeg_loaded_path();

// How the JPEG's components are to be interpreted.
enum class JpegColor {
  kDetect = 0,  // as libjpeg detects it (JFIF / Adobe markers, component ids): YCbCr usually
  kRGB = 1,     // RGB components (TIFF photometric RGB without JFIF: Aperio SVS)
};

// Decodes one JPEG stream (possibly abbreviated: its tables in `tables`, which may be null) into
// packed 8-bit RGB, resizing `pixels` to width * height * 3. Throws jpeg_error with libjpeg's
// message, when no library is loaded, when the image is not 3-component 8-bit, or when its
// header claims more than `max_pixels` pixels (a damaged size field must not cost gigabytes).
void jpeg_decode_rgb(const std::uint8_t* tables, std::size_t n_tables, const std::uint8_t* data,
                     std::size_t n_data, JpegColor color, std::size_t max_pixels,
                     std::vector<std::uint8_t>& pixels, int* width, int* height);

}  // namespace tb::slides
