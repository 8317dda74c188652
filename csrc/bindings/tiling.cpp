// _core.tiling: the tissue mask, the patch grid and the fused patch preprocessing (csrc/tiling/).
// Images are uint8 numpy arrays (h, w) or (h, w, channels), C-contiguous; every pass over pixels
// runs with the GIL released.
#include <cstdint>
#include <cstring>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "bindings/common.hpp"
#include "bindings/tiling_choices.hpp"
#include "tiling/grid.hpp"
#include "tiling/resample.hpp"
#include "tiling/tissue.hpp"

namespace tb::bindings {

namespace {

namespace tl = tb::tiling;
using U8 = Array<std::uint8_t>;

constexpr Choice<tl::PixelFormat> kPixelFormats[] = {{"rgb", tl::PixelFormat::kRGB},
                                                     {"rgba", tl::PixelFormat::kRGBA},
                                                     {"argb32", tl::PixelFormat::kARGB32}};

void check_image(const py::array& a, const char* name, bool allow_3d) {
  if (a.ndim() != 2 && !(allow_3d && a.ndim() == 3)) {
    throw std::invalid_argument(std::string(name) + ": expected a 2-D" +
                                (allow_3d ? " or 3-D" : "") + " array, got " +
                                std::to_string(a.ndim()) + " dimensions");
  }
}

void check_rgb(const U8& rgb) {
  if (rgb.ndim() != 3 || (rgb.shape(2) != 3 && rgb.shape(2) != 4)) {
    throw std::invalid_argument("rgb: expected an (h, w, 3) or (h, w, 4) uint8 array");
  }
}

py::dict stats_dict(const tl::FilterStats& s) {
  py::dict d;
  d["n_regions"] = s.n_regions;
  d["n_kept"] = s.n_kept;
  d["n_holes"] = s.n_holes;
  d["n_holes_kept"] = s.n_holes_kept;
  return d;
}

py::array_t<std::uint8_t> hsv_saturation(U8 rgb, int threads) {
  check_rgb(rgb);
  py::array_t<std::uint8_t> out({rgb.shape(0), rgb.shape(1)});
  auto* o = out.mutable_data();
  py::gil_scoped_release release;
  tl::hsv_saturation(rgb.data(), static_cast<std::size_t>(rgb.shape(0) * rgb.shape(1)),
                     static_cast<int>(rgb.shape(2)), o, threads);
  return out;
}

py::array_t<std::uint8_t> median_blur(U8 img, int k, int threads) {
  check_image(img, "image", false);
  py::array_t<std::uint8_t> out({img.shape(0), img.shape(1)});
  auto* o = out.mutable_data();
  py::gil_scoped_release release;
  tl::median_blur(img.data(), img.shape(0), img.shape(1), k, o, threads);
  return out;
}

int otsu_threshold(U8 img) {
  py::gil_scoped_release release;
  return tl::otsu_threshold(img.data(), static_cast<std::size_t>(img.size()));
}

py::array_t<std::uint8_t> binary_close(U8 mask, int k, int threads) {
  check_image(mask, "mask", false);
  py::array_t<std::uint8_t> out({mask.shape(0), mask.shape(1)});
  auto* o = out.mutable_data();
  py::gil_scoped_release release;
  tl::binary_close(mask.data(), mask.shape(0), mask.shape(1), k, o, threads);
  return out;
}

py::tuple filter_regions(U8 mask, double min_area, double min_hole_area, int max_n_holes) {
  check_image(mask, "mask", false);
  py::array_t<std::uint8_t> out({mask.shape(0), mask.shape(1)});
  tl::RegionFilter f{min_area, min_hole_area, max_n_holes};
  tl::FilterStats st;
  {
    auto* o = out.mutable_data();
    py::gil_scoped_release release;
    st = tl::filter_regions(mask.data(), mask.shape(0), mask.shape(1), f, o);
  }
  return py::make_tuple(out, stats_dict(st));
}

py::list mask_polygons(U8 mask) {
  check_image(mask, "mask", false);
  std::vector<tl::Polygon> polys;
  {
    py::gil_scoped_release release;
    polys = tl::mask_polygons(mask.data(), mask.shape(0), mask.shape(1));
  }
  auto ring = [](const std::vector<std::int32_t>& v) {
    py::array_t<std::int32_t> a({static_cast<py::ssize_t>(v.size() / 2), py::ssize_t{2}});
    if (!v.empty()) std::memcpy(a.mutable_data(), v.data(), v.size() * sizeof(std::int32_t));
    return a;
  };
  py::list out;
  for (const auto& p : polys) {
    py::list holes;
    for (const auto& hr : p.holes) holes.append(ring(hr));
    out.append(py::make_tuple(ring(p.outer), holes, p.area));
  }
  return out;
}

py::dict tissue_mask(U8 rgb, int sthresh, bool use_otsu, int mthresh, int close,
                     double min_area, double min_hole_area, int max_n_holes, int threads) {
  check_rgb(rgb);
  tl::TissueParams p;
  p.sthresh = sthresh;
  p.use_otsu = use_otsu;
  p.mthresh = mthresh;
  p.close = close;
  p.filter = {min_area, min_hole_area, max_n_holes};
  tl::TissueResult r;
  {
    py::gil_scoped_release release;
    r = tl::tissue_mask(rgb.data(), rgb.shape(0), rgb.shape(1), static_cast<int>(rgb.shape(2)),
                        p, threads);
  }
  py::array_t<std::uint8_t> mask({rgb.shape(0), rgb.shape(1)});
  std::memcpy(mask.mutable_data(), r.mask.data(), r.mask.size());
  py::dict d = stats_dict(r.stats);
  d["mask"] = mask;
  d["threshold"] = r.threshold;
  return d;
}

py::tuple patch_grid(std::optional<U8> mask, std::int64_t width, std::int64_t height,
                     std::int64_t patch, std::int64_t step, double min_tissue, int threads) {
  if (mask) check_image(*mask, "mask", false);
  tl::GridParams p{width, height, patch, step, min_tissue};
  tl::GridResult g;
  {
    const std::uint8_t* md = mask ? mask->data() : nullptr;
    const std::int64_t mh = mask ? mask->shape(0) : 0, mw = mask ? mask->shape(1) : 0;
    py::gil_scoped_release release;
    g = tl::patch_grid(md, mh, mw, p, threads);
  }
  const auto n = static_cast<py::ssize_t>(g.fraction.size());
  py::array_t<std::int64_t> coords({n, py::ssize_t{2}});
  if (n) std::memcpy(coords.mutable_data(), g.coords.data(), g.coords.size() * 8);
  return py::make_tuple(coords, to_numpy(g.fraction), g.n_cols, g.n_rows);
}

py::array_t<std::uint8_t> resize(U8 img, std::int64_t out_h, std::int64_t out_w,
                                 const std::string& interpolation, int threads) {
  check_image(img, "image", true);
  const int c = img.ndim() == 3 ? static_cast<int>(img.shape(2)) : 1;
  const tl::Filter f = parse_choice("interpolation", interpolation, kFilters);
  std::vector<py::ssize_t> shape = {static_cast<py::ssize_t>(out_h),
                                    static_cast<py::ssize_t>(out_w)};
  if (img.ndim() == 3) shape.push_back(c);
  py::array_t<std::uint8_t> out(shape);
  auto* o = out.mutable_data();
  py::gil_scoped_release release;
  tl::resize_image(img.data(), img.shape(0), img.shape(1), c, out_h, out_w, f, o, threads);
  return out;
}

py::array_t<std::uint8_t> argb32_to_rgb(Array<std::uint32_t> argb, int threads) {
  if (argb.ndim() != 2) {
    throw std::invalid_argument("argb: expected an (h, w) uint32 array, got " +
                                std::to_string(argb.ndim()) + " dimensions");
  }
  py::array_t<std::uint8_t> out({argb.shape(0), argb.shape(1), py::ssize_t{3}});
  auto* o = out.mutable_data();
  py::gil_scoped_release release;
  tl::argb32_to_rgb(argb.data(), static_cast<std::size_t>(argb.size()), o, threads);
  return out;
}

// Bytes of one source pixel.
std::size_t pixel_bytes(tl::PixelFormat f) { return f == tl::PixelFormat::kRGB ? 3 : 4; }

void preprocess(py::array src, const std::string& format,
                std::optional<Array<std::int32_t>> crops, py::array out,
                const std::string& out_type, const std::string& interpolation,
                std::vector<float> mean, std::vector<float> std_, int threads) {
  tl::PreprocessParams p;
  p.format = parse_choice("format", format, kPixelFormats);
  p.type = parse_choice("out_type", out_type, kOutTypes);
  const bool argb = p.format == tl::PixelFormat::kARGB32;
  const py::ssize_t want_ndim = argb ? 3 : 4;
  const bool src_ok =
      src.ndim() == want_ndim && (src.flags() & py::array::c_style) &&
      src.dtype().kind() == 'u' &&
      (argb ? src.itemsize() == 4
            : src.itemsize() == 1 &&
                  static_cast<std::size_t>(src.shape(3)) == pixel_bytes(p.format));
  if (!src_ok) {
    throw std::invalid_argument(
        argb ? "src: expected a C-contiguous (n, h, w) uint32 array for format 'argb32'"
             : "src: expected a C-contiguous (n, h, w, " + std::to_string(pixel_bytes(p.format)) +
                   ") uint8 array for format '" + format + "'");
  }
  const py::ssize_t n = src.shape(0);
  check_batch_out(out, n, p.type, out_type);
  if (crops && (crops->ndim() != 2 || crops->shape(0) != n || crops->shape(1) != 4)) {
    throw std::invalid_argument("crops: expected an (" + std::to_string(n) + ", 4) int32 array");
  }
  if (mean.size() != 3 || std_.size() != 3) {
    throw std::invalid_argument("mean, std: expected 3 values each, got " +
                                std::to_string(mean.size()) + " and " +
                                std::to_string(std_.size()));
  }
  for (int c = 0; c < 3; ++c) p.mean[c] = mean[c], p.std[c] = std_[c];
  p.out_h = out.shape(2);
  p.out_w = out.shape(3);
  p.filter = parse_choice("interpolation", interpolation, kFilters);
  const void* s = src.data();
  void* o = out.mutable_data();
  const std::int32_t* cr = crops ? crops->data() : nullptr;
  py::gil_scoped_release release;
  tl::preprocess_batch(s, n, src.shape(1), src.shape(2), cr, p, o, threads);
}

}  // namespace

void bind_tiling(py::module_& m) {
  m.def("hsv_saturation", &hsv_saturation, py::arg("rgb"), py::arg("threads"),
        "HSV saturation (OpenCV 8-bit convention).");
  m.def("median_blur", &median_blur, py::arg("image"), py::arg("k"), py::arg("threads"),
        "k x k median with replicated borders.");
  m.def("otsu_threshold", &otsu_threshold, py::arg("image"),
        "Otsu threshold of 8-bit data (foreground: value > t).");
  m.def("binary_close", &binary_close, py::arg("mask"), py::arg("k"), py::arg("threads"),
        "Closing with a k x k square anchored at (k/2, k/2).");
  m.def("filter_regions", &filter_regions, py::arg("mask"), py::arg("min_area"),
        py::arg("min_hole_area"), py::arg("max_n_holes"),
        "Region/hole area filter; returns (mask, stats).");
  m.def("mask_polygons", &mask_polygons, py::arg("mask"),
        "Pixel-edge polygons of a 0/1 mask: [(outer, [holes], area)].");
  m.def("tissue_mask", &tissue_mask, py::arg("rgb"), py::arg("sthresh"), py::arg("use_otsu"),
        py::arg("mthresh"), py::arg("close"), py::arg("min_area"), py::arg("min_hole_area"),
        py::arg("max_n_holes"), py::arg("threads"),
        "Saturation -> median -> threshold -> closing -> region filter.");
  m.def("patch_grid", &patch_grid, py::arg("mask"), py::arg("width"), py::arg("height"),
        py::arg("patch"), py::arg("step"), py::arg("min_tissue"), py::arg("threads"),
        "Row-major level-0 patch grid filtered by tissue; returns (coords, fraction, cols, rows).");
  m.def("resize", &resize, py::arg("image"), py::arg("out_h"), py::arg("out_w"),
        py::arg("interpolation"), py::arg("threads"),
        "PIL-exact antialiased resize of a uint8 image.");
  m.def("argb32_to_rgb", &argb32_to_rgb, py::arg("argb"), py::arg("threads"),
        "Premultiplied ARGB32 (OpenSlide buffers) to RGB over white.");
  m.def("preprocess", &preprocess, py::arg("src"), py::arg("format"), py::arg("crops"),
        py::arg("out"), py::arg("out_type"), py::arg("interpolation"), py::arg("mean"),
        py::arg("std"), py::arg("threads"),
        "Fused crop + PIL-exact resize + normalise into an NCHW float (or raw uint8) buffer (GIL "
        "released).");
}

}  // namespace tb::bindings
