// _core.traj: the compiled pass of the JSON-lines importer (csrc/traj/): the scan that decides
// whether a chunk of lines may be read in bulk, and the item digests of its lines.
#include <Python.h>

#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "bindings/common.hpp"
#include "traj/jsonl.hpp"
#include "traj/pages.hpp"
#include "traj/quoted.hpp"

namespace tb::bindings {

namespace {

std::string_view bytes_view(const py::handle& obj, const char* name) {
  char* data = nullptr;
  Py_ssize_t size = 0;
  if (!PyBytes_Check(obj.ptr()) || PyBytes_AsStringAndSize(obj.ptr(), &data, &size) != 0) {
    PyErr_Clear();
    throw std::invalid_argument(std::string(name) + ": expected bytes, got " +
                                py::str(py::type::handle_of(obj).attr("__name__")).cast<std::string>());
  }
  return {data, static_cast<std::size_t>(size)};
}

py::tuple scan_chunk(const py::bytes& data) {
  const std::string_view view = bytes_view(data, "data");
  tb::traj::ChunkScan scan;
  {
    py::gil_scoped_release release;
    scan = tb::traj::scan_chunk(reinterpret_cast<const std::uint8_t*>(view.data()), view.size());
  }
  return py::make_tuple(scan.every_line_object, scan.may_break_limits, scan.utf8,
                        scan.max_brackets);
}

py::tuple scan_document(const py::bytes& data) {
  const std::string_view view = bytes_view(data, "data");
  tb::traj::DocumentScan scan;
  {
    py::gil_scoped_release release;
    scan = tb::traj::scan_document(reinterpret_cast<const std::uint8_t*>(view.data()),
                                   view.size());
  }
  return py::make_tuple(scan.may_break_limits, scan.utf8, scan.max_depth);
}

py::tuple verify_pages(const py::bytes& data) {
  const std::string_view view = bytes_view(data, "data");
  tb::traj::PageScan scan;
  {
    py::gil_scoped_release release;
    scan = tb::traj::verify_pages(reinterpret_cast<const std::uint8_t*>(view.data()), view.size());
  }
  return py::make_tuple(scan.checked, scan.unchecked, scan.error_at, scan.crc_mismatch,
                        scan.error);
}

py::int_ crc32_bytes(const py::bytes& data) {
  const std::string_view view = bytes_view(data, "data");
  return py::int_(tb::traj::crc32(reinterpret_cast<const std::uint8_t*>(view.data()),
                                  view.size()));
}

py::list line_digests(const py::bytes& fp, const py::list& ids, Array<std::int64_t> positions,
                      const py::list& lines, int threads) {
  const std::size_t n = lines.size();
  if (ids.size() != n || static_cast<std::size_t>(positions.size()) != n ||
      positions.ndim() != 1) {
    throw std::invalid_argument("ids, positions, lines: expected the same length, got " +
                                std::to_string(ids.size()) + ", " +
                                std::to_string(positions.size()) + " and " + std::to_string(n));
  }
  const std::string_view fp_view = bytes_view(fp, "fp");
  std::vector<std::string_view> id_views(n);
  std::vector<std::string_view> line_views(n);
  for (std::size_t i = 0; i < n; ++i) {
    PyObject* id = PyList_GET_ITEM(ids.ptr(), static_cast<Py_ssize_t>(i));
    Py_ssize_t size = 0;
    const char* utf8 = PyUnicode_Check(id) ? PyUnicode_AsUTF8AndSize(id, &size) : nullptr;
    if (utf8 == nullptr) {
      PyErr_Clear();
      throw std::invalid_argument("ids[" + std::to_string(i) + "]: expected a str encodable as "
                                  "UTF-8");
    }
    id_views[i] = {utf8, static_cast<std::size_t>(size)};
    line_views[i] = bytes_view(PyList_GET_ITEM(lines.ptr(), static_cast<Py_ssize_t>(i)), "lines");
  }
  std::string hex(32 * n, '\0');
  run_interruptible([&] {
    tb::traj::line_digests(fp_view, id_views, positions.data(), line_views, hex.data(), threads);
  });
  py::list out(n);
  for (std::size_t i = 0; i < n; ++i) {
    PyObject* s = PyUnicode_FromStringAndSize(hex.data() + 32 * i, 32);
    if (s == nullptr) throw py::error_already_set();
    PyList_SET_ITEM(out.ptr(), static_cast<Py_ssize_t>(i), s);
  }
  return out;
}

py::list quoted_present(const py::bytes& data, const py::list& names) {
  const std::string_view view = bytes_view(data, "data");
  std::vector<std::string_view> name_views;
  name_views.reserve(names.size());
  for (const py::handle& name : names) name_views.push_back(bytes_view(name, "names"));
  std::vector<bool> found;
  {
    py::gil_scoped_release release;
    found = tb::traj::quoted_present(reinterpret_cast<const std::uint8_t*>(view.data()),
                                     view.size(), name_views);
  }
  py::list out(found.size());
  for (std::size_t k = 0; k < found.size(); ++k) out[k] = py::bool_(found[k]);
  return out;
}

}  // namespace

void bind_traj(py::module_& m) {
  m.def("scan_chunk", &scan_chunk, py::arg("data"),
        "Scan JSON lines once: (every line an object, may break load_json's limits, valid "
        "UTF-8, most '[' and '{' on one line).");
  m.def("scan_document", &scan_document, py::arg("data"),
        "Scan one JSON document: (may break load_json's limits, valid UTF-8, deepest nesting).");
  m.def("quoted_present", &quoted_present, py::arg("data"), py::arg("names"),
        "For each name (bytes), whether '\"' name '\"' occurs in data: one pass over the quotes.");
  m.def("verify_pages", &verify_pages, py::arg("data"),
        "Walk the pages of one Parquet column chunk: (checked, unchecked, error byte or -1, "
        "CRC mismatch, reason).");
  m.def("crc32", &crc32_bytes, py::arg("data"), "zlib's CRC-32 of the bytes.");
  m.def("line_digests", &line_digests, py::arg("fp"), py::arg("ids"), py::arg("positions"),
        py::arg("lines"), py::arg("threads") = 0,
        "BLAKE2b-128 hex digests of fp NUL id NUL position NUL line, one per line.");
}

}  // namespace tb::bindings
