// _core.slides: libjpeg loading and the batch patch reader of tiled TIFF pyramids
// (csrc/slides/). A whole batch is read, decoded, resized and normalised with the GIL released
// once, on C++ threads.
#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "bindings/common.hpp"
#include "bindings/tiling_choices.hpp"
#include "slides/jpeg.hpp"
#include "slides/tile_reader.hpp"

namespace tb::bindings {

namespace {

namespace sl = tb::slides;
namespace tl = tb::tiling;

constexpr Choice<sl::TileCodec> kCodecs[] = {{"none", sl::TileCodec::kNone},
                                             {"jpeg", sl::TileCodec::kJpeg}};
constexpr Choice<sl::JpegColor> kColors[] = {{"detect", sl::JpegColor::kDetect},
                                             {"rgb", sl::JpegColor::kRGB}};

template <class T>
T item(const py::dict& d, const char* key, const std::string& where) {
  if (!d.contains(key)) throw std::invalid_argument(where + ": missing '" + key + "'");
  return d[key].cast<T>();
}

std::vector<std::uint64_t> u64_vector(const py::dict& d, const char* key,
                                      const std::string& where) {
  if (!d.contains(key)) throw std::invalid_argument(where + ": missing '" + key + "'");
  Array<std::uint64_t> a = py::cast<Array<std::uint64_t>>(d[key]);
  if (a.ndim() != 1) throw std::invalid_argument(where + ": '" + key + "' must be 1-D");
  return {a.data(), a.data() + a.shape(0)};
}

sl::TileLevel level_from_dict(const py::dict& d, std::size_t i) {
  const std::string where = "levels[" + std::to_string(i) + "]";
  sl::TileLevel lv;
  lv.width = item<std::int64_t>(d, "width", where);
  lv.height = item<std::int64_t>(d, "height", where);
  lv.tile_width = item<std::int64_t>(d, "tile_width", where);
  lv.tile_height = item<std::int64_t>(d, "tile_height", where);
  lv.codec = parse_choice("codec", item<std::string>(d, "codec", where), kCodecs);
  lv.color = parse_choice("color", item<std::string>(d, "color", where), kColors);
  lv.samples = item<int>(d, "samples", where);
  lv.offsets = u64_vector(d, "offsets", where);
  lv.counts = u64_vector(d, "counts", where);
  if (d.contains("tables") && !d["tables"].is_none()) {
    const std::string t = d["tables"].cast<py::bytes>();
    lv.tables.assign(t.begin(), t.end());
  }
  return lv;
}

std::unique_ptr<sl::TileReader> make_reader(const std::string& path, const py::list& levels) {
  std::vector<sl::TileLevel> lvs;
  lvs.reserve(levels.size());
  for (std::size_t i = 0; i < levels.size(); ++i) {
    lvs.push_back(level_from_dict(levels[i].cast<py::dict>(), i));
  }
  return std::make_unique<sl::TileReader>(path, std::move(lvs));
}

py::array_t<std::uint8_t> read_region(const sl::TileReader& r, int level, std::int64_t x,
                                      std::int64_t y, std::int64_t w, std::int64_t h) {
  if (w <= 0 || h <= 0) throw std::invalid_argument("w, h: must be positive");
  py::array_t<std::uint8_t> out({h, w, std::int64_t{3}});
  std::uint8_t* o = out.mutable_data();
  run_interruptible([&]() { r.read_region(level, x, y, w, h, o); });
  return out;
}

void load_patches(const sl::TileReader& r, int level, Array<std::int64_t> xy,
                  std::int64_t read_w, std::int64_t read_h, py::array out,
                  const std::string& out_type, const std::string& interpolation,
                  std::vector<float> mean, std::vector<float> std_, int threads) {
  if (xy.ndim() != 2 || xy.shape(1) != 2) {
    throw std::invalid_argument("xy: expected an (n, 2) int64 array");
  }
  tl::PreprocessParams p;
  p.format = tl::PixelFormat::kRGB;
  p.type = parse_choice("out_type", out_type, kOutTypes);
  p.filter = parse_choice("interpolation", interpolation, kFilters);
  const py::ssize_t n = xy.shape(0);
  check_batch_out(out, n, p.type, out_type);
  if (mean.size() != 3 || std_.size() != 3) {
    throw std::invalid_argument("mean, std: expected 3 values each");
  }
  for (int c = 0; c < 3; ++c) p.mean[c] = mean[c], p.std[c] = std_[c];
  p.out_h = out.shape(2);
  p.out_w = out.shape(3);
  const std::int64_t* c = xy.data();
  void* o = out.mutable_data();
  run_interruptible([&]() { r.load_patches(level, c, n, read_w, read_h, p, o, threads); });
}

}  // namespace

void bind_slides(py::module_& m) {
  m.def("jpeg_abi_version", &sl::jpeg_abi_version,
        "JPEG_LIB_VERSION this build was compiled for (0: built without jpeglib.h).");
  m.def("jpeg_load", &sl::jpeg_load, py::arg("path"),
        "dlopen a libjpeg and check its ABI; returns '' or the reason it cannot be used.");
  m.def("jpeg_loaded_path", &sl::jpeg_loaded_path, "The loaded libjpeg's path, or ''.");
  py::class_<sl::TileReader>(m, "TileReader",
                             "Batch patch reader over a tiled TIFF pyramid's tile tables.")
      .def(py::init(&make_reader), py::arg("path"), py::arg("levels"))
      .def_property_readonly("path", &sl::TileReader::path)
      .def_property_readonly("level_count", &sl::TileReader::level_count)
      .def("read_region", &read_region, py::arg("level"), py::arg("x"), py::arg("y"),
           py::arg("w"), py::arg("h"), "One RGB region of a level (level pixels).")
      .def("load_patches", &load_patches, py::arg("level"), py::arg("xy"), py::arg("read_w"),
           py::arg("read_h"), py::arg("out"), py::arg("out_type"), py::arg("interpolation"),
           py::arg("mean"), py::arg("std"), py::arg("threads"),
           "Read, decode, resize and normalise a batch of regions into out (GIL released).");
}

}  // namespace tb::bindings
