// The one map from C++ exceptions to Python exceptions (polars' pattern: one error map from the
// compiled core onto one documented Python hierarchy, py-polars/src/error.rs).
//
// Every exception that leaves a function of tumorboard._core goes through the translator that
// register_exception_map() installs, and arrives as the class documented in
// python/tumorboard/errors.py:
//
//   C++ exception (most derived first)       Python class
//   tb::bindings::invalid_type               tumorboard.errors.InvalidTypeError   (TypeError)
//   std::invalid_argument                    tumorboard.errors.InvalidArgumentError (ValueError)
//   std::domain_error                        tumorboard.errors.InvalidArgumentError (ValueError)
//   std::out_of_range                        tumorboard.errors.InvalidArgumentError (ValueError)
//   std::length_error                        tumorboard.errors.InvalidArgumentError (ValueError)
//   std::bad_alloc                           MemoryError
//   other std::logic_error                   tumorboard.errors.CoreError          (RuntimeError)
//   std::runtime_error (and its subclasses)  tumorboard.errors.CoreError          (RuntimeError)
//   any other std::exception                 tumorboard.errors.CoreError          (RuntimeError)
//
// The message is what() of the C++ exception. Two kinds pass through unchanged:
// py::error_already_set (a Python exception raised by a Python C-API call, re-raised as it was)
// and pybind11's own py::builtin_exception family (py::cast_error and the like, which pybind11
// translates itself). The core throws std::invalid_argument for bad input (with a message that
// names the argument), std::logic_error for a broken internal invariant, and never throws Python
// exceptions; the binding layer throws invalid_type where a Python object has the wrong type.
#pragma once

#include <stdexcept>

namespace tb::bindings {

// An argument of the wrong Python type. It derives from std::invalid_argument (it is a bad
// argument to C++ code that catches those) but arrives in Python as InvalidTypeError, which is a
// TypeError. Only the binding layer throws it.
class invalid_type : public std::invalid_argument {
 public:
  using std::invalid_argument::invalid_argument;
};

// Imports tumorboard.errors (once; the classes are kept for the life of the process) and
// installs the map above as the exception translator of this extension module only
// (py::register_local_exception_translator), so other pybind11 modules keep their own. Called
// once, from the module initializer in module.cpp.
void register_exception_map();

}  // namespace tb::bindings
