// Shared declarations of the binding layer, the only code that includes pybind11.
//
// tumorboard._core has one submodule per core domain, each bound by one file of this folder:
// stats.cpp (_core.stats), text.cpp (_core.text), tiling.cpp (_core.tiling), slides.cpp
// (_core.slides), seqmask.cpp (_core.seqmask), traj.cpp (_core.traj) and testing.cpp (_core.testing, hooks that expose internals to the tests).
// module.cpp creates the submodules and registers the one exception map (errors.hpp).
//
// The wrappers check only what memory safety needs (shapes, offsets, code ranges); the meaning of
// arguments is validated once, in the Python packages, before the call. Every batch of work runs
// with the GIL released. This header holds what more than one domain needs: array conversion, the
// one parser of string choices, the one check of offsets arrays and the one reader of Python
// string columns, and run_interruptible, which runs a batch of core work with the GIL released
// and Ctrl-C honoured (common/cancel.hpp).
#pragma once

#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>
#include <vector>

#include "common/cancel.hpp"

namespace tb::bindings {

namespace py = pybind11;

// Runs fn() with the GIL released and a CancelToken on this thread whose poll briefly re-acquires
// the GIL and runs the interpreter's signal handlers (PyErr_CheckSignals). When a handler raises
// (KeyboardInterrupt for Ctrl-C, or whatever a SIGALRM handler raises), the core's parallel loops
// stop between tasks (within about CancelToken::kPollInterval plus one task) and that Python
// exception is raised here, so a long bootstrap stops within a second of Ctrl-C. Call it with the
// GIL held.
template <class Fn>
decltype(auto) run_interruptible(Fn&& fn) {
  PyObject* type = nullptr;
  PyObject* value = nullptr;
  PyObject* trace = nullptr;
  CancelToken token([&]() {
    py::gil_scoped_acquire gil;
    if (PyErr_CheckSignals() == 0) return false;
    PyErr_Fetch(&type, &value, &trace);
    return true;
  });
  ScopedCancel scope(token);
  try {
    py::gil_scoped_release release;
    return fn();
  } catch (const cancelled&) {
    if (type == nullptr) {
      PyErr_SetString(PyExc_KeyboardInterrupt, "interrupted");
    } else {
      PyErr_Restore(type, value, trace);
    }
    throw py::error_already_set();
  }
}

// A C-contiguous numpy array of T; other dtypes and layouts are converted on the way in.
template <class T>
using Array = py::array_t<T, py::array::c_style | py::array::forcecast>;

// A 1-D numpy array holding a copy of v.
template <class T>
py::array_t<T> to_numpy(const std::vector<T>& v) {
  py::array_t<T> out(static_cast<py::ssize_t>(v.size()));
  if (!v.empty()) std::memcpy(out.mutable_data(), v.data(), v.size() * sizeof(T));
  return out;
}

// ---------------------------------------------------------------------------------- choices

// One accepted spelling of a string option and the enum value it stands for.
template <class E>
struct Choice {
  std::string_view name;
  E value;
};

// Throws std::invalid_argument in the one message format of the binding layer:
//   method: unknown value 'x'; expected one of 'percentile', 'basic', 'bca'
[[noreturn]] void throw_unknown_choice(std::string_view arg, std::string_view value,
                                       const std::vector<std::string_view>& names);

// The value of the choice named `value` among `choices`, for the argument called `arg`; throws
// std::invalid_argument (see throw_unknown_choice) for any other string. Every string-to-enum
// option of _core goes through this function.
template <class E, std::size_t N>
E parse_choice(std::string_view arg, std::string_view value, const Choice<E> (&choices)[N]) {
  for (const auto& c : choices) {
    if (c.name == value) return c.value;
  }
  std::vector<std::string_view> names;
  names.reserve(N);
  for (const auto& c : choices) names.push_back(c.name);
  throw_unknown_choice(arg, value, names);
}

// ---------------------------------------------------------------------------------- offsets

// What the offsets must cover of the buffer they index.
enum class OffsetSpan {
  kWithin,  // any consecutive slices inside the buffer (a sliced Arrow array)
  kWhole,   // the whole buffer: the first offset is 0 and the last is its length
};

// Checks that offsets[0 .. count) delimit count - 1 consecutive slices of a buffer of `total`
// elements: every offset lies in [0, total] and none is smaller than the one before it; with
// OffsetSpan::kWhole there must be at least one offset, the first 0 and the last `total`.
// Throws std::invalid_argument naming `name`; count == 0 (no slices) passes with kWithin.
void check_offsets(const std::int64_t* offsets, std::size_t count, std::int64_t total,
                   std::string_view name, OffsetSpan span);

// ----------------------------------------------------------------------------- string columns

struct StringColumnOptions {
  bool allow_missing = false;  // None / NaN (or an Arrow null) marks a missing entry
  bool lower = false;          // view non-ASCII strings lowered by Python's str.lower()
};

// A column of Python strings viewed in place as UTF-8. The views stay valid while the column
// lives (it owns references to every Python object they point into), also with the GIL released.
struct StringColumn {
  std::vector<std::string_view> text;
  std::vector<std::uint8_t> present;  // empty: every entry present; else 0 marks a missing one
  std::vector<py::object> owners;

  std::size_t size() const { return text.size(); }
  bool has(std::size_t i) const { return present.empty() || present[i] != 0; }
};

// Reads a text column named `name` (the name used in error messages, e.g. "hyps", "refs[1]"):
//  * a sequence of str: each str is viewed through PyUnicode_AsUTF8AndSize (lone surrogates are
//    re-encoded with "surrogatepass"); None or a float NaN is a missing entry, any other object
//    raises invalid_type ("name[i]: expected a str, got int");
//  * a tuple (offsets int64, data uint8, validity uint8 or None), an Arrow large_string array's
//    buffers: offsets are checked with OffsetSpan::kWithin, validity 0 marks a missing entry.
// A missing entry throws std::invalid_argument ("name[i] is null (None); expected a str") unless
// options.allow_missing. With options.lower, ASCII strings are viewed as they are (the core lowers
// ASCII itself) and non-ASCII strings are replaced by Python's str.lower() of them, which applies
// the full Unicode rules.
StringColumn read_string_column(py::handle column, const std::string& name,
                                const StringColumnOptions& options = {});

// "name[i]", the name of one entry of a column in error messages.
std::string entry_name(std::string_view name, std::size_t i);

// ------------------------------------------------------------------------------- submodules

void bind_stats(py::module_& m);
void bind_text(py::module_& m);
void bind_tiling(py::module_& m);
void bind_slides(py::module_& m);
void bind_seqmask(py::module_& m);
void bind_traj(py::module_& m);
void bind_testing(py::module_& m);

}  // namespace tb::bindings
