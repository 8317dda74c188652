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
#include "slides/prefetcher.hpp"
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

tl::PreprocessParams preprocess_params(std::int64_t out_h, std::int64_t out_w,
                                       const std::string& out_type,
                                       const std::string& interpolation,
                                       const std::vector<float>& mean,
                                       const std::vector<float>& std_) {
  tl::PreprocessParams p;
  p.format = tl::PixelFormat::kRGB;
  p.type = parse_choice("out_type", out_type, kOutTypes);
  p.filter = parse_choice("interpolation", interpolation, kFilters);
  if (mean.size() != 3 || std_.size() != 3) {
    throw std::invalid_argument("mean, std: expected 3 values each");
  }
  if (out_h <= 0 || out_w <= 0) throw std::invalid_argument("out_h, out_w: must be positive");
  for (int c = 0; c < 3; ++c) p.mean[c] = mean[c], p.std[c] = std_[c];
  p.out_h = out_h;
  p.out_w = out_w;
  return p;
}

// numpy dtype of an output type (bfloat16 as its uint16 bit patterns).
py::dtype out_dtype(tl::OutType t) {
  switch (t) {
    case tl::OutType::kFloat32: return py::dtype("float32");
    case tl::OutType::kFloat16: return py::dtype("float16");
    case tl::OutType::kBFloat16: return py::dtype("uint16");
    default: return py::dtype("uint8");
  }
}

struct PyPrefetcher {
  std::unique_ptr<sl::Prefetcher> impl;
  tl::PreprocessParams params;
};

std::unique_ptr<PyPrefetcher> make_prefetcher(const sl::TileReader& r, int level,
                                              Array<std::int64_t> xy, std::int64_t read_w,
                                              std::int64_t read_h, std::int64_t batch,
                                              std::int64_t out_h, std::int64_t out_w,
                                              const std::string& out_type,
                                              const std::string& interpolation,
                                              std::vector<float> mean, std::vector<float> std_,
                                              int workers, int depth) {
  if (xy.ndim() != 2 || xy.shape(1) != 2) {
    throw std::invalid_argument("xy: expected an (n, 2) int64 array");
  }
  auto out = std::make_unique<PyPrefetcher>();
  out->params = preprocess_params(out_h, out_w, out_type, interpolation, mean, std_);
  out->impl = std::make_unique<sl::Prefetcher>(r, level, xy.data(), xy.shape(0), read_w, read_h,
                                               batch, out->params, workers, depth);
  return out;
}

// The next batch in order as (index, (count, 3, out_h, out_w) array), or None when all were
// taken. Waits with the GIL released; Ctrl-C (any signal handler that raises) ends the wait.
py::object prefetcher_next(PyPrefetcher& self) {
  if (!self.impl) throw std::invalid_argument("the prefetcher is closed");
  auto buffer = std::make_unique<std::vector<std::uint8_t>>();
  std::int64_t index = -1;
  try {
    py::gil_scoped_release release;
    index = self.impl->next(*buffer, [] {
      py::gil_scoped_acquire gil;
      return PyErr_CheckSignals() != 0;
    });
  } catch (const cancelled&) {
    throw py::error_already_set();
  }
  if (index < 0) return py::none();
  const std::int64_t count = self.impl->batch_size(index);
  std::uint8_t* data = buffer->data();
  py::capsule owner(buffer.release(), [](void* v) {
    delete static_cast<std::vector<std::uint8_t>*>(v);
  });
  py::array images(out_dtype(self.params.type),
                   {count, std::int64_t{3}, self.params.out_h, self.params.out_w}, data, owner);
  return py::make_tuple(index, images);
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
  py::class_<PyPrefetcher>(m, "Prefetcher",
                           "Batches of a TileReader produced ahead by C++ threads, in order.")
      .def(py::init(&make_prefetcher), py::keep_alive<1, 2>(), py::arg("reader"),
           py::arg("level"), py::arg("xy"), py::arg("read_w"), py::arg("read_h"),
           py::arg("batch"), py::arg("out_h"), py::arg("out_w"), py::arg("out_type"),
           py::arg("interpolation"), py::arg("mean"), py::arg("std"), py::arg("workers"),
           py::arg("depth"))
      .def_property_readonly("batch_count",
                             [](const PyPrefetcher& p) {
                               return p.impl ? p.impl->batch_count() : std::int64_t{0};
                             })
      .def("next", &prefetcher_next, "(index, images) of the next batch, or None at the end.")
      .def(
          "close",
          [](PyPrefetcher& p) {
            if (!p.impl) return;
            {
              py::gil_scoped_release release;
              p.impl->close();
            }
            p.impl.reset();
          },
          "Stop and join the workers.");
}

}  // namespace tb::bindings
