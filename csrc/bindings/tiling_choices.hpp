// The string spellings of the patch-preprocessing options and the check of its output buffer,
// shared by _core.tiling (tiling.cpp) and _core.slides (slides.cpp), which both fill
// PreprocessParams.
#pragma once

#include <stdexcept>
#include <string>

#include "bindings/common.hpp"
#include "tiling/resample.hpp"

namespace tb::bindings {

inline constexpr Choice<tiling::Filter> kFilters[] = {{"bilinear", tiling::Filter::kBilinear},
                                                      {"bicubic", tiling::Filter::kBicubic}};

inline constexpr Choice<tiling::OutType> kOutTypes[] = {{"float32", tiling::OutType::kFloat32},
                                                        {"float16", tiling::OutType::kFloat16},
                                                        {"bfloat16", tiling::OutType::kBFloat16},
                                                        {"uint8", tiling::OutType::kUInt8}};

using tiling::value_bytes;

// Checks that `out` is the writeable C-contiguous (n, 3, h, w) batch buffer of `type` (named
// `type_name` in the message) that the fused preprocessing writes into.
inline void check_batch_out(const py::array& out, py::ssize_t n, tiling::OutType type,
                            const std::string& type_name) {
  if (out.ndim() != 4 || out.shape(0) != n || out.shape(1) != 3 ||
      static_cast<std::size_t>(out.itemsize()) != value_bytes(type) ||
      !(out.flags() & py::array::c_style) || !out.writeable()) {
    throw std::invalid_argument("out: expected a writeable C-contiguous (" + std::to_string(n) +
                                ", 3, h, w) buffer of " + type_name);
  }
}

}  // namespace tb::bindings
