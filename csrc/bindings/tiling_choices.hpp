// The string spellings of the patch-preprocessing options, shared by _core.tiling (tiling.cpp)
// and _core.slides (slides.cpp), which both fill PreprocessParams.
#pragma once

#include "bindings/common.hpp"
#include "tiling/resample.hpp"

namespace tb::bindings {

inline constexpr Choice<tiling::Filter> kFilters[] = {{"bilinear", tiling::Filter::kBilinear},
                                                      {"bicubic", tiling::Filter::kBicubic}};

inline constexpr Choice<tiling::OutType> kOutTypes[] = {{"float32", tiling::OutType::kFloat32},
                                                        {"float16", tiling::OutType::kFloat16},
                                                        {"bfloat16", tiling::OutType::kBFloat16},
                                                        {"uint8", tiling::OutType::kUInt8}};

// Bytes of one output value of `t`.
inline std::size_t value_bytes(tiling::OutType t) {
  return t == tiling::OutType::kFloat32 ? 4 : t == tiling::OutType::kUInt8 ? 1 : 2;
}

}  // namespace tb::bindings
