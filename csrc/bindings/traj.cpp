// _core.traj: the compiled passes of the trajectory store and its importers (csrc/traj/): the
// lines of a JSON-lines block and its bulk reader (typed columns), the scan load_json decides
// its walk by, the item digests, and the Parquet page checks.
#include <Python.h>

#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "bindings/common.hpp"
#include "traj/jsonl.hpp"
#include "traj/json_text.hpp"
#include "traj/jsonl_columns.hpp"
#include "traj/pages.hpp"

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

// A 1-D numpy array that takes over v's memory (no copy): a capsule owns the vector.
template <class T>
py::array_t<T> owned_array(std::vector<T>&& v) {
  auto* heap = new std::vector<T>(std::move(v));
  py::capsule owner(heap, [](void* p) { delete static_cast<std::vector<T>*>(p); });
  return py::array_t<T>({static_cast<py::ssize_t>(heap->size())}, {sizeof(T)}, heap->data(),
                        owner);
}

// A uint8 numpy array that takes over a string's bytes (no copy).
py::array_t<std::uint8_t> owned_bytes(std::string&& s) {
  auto* heap = new std::string(std::move(s));
  py::capsule owner(heap, [](void* p) { delete static_cast<std::string*>(p); });
  return py::array_t<std::uint8_t>({static_cast<py::ssize_t>(heap->size())},
                                   {sizeof(std::uint8_t)},
                                   reinterpret_cast<const std::uint8_t*>(heap->data()), owner);
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

// Checks that [starts[i], ends[i]) are spans of a buffer of `size` bytes (two 1-D arrays of one
// length); returns how many. Throws std::invalid_argument naming `name`.
std::size_t check_spans(const Array<std::int64_t>& starts, const Array<std::int64_t>& ends,
                        std::size_t size, const std::string& name) {
  if (starts.ndim() != 1 || ends.ndim() != 1 || starts.size() != ends.size()) {
    throw std::invalid_argument(name + ": expected starts and ends, two 1-D arrays of one length");
  }
  const std::int64_t* s = starts.data();
  const std::int64_t* e = ends.data();
  const auto n = static_cast<std::size_t>(starts.size());
  for (std::size_t i = 0; i < n; ++i) {
    if (s[i] < 0 || s[i] > e[i] || e[i] > static_cast<std::int64_t>(size)) {
      throw std::invalid_argument(name + ": line " + std::to_string(i) + " is not a span of data");
    }
  }
  return n;
}

// Lines given as a list of bytes, or as (data bytes, starts, ends): spans of one buffer. The
// views point into the caller's objects, alive for the call.
std::vector<std::string_view> line_views(const py::handle& lines) {
  std::vector<std::string_view> views;
  if (py::isinstance<py::tuple>(lines)) {
    const auto t = py::reinterpret_borrow<py::tuple>(lines);
    if (t.size() != 3) throw std::invalid_argument("lines: expected (data, starts, ends)");
    const std::string_view data = bytes_view(t[0], "lines[0]");
    const auto starts = t[1].cast<Array<std::int64_t>>();
    const auto ends = t[2].cast<Array<std::int64_t>>();
    views.resize(check_spans(starts, ends, data.size(), "lines"));
    for (std::size_t i = 0; i < views.size(); ++i) {
      const auto a = static_cast<std::size_t>(starts.data()[i]);
      views[i] = data.substr(a, static_cast<std::size_t>(ends.data()[i]) - a);
    }
    return views;
  }
  const auto list = py::reinterpret_borrow<py::list>(lines);
  views.resize(list.size());
  for (std::size_t i = 0; i < views.size(); ++i) {
    views[i] = bytes_view(PyList_GET_ITEM(list.ptr(), static_cast<Py_ssize_t>(i)), "lines");
  }
  return views;
}

py::object line_digests(const py::bytes& fp, const py::handle& ids, Array<std::int64_t> positions,
                        const py::handle& lines, int threads, bool as_buffer) {
  if (!py::isinstance<py::tuple>(lines) && !py::isinstance<py::list>(lines)) {
    throw std::invalid_argument("lines: expected a list of bytes or (data, starts, ends)");
  }
  const std::vector<std::string_view> views = line_views(lines);
  const std::size_t n = views.size();
  const StringColumn id_column = read_string_column(ids, "ids");
  if (id_column.size() != n || static_cast<std::size_t>(positions.size()) != n ||
      positions.ndim() != 1) {
    throw std::invalid_argument("ids, positions, lines: expected the same length, got " +
                                std::to_string(id_column.size()) + ", " +
                                std::to_string(positions.size()) + " and " + std::to_string(n));
  }
  std::string hex(32 * n, '\0');
  run_interruptible([&] {
    tb::traj::line_digests(bytes_view(fp, "fp"), id_column.text, positions.data(), views, hex.data(),
                           threads);
  });
  if (as_buffer) return owned_bytes(std::move(hex));
  py::list out(n);
  for (std::size_t i = 0; i < n; ++i) {
    PyObject* s = PyUnicode_FromStringAndSize(hex.data() + 32 * i, 32);
    if (s == nullptr) throw py::error_already_set();
    PyList_SET_ITEM(out.ptr(), static_cast<Py_ssize_t>(i), s);
  }
  return out;
}

py::tuple line_spans(const py::bytes& data) {
  const std::string_view view = bytes_view(data, "data");
  tb::traj::LineSpans spans;
  {
    py::gil_scoped_release release;
    spans = tb::traj::line_spans(reinterpret_cast<const std::uint8_t*>(view.data()), view.size());
  }
  return py::make_tuple(owned_array(std::move(spans.starts)), owned_array(std::move(spans.ends)),
                        owned_array(std::move(spans.index)));
}

constexpr Choice<tb::traj::FieldKind> kFieldKinds[] = {
    {"id", tb::traj::FieldKind::kId},
    {"str", tb::traj::FieldKind::kStr},
    {"bool", tb::traj::FieldKind::kBool},
    {"int", tb::traj::FieldKind::kInt},
    {"int32", tb::traj::FieldKind::kInt32},
    {"number", tb::traj::FieldKind::kNumber},
    {"flag", tb::traj::FieldKind::kFlag},
    {"str_list", tb::traj::FieldKind::kStrList},
    {"int_list", tb::traj::FieldKind::kIntList},
    {"number_list", tb::traj::FieldKind::kNumberList},
    {"bool_list", tb::traj::FieldKind::kBoolList},
    {"nested", tb::traj::FieldKind::kNested},
    {"events", tb::traj::FieldKind::kEvents},
};

py::object optional_array(std::vector<std::int64_t>&& v, bool used) {
  return used ? py::object(owned_array(std::move(v))) : py::object(py::none());
}

py::tuple read_columns(const py::bytes& data, Array<std::int64_t> starts, Array<std::int64_t> ends,
                       const std::vector<std::pair<std::vector<std::string>, std::string>>& fields,
                       int max_depth, std::size_t sample, bool per_line,
                       const std::vector<std::string>& event_kinds, int threads) {
  const std::string_view view = bytes_view(data, "data");
  const std::size_t n = check_spans(starts, ends, view.size(), "starts, ends");
  const std::int64_t* s = starts.data();
  const std::int64_t* e = ends.data();
  std::vector<tb::traj::FieldSpec> specs;
  specs.reserve(fields.size());
  for (const auto& [path, kind] : fields) {
    if (path.empty()) throw std::invalid_argument("fields: a key of no part");
    specs.push_back({path, parse_choice("kind", kind, kFieldKinds)});
  }
  tb::traj::ReadColumns read = run_interruptible([&] {
    return tb::traj::read_columns(reinterpret_cast<const std::uint8_t*>(view.data()), s, e, n,
                                  specs, max_depth, sample, per_line, event_kinds, threads);
  });
  if (!read.ok) {
    return py::make_tuple(false, read.reason, read.line, py::none(), py::none(), py::none(),
                          py::none());
  }
  py::list columns;
  for (auto& col : read.columns) {
    using tb::traj::ValueLayout;
    const ValueLayout layout = tb::traj::value_layout(col.kind);
    const bool list = tb::traj::is_list(col.kind);
    const bool strings = layout == ValueLayout::kStrings;
    const bool bools = layout == ValueLayout::kBools;
    const bool ints = layout == ValueLayout::kInts;
    const bool numbers = layout == ValueLayout::kNumbers;
    columns.append(py::make_tuple(
        col.null_count, owned_array(std::move(col.validity)),
        optional_array(std::move(col.list_offsets), list),
        optional_array(std::move(col.offsets), strings),
        strings || bools ? py::object(owned_bytes(std::move(col.bytes))) : py::object(py::none()),
        optional_array(std::move(col.ints), ints),
        numbers ? py::object(owned_array(std::move(col.numbers))) : py::object(py::none())));
  }
  py::list keys;
  for (const auto& k : read.keys_seen) {
    PyObject* text = PyUnicode_DecodeUTF8(k.data(), static_cast<Py_ssize_t>(k.size()), "strict");
    if (text == nullptr) throw py::error_already_set();
    keys.append(py::reinterpret_steal<py::object>(text));
  }
  py::object events = py::none();
  if (read.events.size() > 0) {
    tb::traj::EventData& ev = read.events;
    auto text = [](tb::traj::TextData& t) {
      return py::make_tuple(owned_array(std::move(t.valid)), owned_array(std::move(t.offsets)),
                            owned_bytes(std::move(t.bytes)));
    };
    py::dict d;
    d["_line"] = owned_array(std::move(ev.line));
    d["step"] = py::make_tuple(owned_array(std::move(ev.step)), owned_array(std::move(ev.step_valid)));
    d["role"] = text(ev.role);
    d["kind"] = text(ev.kind);
    d["tool"] = text(ev.tool);
    d["input"] = text(ev.input);
    d["output"] = text(ev.output);
    d["ok"] = py::make_tuple(owned_array(std::move(ev.ok)), owned_array(std::move(ev.ok_valid)));
    d["error"] = text(ev.error);
    d["latency_s"] = py::make_tuple(owned_array(std::move(ev.latency)),
                                    owned_array(std::move(ev.latency_valid)));
    events = d;
  }
  return py::make_tuple(true, "", -1, columns, keys, owned_array(std::move(read.given_up)),
                        events);
}

}  // namespace

