// Tissue segmentation on a low-magnification RGB image: HSV saturation, median blur, fixed or Otsu
// threshold, morphological closing, connected components with area filtering of tissue regions and
// holes, and the boundary polygons of the result.
//
// The pipeline is CLAM's classic `segmentTissue` (Lu et al., Nat. Biomed. Eng. 2021) rewritten on
// plain buffers; the region/hole filter reproduces its RETR_CCOMP contour filter on pixel sets
// (areas are pixel counts, see filter_regions). Images are row-major, tightly packed.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace tb::tiling {

// S channel of HSV in OpenCV's 8-bit convention, S = round(255 * (max - min) / max) (0 where
// max = 0), from interleaved pixels with `channels` (3 or 4) bytes each; the 4th byte is ignored.
void hsv_saturation(const std::uint8_t* rgb, std::size_t n_pixels, int channels,
                    std::uint8_t* out, int threads);

// Median of the k x k window (k odd) with replicated borders (OpenCV medianBlur,
// scipy.ndimage.median_filter(mode="nearest")). Huang's sliding histogram, O(k) per pixel.
void median_blur(const std::uint8_t* src, std::int64_t h, std::int64_t w, int k,
                 std::uint8_t* dst, int threads);

// Otsu's threshold of 8-bit data as skimage.filters.threshold_otsu computes it (same float32
// class weights and float64 means, first maximum): foreground is value > t. A constant image
// returns its value.
int otsu_threshold(const std::uint8_t* src, std::size_t n);

// out = src > t ? 1 : 0.
void threshold_above(const std::uint8_t* src, std::size_t n, int t, std::uint8_t* out);

// Morphological closing of a 0/1 mask with a k x k square of ones anchored at (k/2, k/2)
// (OpenCV morphologyEx(MORPH_CLOSE) with its default border: pixels outside the image never
// change a result). k <= 1 copies.
void binary_close(const std::uint8_t* src, std::int64_t h, std::int64_t w, int k,
                  std::uint8_t* dst, int threads);

struct RegionFilter {
  double min_area = 0;       // keep a region when its own pixel count is > min_area (and > 0)
  double min_hole_area = 0;  // a hole stays a hole when its enclosed pixel count is > this
  int max_n_holes = 0;       // ... and it is among the max_n_holes largest; other holes are filled
};

struct FilterStats {
  std::int64_t n_regions = 0, n_kept = 0, n_holes = 0, n_holes_kept = 0;
};

// Connected components of a 0/1 mask (foreground 8-connected, background 4-connected, as in
// OpenCV's border following) organised as a containment tree, then CLAM's filter: a foreground
// region is kept when its net area (its own pixels = enclosed area minus its holes) is above
// min_area; of its holes, the max_n_holes largest with enclosed area (hole pixels plus anything
// nested inside) above min_hole_area stay holes, the others are filled. out = the union of the
// kept regions with their kept holes removed (a region nested in a kept hole counts on its own).
FilterStats filter_regions(const std::uint8_t* mask, std::int64_t h, std::int64_t w,
                           const RegionFilter& f, std::uint8_t* out);

// One polygon per 8-connected foreground component of a 0/1 mask: the outer ring and one ring per
// enclosed background (4-connected) component, traced along pixel edges (vertices are pixel
// corners, x in [0, w], y in [0, h]), collinear vertices dropped, not closed (last != first).
// In (x, y) with y down the outer ring has positive shoelace area (counter-clockwise by the
// mathematical convention, as GeoJSON asks) and holes negative; |area| is the exact pixel count
// enclosed. Diagonal foreground neighbours stay connected, so a ring may touch itself at a corner.
struct Polygon {
  std::vector<std::int32_t> outer;               // x0, y0, x1, y1, ...
  std::vector<std::vector<std::int32_t>> holes;  // same layout
  std::int64_t area = 0;                         // own pixels (outer area minus hole areas)
};
std::vector<Polygon> mask_polygons(const std::uint8_t* mask, std::int64_t h, std::int64_t w);

struct TissueParams {
  int sthresh = 8;        // saturation threshold (S > sthresh)
  bool use_otsu = false;  // Otsu threshold on the blurred saturation instead of sthresh
  int mthresh = 7;        // median blur kernel (odd; <= 1 skips)
  int close = 4;          // closing kernel (<= 1 skips)
  RegionFilter filter;    // areas in pixels of this image
};

struct TissueResult {
  std::vector<std::uint8_t> mask;  // final 0/1 mask (h * w)
  int threshold = 0;               // the threshold used (sthresh or Otsu's)
  FilterStats stats;
};

// The whole pipeline on an interleaved RGB(A) image. With a fixed threshold it thresholds first
// and takes the median of the 0/1 image (median(S) > t exactly when more than half the window
// has S > t), which gives the same mask without sorting windows; Otsu needs the blurred S.
TissueResult tissue_mask(const std::uint8_t* rgb, std::int64_t h, std::int64_t w, int channels,
                         const TissueParams& p, int threads);

}  // namespace tb::tiling
