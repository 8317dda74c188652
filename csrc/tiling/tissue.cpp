#include "tiling/tissue.hpp"

#include <algorithm>
#include <array>
#include <cstring>
#include <numeric>
#include <stdexcept>

#include "common/parallel.hpp"

namespace tb::tiling {

namespace {

std::int64_t clamp64(std::int64_t v, std::int64_t lo, std::int64_t hi) {
  return v < lo ? lo : (v > hi ? hi : v);
}

// ---- median blur ---------------------------------------------------------------------------

void median_rows(const std::uint8_t* src, std::int64_t h, std::int64_t w, int k, std::uint8_t* dst,
                 std::int64_t y0, std::int64_t y1) {
  const int r = k / 2;
  const int half = (k * k) / 2;  // rank of the median in the sorted window
  std::vector<const std::uint8_t*> rows(static_cast<std::size_t>(k));
  std::array<int, 256> hist{};
  for (std::int64_t y = y0; y < y1; ++y) {
    for (int i = 0; i < k; ++i) rows[i] = src + clamp64(y - r + i, 0, h - 1) * w;
    hist.fill(0);
    for (int dx = -r; dx <= r; ++dx) {
      const std::int64_t cx = clamp64(dx, 0, w - 1);
      for (int i = 0; i < k; ++i) ++hist[rows[i][cx]];
    }
    int m = 0, lt = 0;  // invariant: lt = number of window values < m
    while (lt + hist[m] <= half) lt += hist[m++];
    std::uint8_t* out = dst + y * w;
    out[0] = static_cast<std::uint8_t>(m);
    for (std::int64_t x = 1; x < w; ++x) {
      const std::int64_t c_out = clamp64(x - r - 1, 0, w - 1);
      const std::int64_t c_in = clamp64(x + r, 0, w - 1);
      if (c_out != c_in) {
        for (int i = 0; i < k; ++i) {
          const int v_out = rows[i][c_out];
          const int v_in = rows[i][c_in];
          --hist[v_out];
          ++hist[v_in];
          lt += (v_in < m) - (v_out < m);
        }
        if (lt > half) {
          do lt -= hist[--m];
          while (lt > half);
        } else {
          while (lt + hist[m] <= half) lt += hist[m++];
        }
      }
      out[x] = static_cast<std::uint8_t>(m);
    }
  }
}

// ---- binary morphology -----------------------------------------------------------------------

// Binary windows by OR / AND of shifted rows (vectorises; k is small).
// Rows: out[x] = OR (dilate) / AND (erode) of in[x - lo .. x + hi]; outside the row is neutral.
void window_rows(const std::uint8_t* in, std::uint8_t* out, std::int64_t w, std::int64_t y0,
                 std::int64_t y1, int lo, int hi, bool dilate) {
  const std::uint8_t neutral = dilate ? 0 : 1;
  std::vector<std::uint8_t> pad(static_cast<std::size_t>(w + lo + hi), neutral);
  for (std::int64_t y = y0; y < y1; ++y) {
    const std::uint8_t* row = in + y * w;
    for (std::int64_t x = 0; x < w; ++x) pad[lo + x] = row[x] != 0;
    std::uint8_t* o = out + y * w;
    std::memcpy(o, pad.data(), static_cast<std::size_t>(w));
    for (int j = 1; j <= lo + hi; ++j) {
      const std::uint8_t* q = pad.data() + j;
      if (dilate) {
        for (std::int64_t x = 0; x < w; ++x) o[x] |= q[x];
      } else {
        for (std::int64_t x = 0; x < w; ++x) o[x] &= q[x];
      }
    }
  }
}

// Columns: out[y] = OR / AND of the rows in[y - lo .. y + hi] that exist.
void window_cols(const std::uint8_t* in, std::uint8_t* out, std::int64_t h, std::int64_t w,
                 std::int64_t y0, std::int64_t y1, int lo, int hi, bool dilate) {
  for (std::int64_t y = y0; y < y1; ++y) {
    const std::int64_t a = std::max<std::int64_t>(0, y - lo);
    const std::int64_t b = std::min<std::int64_t>(h - 1, y + hi);
    std::uint8_t* o = out + y * w;
    std::memcpy(o, in + a * w, static_cast<std::size_t>(w));
    for (std::int64_t r = a + 1; r <= b; ++r) {
      const std::uint8_t* q = in + r * w;
      if (dilate) {
        for (std::int64_t x = 0; x < w; ++x) o[x] |= q[x];
      } else {
        for (std::int64_t x = 0; x < w; ++x) o[x] &= q[x];
      }
    }
  }
}

// ---- run-length connected components ---------------------------------------------------------

struct Run {
  std::int32_t x0, x1;  // [x0, x1)
  bool fg;
};

struct Components {
  // per run
  std::vector<Run> runs;
  std::vector<std::int64_t> row_start;  // runs of row y are [row_start[y], row_start[y + 1])
  std::vector<std::int32_t> comp;       // component of each run
  // per component, numbered in raster order of their first pixel
  std::vector<std::uint8_t> fg;
  std::vector<std::int64_t> pixels;
  std::vector<std::int64_t> first_run;
  std::vector<std::int32_t> first_row;
  std::vector<std::uint8_t> border;   // background touching the image border ("outside")
  std::vector<std::int32_t> parent;   // enclosing component, -1 for the outside
};

std::int64_t find_root(std::vector<std::int64_t>& uf, std::int64_t i) {
  std::int64_t r = i;
  while (uf[r] != r) r = uf[r];
  while (uf[i] != r) {
    const std::int64_t next = uf[i];
    uf[i] = r;
    i = next;
  }
  return r;
}

// Labels foreground (8-connected) and background (4-connected) components of a 0/1 mask.
Components label(const std::uint8_t* mask, std::int64_t h, std::int64_t w) {
  Components c;
  c.row_start.reserve(static_cast<std::size_t>(h) + 1);
  for (std::int64_t y = 0; y < h; ++y) {
    c.row_start.push_back(static_cast<std::int64_t>(c.runs.size()));
    const std::uint8_t* row = mask + y * w;
    std::int64_t x = 0;
    while (x < w) {
      const bool v = row[x] != 0;
      std::int64_t e = x + 1;
      while (e < w && (row[e] != 0) == v) ++e;
      c.runs.push_back({static_cast<std::int32_t>(x), static_cast<std::int32_t>(e), v});
      x = e;
    }
  }
  c.row_start.push_back(static_cast<std::int64_t>(c.runs.size()));
  const auto n_runs = static_cast<std::int64_t>(c.runs.size());

  // Union-find over runs; the root is always the smallest run index (the first in raster order).
  std::vector<std::int64_t> uf(static_cast<std::size_t>(n_runs));
  std::iota(uf.begin(), uf.end(), 0);
  auto unite = [&](std::int64_t a, std::int64_t b) {
    a = find_root(uf, a);
    b = find_root(uf, b);
    if (a == b) return;
    if (a < b) std::swap(a, b);
    uf[a] = b;
  };
  for (std::int64_t y = 1; y < h; ++y) {
    std::int64_t j = c.row_start[y - 1];
    const std::int64_t j_end = c.row_start[y];
    for (std::int64_t i = c.row_start[y]; i < c.row_start[y + 1]; ++i) {
      const Run& a = c.runs[i];
      // skip runs of the row above that end before a (8-connected reach: one pixel further)
      while (j < j_end && c.runs[j].x1 < a.x0) ++j;
      for (std::int64_t t = j; t < j_end && c.runs[t].x0 <= a.x1; ++t) {
        const Run& b = c.runs[t];
        if (b.fg != a.fg) continue;
        const bool touch = a.fg ? (b.x0 <= a.x1 && a.x0 <= b.x1)   // 8-connected
                                : (b.x0 < a.x1 && a.x0 < b.x1);    // 4-connected
        if (touch) unite(i, t);
      }
    }
  }

  c.comp.assign(static_cast<std::size_t>(n_runs), -1);
  std::int32_t n_comp = 0;
  std::vector<std::int32_t> row_of_run(static_cast<std::size_t>(n_runs));
  for (std::int64_t y = 0; y < h; ++y) {
    for (std::int64_t i = c.row_start[y]; i < c.row_start[y + 1]; ++i) {
      row_of_run[i] = static_cast<std::int32_t>(y);
    }
  }
  for (std::int64_t i = 0; i < n_runs; ++i) {
    const std::int64_t r = find_root(uf, i);
    if (r == i) {
      c.comp[i] = n_comp++;
      c.fg.push_back(c.runs[i].fg);
      c.pixels.push_back(0);
      c.first_run.push_back(i);
      c.first_row.push_back(row_of_run[i]);
      c.border.push_back(0);
      c.parent.push_back(-1);
    } else {
      c.comp[i] = c.comp[r];
    }
    const std::int32_t k = c.comp[i];
    const Run& run = c.runs[i];
    c.pixels[k] += run.x1 - run.x0;
    if (!run.fg && (row_of_run[i] == 0 || row_of_run[i] == h - 1 || run.x0 == 0 || run.x1 == w)) {
      c.border[k] = 1;
    }
  }
  // The pixel just above a component's first pixel belongs to the component that encloses it
  // (for a hole: its foreground owner; for a foreground region: the background around it).
  for (std::int32_t k = 0; k < n_comp; ++k) {
    if (!c.fg[k] && c.border[k]) continue;  // outside
    const std::int32_t y = c.first_row[k];
    if (y == 0) continue;
    const std::int32_t x = c.runs[c.first_run[k]].x0;
    const auto begin = c.runs.begin() + c.row_start[y - 1];
    const auto end = c.runs.begin() + c.row_start[y];
    auto it = std::upper_bound(begin, end, x, [](std::int32_t v, const Run& r) { return v < r.x0; });
    --it;  // the run of the row above containing x
    const std::int32_t above = c.comp[it - c.runs.begin()];
    if (c.fg[above] == c.fg[k]) throw std::logic_error("tissue: inconsistent component tree");
    c.parent[k] = (!c.fg[above] && c.border[above]) ? -1 : above;
  }
  return c;
}

// Follows the boundary of the foreground along pixel edges, foreground on the right (y down),
// diagonal foreground neighbours connected. Returns the corner vertices (direction changes).
std::vector<std::int32_t> trace_ring(const std::uint8_t* mask, std::int64_t h, std::int64_t w,
                                     std::int64_t sx, std::int64_t sy, int d0) {
  static constexpr int DX[4] = {1, 0, -1, 0};  // E, S, W, N
  static constexpr int DY[4] = {0, 1, 0, -1};
  auto fg = [&](std::int64_t row, std::int64_t col) -> bool {
    return row >= 0 && row < h && col >= 0 && col < w && mask[row * w + col] != 0;
  };
  std::vector<std::int32_t> pts;
  std::int64_t x = sx, y = sy;
  int d = d0;
  for (;;) {
    x += DX[d];
    y += DY[d];
    bool left, right;
    switch (d) {
      case 0: left = fg(y - 1, x); right = fg(y, x); break;
      case 1: left = fg(y, x); right = fg(y, x - 1); break;
      case 2: left = fg(y, x - 1); right = fg(y - 1, x - 1); break;
      default: left = fg(y - 1, x - 1); right = fg(y - 1, x); break;
    }
    const int nd = left ? (d + 3) % 4 : (right ? d : (d + 1) % 4);
    if (nd != d) {
      pts.push_back(static_cast<std::int32_t>(x));
      pts.push_back(static_cast<std::int32_t>(y));
    }
    d = nd;
    if (x == sx && y == sy) break;
  }
  return pts;
}

// S = round(255 * d / m) for every (m, d <= m), so the per-pixel division becomes a lookup.
const std::uint8_t* saturation_table() {
  static const std::vector<std::uint8_t> table = [] {
    std::vector<std::uint8_t> t(256 * 256, 0);
    for (int m = 1; m < 256; ++m) {
      for (int d = 0; d <= m; ++d) t[m * 256 + d] = static_cast<std::uint8_t>((510 * d + m) / (2 * m));
    }
    return t;
  }();
  return table.data();
}

// out = S > t without computing S: round(255 d / m) > t  <=>  510 d >= (2 t + 1) m  (m > 0).
template <int C>
void saturation_above_range(const std::uint8_t* rgb, int k, std::int64_t a, std::int64_t b,
                            std::uint8_t* out) {
  for (std::int64_t i = a; i < b; ++i) {
    const std::uint8_t* p = rgb + i * C;
    const int mx = std::max(std::max(p[0], p[1]), p[2]);
    const int mn = std::min(std::min(p[0], p[1]), p[2]);
    out[i] = static_cast<std::uint8_t>((mx > 0) & (510 * (mx - mn) >= k * mx));
  }
}

void saturation_above(const std::uint8_t* rgb, std::size_t n, int channels, int t,
                      std::uint8_t* out, int threads) {
  const int k = 2 * t + 1;
  parallel_blocks(static_cast<std::int64_t>(n), threads, [=](std::int64_t a, std::int64_t b) {
    if (channels == 3) {
      saturation_above_range<3>(rgb, k, a, b, out);
    } else {
      saturation_above_range<4>(rgb, k, a, b, out);
    }
  });
}

template <int C>
void saturation_range(const std::uint8_t* rgb, const std::uint8_t* table, std::int64_t a,
                      std::int64_t b, std::uint8_t* out) {
  for (std::int64_t i = a; i < b; ++i) {
    const std::uint8_t* p = rgb + i * C;
    const int mx = std::max(std::max(p[0], p[1]), p[2]);
    const int mn = std::min(std::min(p[0], p[1]), p[2]);
    out[i] = table[mx * 256 + (mx - mn)];
  }
}

// Per-row counts of ones in [x - r, x + r] with the row's ends replicated (k = 2r + 1 <= 255).
void count_rows(const std::uint8_t* src, std::int64_t w, int r, std::int64_t y0, std::int64_t y1,
                std::uint8_t* counts) {
  const int k = 2 * r + 1;
  std::vector<std::uint8_t> pad(static_cast<std::size_t>(w + 2 * r));
  std::uint8_t* pd = pad.data();
  for (std::int64_t y = y0; y < y1; ++y) {
    const std::uint8_t* row = src + y * w;
    for (std::int64_t x = 0; x < w; ++x) pd[r + x] = row[x] != 0;
    for (int i = 0; i < r; ++i) pd[i] = pd[r], pd[r + w + i] = pd[r + w - 1];
    std::uint8_t* o = counts + y * w;
    std::memcpy(o, pd, static_cast<std::size_t>(w));
    for (int j = 1; j < k; ++j) {
      const std::uint8_t* q = pd + j;
      for (std::int64_t x = 0; x < w; ++x) o[x] = static_cast<std::uint8_t>(o[x] + q[x]);
    }
  }
}

// out[y][x] = (sum of counts over rows y - r .. y + r, replicated) > half.
void majority_cols(const std::uint8_t* counts, std::int64_t h, std::int64_t w, int r, int half,
                   std::int64_t y0, std::int64_t y1, std::uint8_t* dst) {
  std::vector<std::uint16_t> sum(static_cast<std::size_t>(w));
  std::uint16_t* sm = sum.data();
  for (std::int64_t y = y0; y < y1; ++y) {
    std::fill(sm, sm + w, 0);
    for (std::int64_t dy = -r; dy <= r; ++dy) {
      const std::uint8_t* q = counts + clamp64(y + dy, 0, h - 1) * w;
      for (std::int64_t x = 0; x < w; ++x) sm[x] = static_cast<std::uint16_t>(sm[x] + q[x]);
    }
    std::uint8_t* o = dst + y * w;
    for (std::int64_t x = 0; x < w; ++x) o[x] = sm[x] > half;
  }
}

// Median blur of a 0/1 image: the median of a k x k window is 1 exactly when more than half of
// the window is 1, so box counts (replicated borders) replace the sorted window.
void median_binary(const std::uint8_t* src, std::int64_t h, std::int64_t w, int k,
                   std::uint8_t* dst, int threads) {
  const int r = k / 2;
  const int half = (k * k) / 2;
  std::vector<std::uint8_t> counts(static_cast<std::size_t>(h * w));
  std::uint8_t* c = counts.data();
  parallel_blocks(h, threads, [=](std::int64_t a, std::int64_t b) { count_rows(src, w, r, a, b, c); });
  parallel_blocks(h, threads, [=](std::int64_t a, std::int64_t b) {
    majority_cols(c, h, w, r, half, a, b, dst);
  });
}

}  // namespace

void hsv_saturation(const std::uint8_t* rgb, std::size_t n_pixels, int channels,
                    std::uint8_t* out, int threads) {
  if (channels != 3 && channels != 4) throw std::invalid_argument("channels must be 3 or 4");
  const std::uint8_t* table = saturation_table();
  parallel_blocks(static_cast<std::int64_t>(n_pixels), threads, [=](std::int64_t a, std::int64_t b) {
    if (channels == 3) {
      saturation_range<3>(rgb, table, a, b, out);
    } else {
      saturation_range<4>(rgb, table, a, b, out);
    }
  });
}

void median_blur(const std::uint8_t* src, std::int64_t h, std::int64_t w, int k,
                 std::uint8_t* dst, int threads) {
  if (k < 1 || k % 2 == 0) throw std::invalid_argument("median kernel size must be odd and >= 1");
  if (h <= 0 || w <= 0) return;
  if (k == 1) {
    std::memcpy(dst, src, static_cast<std::size_t>(h * w));
    return;
  }
  parallel_blocks(h, threads, [&](std::int64_t a, std::int64_t b) {
    median_rows(src, h, w, k, dst, a, b);
  });
}

int otsu_threshold(const std::uint8_t* src, std::size_t n) {
  if (n == 0) throw std::invalid_argument("otsu threshold of an empty image");
  std::array<std::int64_t, 256> hist{};
  for (std::size_t i = 0; i < n; ++i) ++hist[src[i]];
  int lo = 0, hi = 255;
  while (hist[lo] == 0) ++lo;
  while (hist[hi] == 0) --hi;
  if (lo == hi) return lo;
  // skimage's arithmetic: float32 counts and cumulative weights, float64 means.
  const int m = hi - lo + 1;
  std::vector<float> w1(m), w2(m);
  std::vector<double> mean1(m), mean2(m);
  float acc = 0.0f;
  double s = 0.0;
  for (int i = 0; i < m; ++i) {
    const float c = static_cast<float>(hist[lo + i]);
    acc += c;
    s += static_cast<double>(c) * static_cast<double>(lo + i);
    w1[i] = acc;
    mean1[i] = s / static_cast<double>(acc);
  }
  acc = 0.0f;
  s = 0.0;
  for (int i = m - 1; i >= 0; --i) {
    const float c = static_cast<float>(hist[lo + i]);
    acc += c;
    s += static_cast<double>(c) * static_cast<double>(lo + i);
    w2[i] = acc;
    mean2[i] = s / static_cast<double>(acc);
  }
  int best = 0;
  double best_v = -1.0;
  for (int i = 0; i + 1 < m; ++i) {
    const float ww = w1[i] * w2[i + 1];
    const double d = mean1[i] - mean2[i + 1];
    const double v = static_cast<double>(ww) * (d * d);
    if (v > best_v) {
      best_v = v;
      best = i;
    }
  }
  return lo + best;
}

void threshold_above(const std::uint8_t* src, std::size_t n, int t, std::uint8_t* out) {
  for (std::size_t i = 0; i < n; ++i) out[i] = src[i] > t;
}

void binary_close(const std::uint8_t* src, std::int64_t h, std::int64_t w, int k,
                  std::uint8_t* dst, int threads) {
  if (h <= 0 || w <= 0) return;
  const auto n = static_cast<std::size_t>(h * w);
  if (k <= 1) {
    for (std::size_t i = 0; i < n; ++i) dst[i] = src[i] != 0;
    return;
  }
  const int lo = k / 2, hi = k - 1 - k / 2;  // OpenCV's default anchor
  std::vector<std::uint8_t> t1(n), t2(n);
  parallel_blocks(h, threads, [&](std::int64_t a, std::int64_t b) {
    window_rows(src, t1.data(), w, a, b, lo, hi, true);
  });
  parallel_blocks(h, threads, [&](std::int64_t a, std::int64_t b) {
    window_cols(t1.data(), t2.data(), h, w, a, b, lo, hi, true);
  });
  parallel_blocks(h, threads, [&](std::int64_t a, std::int64_t b) {
    window_rows(t2.data(), t1.data(), w, a, b, lo, hi, false);
  });
  parallel_blocks(h, threads, [&](std::int64_t a, std::int64_t b) {
    window_cols(t1.data(), dst, h, w, a, b, lo, hi, false);
  });
}

FilterStats filter_regions(const std::uint8_t* mask, std::int64_t h, std::int64_t w,
                           const RegionFilter& f, std::uint8_t* out) {
  FilterStats st;
  if (h <= 0 || w <= 0) return st;
  const Components c = label(mask, h, w);
  const auto n = static_cast<std::int32_t>(c.fg.size());

  // Enclosed ("filled") area: own pixels plus everything nested inside. Children come after
  // their parent in raster order, so one backward sweep accumulates the tree.
  std::vector<std::int64_t> filled(c.pixels);
  for (std::int32_t k = n - 1; k >= 0; --k) {
    if (c.parent[k] >= 0) filled[c.parent[k]] += filled[k];
  }
  std::vector<std::vector<std::int32_t>> holes(static_cast<std::size_t>(n));
  std::vector<std::uint8_t> kept(static_cast<std::size_t>(n), 0);
  std::vector<std::uint8_t> kept_hole(static_cast<std::size_t>(n), 0);
  for (std::int32_t k = 0; k < n; ++k) {
    if (c.fg[k]) {
      ++st.n_regions;
      kept[k] = c.pixels[k] > 0 && static_cast<double>(c.pixels[k]) > f.min_area;
      st.n_kept += kept[k];
    } else if (!c.border[k]) {
      ++st.n_holes;
      holes[c.parent[k]].push_back(k);
    }
  }
  for (std::int32_t k = 0; k < n; ++k) {
    if (!kept[k] || holes[k].empty()) continue;
    auto& hs = holes[k];
    std::stable_sort(hs.begin(), hs.end(),
                     [&](std::int32_t a, std::int32_t b) { return filled[a] > filled[b]; });
    int taken = 0;
    for (std::int32_t hk : hs) {
      if (taken >= f.max_n_holes) break;
      if (static_cast<double>(filled[hk]) > f.min_hole_area) {
        kept_hole[hk] = 1;
        ++taken;
      }
    }
    st.n_holes_kept += taken;
  }
  // inherited[k]: k lies inside a kept region's filled area and not inside one of its kept holes.
  std::vector<std::uint8_t> inherited(static_cast<std::size_t>(n), 0), value(static_cast<std::size_t>(n), 0);
  for (std::int32_t k = 0; k < n; ++k) {
    const std::int32_t p = c.parent[k];
    if (c.fg[k]) {
      inherited[k] = p >= 0 ? inherited[p] : 0;
      value[k] = kept[k] || inherited[k];
    } else if (!c.border[k]) {
      inherited[k] = inherited[p] || (kept[p] && !kept_hole[k]);
      value[k] = inherited[k];
    }
  }
  for (std::int64_t y = 0; y < h; ++y) {
    std::uint8_t* row = out + y * w;
    for (std::int64_t i = c.row_start[y]; i < c.row_start[y + 1]; ++i) {
      const Run& r = c.runs[i];
      std::memset(row + r.x0, value[c.comp[i]], static_cast<std::size_t>(r.x1 - r.x0));
    }
  }
  return st;
}

std::vector<Polygon> mask_polygons(const std::uint8_t* mask, std::int64_t h, std::int64_t w) {
  std::vector<Polygon> polys;
  if (h <= 0 || w <= 0) return polys;
  const Components c = label(mask, h, w);
  const auto n = static_cast<std::int32_t>(c.fg.size());
  std::vector<std::int32_t> poly_of(static_cast<std::size_t>(n), -1);
  for (std::int32_t k = 0; k < n; ++k) {
    const std::int64_t x = c.runs[c.first_run[k]].x0;
    const std::int64_t y = c.first_row[k];
    if (c.fg[k]) {
      poly_of[k] = static_cast<std::int32_t>(polys.size());
      Polygon p;
      p.outer = trace_ring(mask, h, w, x, y, 0);  // along the top edge, eastwards
      p.area = c.pixels[k];
      polys.push_back(std::move(p));
    } else if (!c.border[k]) {
      // top edge of the hole's first pixel, westwards (the owner is above, on the right)
      polys[poly_of[c.parent[k]]].holes.push_back(trace_ring(mask, h, w, x + 1, y, 2));
    }
  }
  return polys;
}

TissueResult tissue_mask(const std::uint8_t* rgb, std::int64_t h, std::int64_t w, int channels,
                         const TissueParams& p, int threads) {
  TissueResult res;
  if (h <= 0 || w <= 0) throw std::invalid_argument("tissue mask of an empty image");
  if (channels != 3 && channels != 4) throw std::invalid_argument("channels must be 3 or 4");
  if (p.mthresh > 1 && p.mthresh % 2 == 0) {
    throw std::invalid_argument("median kernel size must be odd");
  }
  const auto n = static_cast<std::size_t>(h * w);
  std::vector<std::uint8_t> a(n), b(n);
  if (p.use_otsu) {  // Otsu needs the blurred saturation itself
    hsv_saturation(rgb, n, channels, a.data(), threads);
    if (p.mthresh > 1) {
      median_blur(a.data(), h, w, p.mthresh, b.data(), threads);
      a.swap(b);
    }
    res.threshold = otsu_threshold(a.data(), n);
    threshold_above(a.data(), n, res.threshold, b.data());
  } else {  // median(S) > t  <=>  median(S > t): threshold first, then a binary median
    res.threshold = p.sthresh;
    saturation_above(rgb, n, channels, p.sthresh, p.mthresh > 1 ? a.data() : b.data(), threads);
    if (p.mthresh > 1) median_binary(a.data(), h, w, p.mthresh, b.data(), threads);
  }
  binary_close(b.data(), h, w, p.close, a.data(), threads);
  res.mask.assign(n, 0);
  res.stats = filter_regions(a.data(), h, w, p.filter, res.mask.data());
  return res;
}

}  // namespace tb::tiling