void bind_traj(py::module_& m) {
  m.def("scan_document", &scan_document, py::arg("data"),
        "Scan one JSON document: (may break load_json's limits, valid UTF-8, deepest nesting).");
  m.def("verify_pages", &verify_pages, py::arg("data"),
        "Walk the pages of one Parquet column chunk: (checked, unchecked, error byte or -1, "
        "CRC mismatch, reason).");
  m.def("crc32", &crc32_bytes, py::arg("data"), "zlib's CRC-32 of the bytes.");
  m.def("line_spans", &line_spans, py::arg("data"),
        "The non-blank lines of JSON-lines bytes (split on newlines only): (starts, ends, "
        "index among all lines), int64 arrays.");
  m.def("read_columns", &read_columns, py::arg("data"), py::arg("starts"), py::arg("ends"),
        py::arg("fields"), py::arg("max_depth"), py::arg("sample"), py::arg("per_line") = false,
        py::arg("event_kinds") = std::vector<std::string>{}, py::arg("threads") = 0,
        "Read typed columns of (key parts, kind) fields from JSON lines [starts, ends) of data: "
        "(ok, reason, line, columns, keys seen, lines given up, events); ok False sends the "
        "chunk to the line reader; with per_line, only the lines given up (null rows) go "
        "there. events: a dict of the 'events' field's columns (None: no event).");
  m.def(
      "json_text_parts",
      [](const std::string& text, double number) {
        std::string quoted;
        tb::traj::append_json_string(text, quoted);
        std::string repr;
        tb::traj::append_float_repr(number, repr);
        return py::make_tuple(py::bytes(quoted), repr, tb::traj::python_json_accepts(text));
      },
      py::arg("text"), py::arg("number"),
      "(json.dumps(text, ensure_ascii=False) as UTF-8 bytes, repr(number), whether json.loads "
      "accepts text: 1, 0 or -1 undecided), as the compiled reader writes and decides them.");
  m.def("line_digests", &line_digests, py::arg("fp"), py::arg("ids"), py::arg("positions"),
        py::arg("lines"), py::arg("threads") = 0, py::arg("as_buffer") = false,
        "BLAKE2b-128 hex digests of fp NUL id NUL position NUL line, one per line: a list of "
        "str, or with as_buffer their 32 hex digits each in one uint8 array. ids: a list of "
        "str or Arrow large_string buffers (offsets, data, validity); lines: a list of bytes "
        "or (data, starts, ends), spans of one buffer.");
}

}  // namespace tb::bindings
