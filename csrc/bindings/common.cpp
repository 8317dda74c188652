#include "bindings/common.hpp"

#include <stdexcept>

#include "bindings/errors.hpp"

namespace tb::bindings {

void throw_unknown_choice(std::string_view arg, std::string_view value,
                          const std::vector<std::string_view>& names) {
  std::string msg(arg);
  msg += ": unknown value '";
  msg += value;
  msg += "'; expected one of ";
  for (std::size_t i = 0; i < names.size(); ++i) {
    if (i) msg += ", ";
    msg += '\'';
    msg += names[i];
    msg += '\'';
  }
  throw std::invalid_argument(msg);
}

void check_offsets(const std::int64_t* offsets, std::size_t count, std::int64_t total,
                   std::string_view name, OffsetSpan span) {
  if (span == OffsetSpan::kWhole &&
      (count == 0 || offsets[0] != 0 || offsets[count - 1] != total)) {
    const std::string got = count == 0 ? std::string("no offsets")
                                       : std::to_string(offsets[0]) + " to " +
                                             std::to_string(offsets[count - 1]);
    throw std::invalid_argument(std::string(name) + ": expected offsets from 0 to " +
                                std::to_string(total) + ", got " + got);
  }
  for (std::size_t i = 0; i < count; ++i) {
    const std::int64_t v = offsets[i];
    if (v < 0 || v > total || (i > 0 && v < offsets[i - 1])) {
      throw std::invalid_argument(entry_name(name, i) + " is " + std::to_string(v) +
                                  "; expected offsets that do not decrease and lie in [0, " +
                                  std::to_string(total) + "]");
    }
  }
}

std::string entry_name(std::string_view name, std::size_t i) {
  return std::string(name) + "[" + std::to_string(i) + "]";
}

namespace {

// UTF-8 bytes of a str, in place; lone surrogates are encoded with "surrogatepass" (they are
// opaque characters to every rule, as in Python) into bytes owned by the column.
std::string_view utf8_of(PyObject* s, StringColumn& c) {
  Py_ssize_t size = 0;
  const char* data = PyUnicode_AsUTF8AndSize(s, &size);
  if (data == nullptr) {
    PyErr_Clear();
    PyObject* b = PyUnicode_AsEncodedString(s, "utf-8", "surrogatepass");
    if (b == nullptr) throw py::error_already_set();
    c.owners.push_back(py::reinterpret_steal<py::object>(b));
    data = PyBytes_AS_STRING(b);
    size = PyBytes_GET_SIZE(b);
  }
  return {data, static_cast<std::size_t>(size)};
}

// UTF-8 of Python's str.lower() of s (exact Unicode rules), owned by the column.
std::string_view lowered(PyObject* s, StringColumn& c) {
  py::object low = py::reinterpret_borrow<py::object>(s).attr("lower")();
  c.owners.push_back(low);
  return utf8_of(low.ptr(), c);
}

[[noreturn]] void throw_missing(const std::string& name, std::size_t i, const char* what) {
  throw std::invalid_argument(entry_name(name, i) + " is null" + what + "; expected a str");
}

StringColumn from_sequence(py::handle obj, const std::string& name,
                           const StringColumnOptions& options) {
  StringColumn c;
  // A private list: the caller cannot change the items while the GIL is released.
  PyObject* lst = PySequence_List(obj.ptr());
  if (lst == nullptr) {
    if (!PyErr_ExceptionMatches(PyExc_TypeError)) throw py::error_already_set();
    PyErr_Clear();
    throw invalid_type(name + ": expected a sequence of str, got " + Py_TYPE(obj.ptr())->tp_name);
  }
  c.owners.push_back(py::reinterpret_steal<py::object>(lst));
  const auto n = static_cast<std::size_t>(PyList_GET_SIZE(lst));
  c.text.resize(n);
  for (std::size_t i = 0; i < n; ++i) {
    PyObject* s = PyList_GET_ITEM(lst, static_cast<Py_ssize_t>(i));
    const bool nan = PyFloat_Check(s) && PyFloat_AS_DOUBLE(s) != PyFloat_AS_DOUBLE(s);
    if (s == Py_None || nan) {
      if (!options.allow_missing) throw_missing(name, i, nan ? " (NaN)" : " (None)");
      if (c.present.empty()) c.present.assign(n, 1);
      c.present[i] = 0;
      continue;
    }
    if (!PyUnicode_Check(s)) {
      throw invalid_type(entry_name(name, i) + ": expected a str, got " + Py_TYPE(s)->tp_name);
    }
    c.text[i] = (options.lower && !PyUnicode_IS_ASCII(s)) ? lowered(s, c) : utf8_of(s, c);
  }
  return c;
}

// The buffer of `obj` as a C-contiguous array of T, or invalid_type naming `what`.
template <class T>
Array<T> buffer_of(py::handle obj, const std::string& what, const char* dtype) {
  auto a = Array<T>::ensure(obj);
  if (!a) {
    PyErr_Clear();
    throw invalid_type(what + ": expected a 1-D " + dtype + " array, got " +
                       Py_TYPE(obj.ptr())->tp_name);
  }
  if (a.ndim() != 1) {
    throw std::invalid_argument(what + ": expected a 1-D " + dtype + " array, got " +
                                std::to_string(a.ndim()) + " dimensions");
  }
  return a;
}

StringColumn from_arrow(const py::tuple& t, const std::string& name,
                        const StringColumnOptions& options) {
  if (t.size() != 3) {
    throw std::invalid_argument(name + ": expected (offsets, data, validity), got a tuple of " +
                                std::to_string(t.size()));
  }
  StringColumn c;
  auto offsets = buffer_of<std::int64_t>(t[0], name + " offsets", "int64");
  auto data = buffer_of<std::uint8_t>(t[1], name + " data", "uint8");
  c.owners.push_back(offsets);
  c.owners.push_back(data);
  const std::int64_t* off = offsets.data();
  const auto count = static_cast<std::size_t>(offsets.size());
  const std::size_t n = count > 0 ? count - 1 : 0;
  check_offsets(off, count, static_cast<std::int64_t>(data.size()), name + " offsets",
                OffsetSpan::kWithin);
  if (!t[2].is_none()) {
    auto valid = buffer_of<std::uint8_t>(t[2], name + " validity", "uint8");
    if (static_cast<std::size_t>(valid.size()) != n) {
      throw std::invalid_argument(name + " validity: expected " + std::to_string(n) +
                                  " entries (one per string), got " +
                                  std::to_string(valid.size()));
    }
    c.present.assign(valid.data(), valid.data() + n);
    for (std::size_t i = 0; i < n && !options.allow_missing; ++i) {
      if (!c.present[i]) throw_missing(name, i, "");
    }
  }
  const char* bytes = reinterpret_cast<const char*>(data.data());
  c.text.resize(n);
  for (std::size_t i = 0; i < n; ++i) {
    std::string_view s(bytes + off[i], static_cast<std::size_t>(off[i + 1] - off[i]));
    bool ascii = true;
    for (const char ch : s) ascii &= static_cast<unsigned char>(ch) < 0x80;
    if (options.lower && !ascii && c.has(i)) {
      PyObject* u =
          PyUnicode_DecodeUTF8(s.data(), static_cast<Py_ssize_t>(s.size()), "surrogatepass");
      if (u == nullptr) {
        PyErr_Clear();
        throw std::invalid_argument(entry_name(name, i) + ": invalid UTF-8");
      }
      auto owner = py::reinterpret_steal<py::object>(u);
      s = lowered(u, c);
    }
    c.text[i] = s;
  }
  return c;
}

}  // namespace

StringColumn read_string_column(py::handle column, const std::string& name,
                                const StringColumnOptions& options) {
  if (py::isinstance<py::tuple>(column)) {
    return from_arrow(py::reinterpret_borrow<py::tuple>(column), name, options);
  }
  return from_sequence(column, name, options);
}

}  // namespace tb::bindings
