#include "tiling/grid.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <stdexcept>

#include "common/parallel.hpp"

namespace tb::tiling {

double IntegralImage::area_below(double x, double y) const {
  std::int64_t j = static_cast<std::int64_t>(std::floor(x));
  std::int64_t i = static_cast<std::int64_t>(std::floor(y));
  j = std::clamp<std::int64_t>(j, 0, std::max<std::int64_t>(w - 1, 0));
  i = std::clamp<std::int64_t>(i, 0, std::max<std::int64_t>(h - 1, 0));
  const double a = x - static_cast<double>(j);
  const double b = y - static_cast<double>(i);
  const double s00 = at(i, j), s01 = at(i, j + 1), s10 = at(i + 1, j), s11 = at(i + 1, j + 1);
  return s00 + a * (s01 - s00) + b * (s10 - s00) + a * b * (s11 - s01 - s10 + s00);
}

IntegralImage integral_image(const std::uint8_t* mask, std::int64_t h, std::int64_t w,
                             int threads) {
  if (h < 0 || w < 0) throw std::invalid_argument("negative mask size");
  if (static_cast<double>(h) * static_cast<double>(w) >
      static_cast<double>(std::numeric_limits<std::uint32_t>::max())) {
    throw std::invalid_argument("mask too large for a 32-bit integral image");
  }
  IntegralImage ii;
  ii.h = h;
  ii.w = w;
  const std::int64_t W = w + 1;
  ii.s.assign(static_cast<std::size_t>((h + 1) * W), 0);
  std::uint32_t* s = ii.s.data();
  // row prefix sums (independent rows), then column accumulation (independent column blocks)
  parallel_for(static_cast<std::size_t>(h), threads, [&](std::size_t yi) {
    const auto y = static_cast<std::int64_t>(yi);
    const std::uint8_t* row = mask + y * w;
    std::uint32_t* out = s + (y + 1) * W;
    std::uint32_t acc = 0;
    for (std::int64_t x = 0; x < w; ++x) {
      acc += row[x] != 0;
      out[x + 1] = acc;
    }
  });
  const std::int64_t block = 256;
  const auto n_blocks = static_cast<std::size_t>((W + block - 1) / block);
  parallel_for(n_blocks, threads, [&](std::size_t b) {
    const std::int64_t x0 = static_cast<std::int64_t>(b) * block;
    const std::int64_t x1 = std::min(W, x0 + block);
    for (std::int64_t y = 1; y <= h; ++y) {
      const std::uint32_t* prev = s + (y - 1) * W;
      std::uint32_t* cur = s + y * W;
      for (std::int64_t x = x0; x < x1; ++x) cur[x] += prev[x];
    }
  });
  return ii;
}

GridResult patch_grid(const std::uint8_t* mask, std::int64_t mask_h, std::int64_t mask_w,
                      const GridParams& p, int threads) {
  if (p.width <= 0 || p.height <= 0) throw std::invalid_argument("slide size must be positive");
  if (p.patch <= 0) throw std::invalid_argument("patch size must be positive");
  if (p.step <= 0) throw std::invalid_argument("step (patch - overlap) must be positive");
  if (mask && (mask_h <= 0 || mask_w <= 0)) throw std::invalid_argument("empty mask");
  GridResult g;
  g.n_cols = (p.width + p.step - 1) / p.step;
  g.n_rows = (p.height + p.step - 1) / p.step;

  IntegralImage ii;
  if (mask) ii = integral_image(mask, mask_h, mask_w, threads);

  // Mask-space extent of each column / row of the grid; x * mask_w / width is exact when it is
  // an integer (one rounding of an exact product).
  struct Span {
    double lo, hi;              // clipped to the mask
    std::int64_t first, last;   // mask pixels overlapping with positive length: [first, last)
  };
  auto spans = [&](std::int64_t n, std::int64_t extent, std::int64_t mask_extent) {
    std::vector<Span> out(static_cast<std::size_t>(n));
    for (std::int64_t k = 0; k < n; ++k) {
      const std::int64_t a = k * p.step;
      const double lo = static_cast<double>(a * mask_extent) / static_cast<double>(extent);
      double hi = static_cast<double>((a + p.patch) * mask_extent) / static_cast<double>(extent);
      hi = std::min(hi, static_cast<double>(mask_extent));
      const auto first = static_cast<std::int64_t>(std::floor(lo));
      const auto last = std::min<std::int64_t>(mask_extent, static_cast<std::int64_t>(std::ceil(hi)));
      out[k] = {lo, hi, first, last};
    }
    return out;
  };
  std::vector<Span> cols, rows;
  double patch_area = 1.0;  // patch area in mask pixels
  if (mask) {
    cols = spans(g.n_cols, p.width, mask_w);
    rows = spans(g.n_rows, p.height, mask_h);
    patch_area = (static_cast<double>(p.patch) * mask_w / static_cast<double>(p.width)) *
                 (static_cast<double>(p.patch) * mask_h / static_cast<double>(p.height));
  }

  std::vector<std::vector<std::int64_t>> row_coords(static_cast<std::size_t>(g.n_rows));
  std::vector<std::vector<float>> row_frac(static_cast<std::size_t>(g.n_rows));
  parallel_for(static_cast<std::size_t>(g.n_rows), threads, [&](std::size_t ri) {
    const auto r = static_cast<std::int64_t>(ri);
    auto& rc = row_coords[ri];
    auto& rf = row_frac[ri];
    for (std::int64_t c = 0; c < g.n_cols; ++c) {
      float frac = 1.0f;
      if (mask) {
        const Span& sx = cols[c];
        const Span& sy = rows[r];
        if (sx.last <= sx.first || sy.last <= sy.first) continue;
        const std::uint32_t count = ii.at(sy.last, sx.last) - ii.at(sy.first, sx.last) -
                                    ii.at(sy.last, sx.first) + ii.at(sy.first, sx.first);
        if (count == 0) continue;
        const double area = ii.area_below(sx.hi, sy.hi) - ii.area_below(sx.lo, sy.hi) -
                            ii.area_below(sx.hi, sy.lo) + ii.area_below(sx.lo, sy.lo);
        const double f = std::clamp(area / patch_area, 0.0, 1.0);
        if (p.min_tissue > 0.0 && f < p.min_tissue) continue;
        frac = static_cast<float>(f);
      }
      rc.push_back(c * p.step);
      rc.push_back(r * p.step);
      rf.push_back(frac);
    }
  });
  std::size_t total = 0;
  for (const auto& v : row_frac) total += v.size();
  g.coords.reserve(2 * total);
  g.fraction.reserve(total);
  for (std::size_t r = 0; r < row_coords.size(); ++r) {
    g.coords.insert(g.coords.end(), row_coords[r].begin(), row_coords[r].end());
    g.fraction.insert(g.fraction.end(), row_frac[r].begin(), row_frac[r].end());
  }
  return g;
}

}  // namespace tb::tiling
