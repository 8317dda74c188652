#include "bindings/errors.hpp"

#include <pybind11/gil_safe_call_once.h>
#include <pybind11/pybind11.h>

#include <exception>
#include <new>

namespace tb::bindings {

namespace py = pybind11;

namespace {

// The classes of tumorboard.errors the map raises.
struct ErrorClasses {
  py::object invalid_argument;
  py::object invalid_type;
  py::object core;
};

// Imported on first use (the module initializer) and stored for the life of the process: the
// storage is never destroyed, so no Python object is released after the interpreter finalizes.
const ErrorClasses& error_classes() {
  PYBIND11_CONSTINIT static py::gil_safe_call_once_and_store<ErrorClasses> storage;
  return storage
      .call_once_and_store_result([] {
        py::module_ errors = py::module_::import("tumorboard.errors");
        return ErrorClasses{errors.attr("InvalidArgumentError"), errors.attr("InvalidTypeError"),
                            errors.attr("CoreError")};
      })
      .get_stored();
}

// The translator: the table in errors.hpp, most derived classes first. It runs with the GIL
// held, on the thread that called into _core.
void translate(std::exception_ptr error) {
  try {
    if (error) std::rethrow_exception(error);
  } catch (const py::error_already_set&) {
    throw;  // a Python exception already: re-raised unchanged by pybind11
  } catch (const py::builtin_exception&) {
    throw;  // pybind11's own exceptions: translated by pybind11
  } catch (const invalid_type& e) {
    py::set_error(error_classes().invalid_type, e.what());
  } catch (const std::invalid_argument& e) {
    py::set_error(error_classes().invalid_argument, e.what());
  } catch (const std::domain_error& e) {
    py::set_error(error_classes().invalid_argument, e.what());
  } catch (const std::out_of_range& e) {
    py::set_error(error_classes().invalid_argument, e.what());
  } catch (const std::length_error& e) {
    py::set_error(error_classes().invalid_argument, e.what());
  } catch (const std::bad_alloc& e) {
    py::set_error(PyExc_MemoryError, e.what());
  } catch (const std::logic_error& e) {
    py::set_error(error_classes().core, e.what());
  } catch (const std::runtime_error& e) {
    py::set_error(error_classes().core, e.what());
  } catch (const std::exception& e) {
    py::set_error(error_classes().core, e.what());
  }
}

}  // namespace

void register_exception_map() {
  error_classes();  // import now, so a broken tumorboard.errors fails the import of _core
  py::register_local_exception_translator(&translate);
}

}  // namespace tb::bindings
