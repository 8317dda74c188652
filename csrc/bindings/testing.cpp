// _core.testing: hooks that expose internals of the core to the test suite: known-answer and
// distribution checks of the random-number primitives, and a function that throws each C++
// exception type, to test the exception map (errors.hpp) row by row. Not part of the API.
#include <array>
#include <cstdint>
#include <exception>
#include <new>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "bindings/common.hpp"
#include "bindings/errors.hpp"
#include "common/philox_avx2.hpp"
#include "common/rng.hpp"
#include "stats/binomial.hpp"
#include "stats/bootstrap.hpp"
#include "stats/poisson.hpp"

namespace tb::bindings {

namespace {

// A std::exception outside the logic_error and runtime_error families.
class PlainException : public std::exception {
 public:
  explicit PlainException(std::string message) : message_(std::move(message)) {}
  const char* what() const noexcept override { return message_.c_str(); }

 private:
  std::string message_;
};

enum class Thrown {
  kInvalidType,
  kInvalidArgument,
  kDomainError,
  kOutOfRange,
  kLengthError,
  kBadAlloc,
  kLogicError,
  kRuntimeError,
  kRangeError,
  kOverflowError,
  kException,
};

constexpr Choice<Thrown> kThrown[] = {
    {"invalid_type", Thrown::kInvalidType},     {"invalid_argument", Thrown::kInvalidArgument},
    {"domain_error", Thrown::kDomainError},     {"out_of_range", Thrown::kOutOfRange},
    {"length_error", Thrown::kLengthError},     {"bad_alloc", Thrown::kBadAlloc},
    {"logic_error", Thrown::kLogicError},       {"runtime_error", Thrown::kRuntimeError},
    {"range_error", Thrown::kRangeError},       {"overflow_error", Thrown::kOverflowError},
    {"exception", Thrown::kException},
};

[[noreturn]] void throw_exception(const std::string& kind, const std::string& message) {
  switch (parse_choice("kind", kind, kThrown)) {
    case Thrown::kInvalidType:
      throw invalid_type(message);
    case Thrown::kInvalidArgument:
      throw std::invalid_argument(message);
    case Thrown::kDomainError:
      throw std::domain_error(message);
    case Thrown::kOutOfRange:
      throw std::out_of_range(message);
    case Thrown::kLengthError:
      throw std::length_error(message);
    case Thrown::kBadAlloc:
      throw std::bad_alloc();
    case Thrown::kLogicError:
      throw std::logic_error(message);
    case Thrown::kRuntimeError:
      throw std::runtime_error(message);
    case Thrown::kRangeError:
      throw std::range_error(message);
    case Thrown::kOverflowError:
      throw std::overflow_error(message);
    case Thrown::kException:
      throw PlainException(message);
  }
  throw std::logic_error("throw_exception: unhandled kind '" + kind + "'");
}

py::array_t<std::int64_t> binomial_draws(std::int64_t n, double p, std::int64_t count,
                                         std::uint64_t seed) {
  py::array_t<std::int64_t> out(count);
  auto* o = out.mutable_data();
  py::gil_scoped_release release;
  tb::rng::Stream s(seed, 0, 0, tb::rng::Domain::kCountResample);
  for (std::int64_t i = 0; i < count; ++i) o[i] = tb::stats::binomial(n, p, s);
  return out;
}

py::array_t<std::int64_t> poisson1_from_u32(Array<std::uint32_t> x) {
  py::array_t<std::int64_t> out(x.size());
  for (py::ssize_t i = 0; i < x.size(); ++i) {
    out.mutable_data()[i] = tb::stats::poisson1_from_u32(x.data()[i]);
  }
  return out;
}

}  // namespace

void bind_testing(py::module_& m) {
  m.def(
      "set_scalar_only",
      [](bool on) {
        const bool was = tb::rng::scalar_only();
        tb::rng::scalar_only_flag().store(on);
        return was;
      },
      py::arg("on"),
      "Run the scalar random-number paths even where AVX2 ones exist; returns the old setting.");
  m.def("throw_exception", &throw_exception, py::arg("kind"), py::arg("message"),
        "Throws the C++ exception named by kind ('invalid_argument', 'bad_alloc', ...) with "
        "message, to test the exception map.");
  m.def(
      "philox4x32",
      [](std::array<std::uint32_t, 4> counter, std::array<std::uint32_t, 2> key) {
        return tb::rng::Philox4x32::block(counter, key);
      },
      py::arg("counter"), py::arg("key"), "One Philox4x32-10 block (for known-answer tests).");
  m.def("binomial_draws", &binomial_draws, py::arg("n"), py::arg("p"), py::arg("count"),
        py::arg("seed"),
        "Binomial(n, p) variates from the engine's sampler (for distribution tests).");
  m.def("poisson1_from_u32", &poisson1_from_u32, py::arg("x"),
        "Poisson(1) weights by inversion of uniform 32-bit words.");
  m.def(
      "percentile_pair",
      [](std::vector<double> values, double q_low, double q_high) {
        double low = 0, high = 0;
        tb::stats::percentile_pair(values, q_low, q_high, &low, &high);
        return std::make_pair(low, high);
      },
      py::arg("values"), py::arg("q_low"), py::arg("q_high"),
      "The engine's two linear percentiles (q in percent) of the values, as the intervals "
      "select them (for comparison with numpy.percentile).");
}

}  // namespace tb::bindings
