// Patch grid over a slide from a low-resolution tissue mask, with tissue fractions read from an
// integral image (summed-area table, Crow 1984).
//
// Grid geometry is TRIDENT's (WSIPatcher): level-0 top-left corners (c * step, r * step) for
// c < ceil(width / step), r < ceil(height / step), row-major (y outer). The mask covers the whole
// level-0 extent: mask pixel (i, j) is the level-0 rectangle [j * sx, (j + 1) * sx) x
// [i * sy, (i + 1) * sy) with sx = width / mask_w, sy = height / mask_h, so the tissue area inside
// a patch is exact (the piecewise-constant mask integrated over the square).
#pragma once

#include <cstdint>
#include <vector>

namespace tb::tiling {

// (h + 1) x (w + 1) table, S[i][j] = number of nonzero mask pixels above and left of (i, j).
struct IntegralImage {
  std::int64_t h = 0, w = 0;
  std::vector<std::uint32_t> s;
  std::uint32_t at(std::int64_t i, std::int64_t j) const { return s[i * (w + 1) + j]; }
  // Integral of the mask over [0, x) x [0, y) for real x in [0, w], y in [0, h]: the bilinear
  // interpolation of the table is exact for a piecewise-constant image.
  double area_below(double x, double y) const;
};

IntegralImage integral_image(const std::uint8_t* mask, std::int64_t h, std::int64_t w,
                             int threads);

struct GridParams {
  std::int64_t width = 0, height = 0;  // level-0 slide size
  std::int64_t patch = 0;              // level-0 patch side
  std::int64_t step = 0;               // level-0 stride (patch - overlap)
  double min_tissue = 0.0;             // 0: any overlap with tissue; else tissue fraction >= this
};

struct GridResult {
  std::int64_t n_cols = 0, n_rows = 0;
  std::vector<std::int64_t> coords;  // x0, y0, x1, y1, ... (level-0 top-left corners)
  std::vector<float> fraction;       // tissue fraction of each kept patch (of the full square)
};

// With no mask (mask == nullptr) every grid position is kept with fraction 1.
GridResult patch_grid(const std::uint8_t* mask, std::int64_t mask_h, std::int64_t mask_w,
                      const GridParams& p, int threads);

}  // namespace tb::tiling
