// _core.stats: the bootstrap engine (multinomial and Poisson), registered statistics and the
// stable hashes behind resampling keys (csrc/stats/, csrc/common/rng.hpp).
#include <cmath>
#include <cstdint>
#include <limits>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "bindings/common.hpp"
#include "common/parallel.hpp"
#include "common/rng.hpp"
#include "stats/bootstrap.hpp"
#include "stats/factorize.hpp"
#include "stats/pairs.hpp"
#include "stats/poisson.hpp"
#include "stats/signflip.hpp"
#include "stats/statistic.hpp"
#include "stats/units.hpp"

namespace tb::bindings {

namespace {

using namespace tb::stats;
using OptI64 = std::optional<Array<std::int64_t>>;

constexpr Choice<Method> kMethods[] = {
    {"percentile", Method::kPercentile}, {"basic", Method::kBasic}, {"bca", Method::kBca}};

constexpr Choice<Resampler> kResamplers[] = {
    {"auto", Resampler::kAuto}, {"index", Resampler::kIndex}, {"counts", Resampler::kCounts}};

Method parse_method(const std::string& method) { return parse_choice("method", method, kMethods); }

std::unique_ptr<Statistic> build_statistic(const std::string& name, std::size_t k,
                                           const std::vector<double>& params,
                                           std::size_t paired_split) {
  if (paired_split == 0) return make_statistic(name, k, params);
  if (2 * paired_split != k) throw std::invalid_argument("paired values must hold two halves");
  return make_paired_difference(make_statistic(name, paired_split, params),
                                make_statistic(name, paired_split, params));
}

struct Records {
  Array<double> values;
  OptI64 group, stratum, cluster;
  RecordInput in;
};

Records make_records(Array<double> values, OptI64 group, std::size_t n_groups, OptI64 stratum,
                     std::size_t n_strata, OptI64 cluster, std::size_t n_clusters) {
  if (values.ndim() != 2) throw std::invalid_argument("values must be 2-D (n, k)");
  Records r{values, group, stratum, cluster, {}};
  r.in.values = r.values.data();
  r.in.n = static_cast<std::size_t>(values.shape(0));
  r.in.k = static_cast<std::size_t>(values.shape(1));
  auto check = [&](const OptI64& codes, std::size_t range, const char* name) -> const std::int64_t* {
    if (!codes) return nullptr;
    if (static_cast<std::size_t>(codes->size()) != r.in.n) {
      throw std::invalid_argument(std::string(name) + " codes must have one entry per record");
    }
    const std::int64_t* p = codes->data();
    for (std::size_t i = 0; i < r.in.n; ++i) {
      if (p[i] < 0 || static_cast<std::size_t>(p[i]) >= range) {
        throw std::invalid_argument(std::string(name) + " code out of range");
      }
    }
    return p;
  };
  r.in.group = check(r.group, n_groups, "group");
  r.in.n_groups = r.in.group ? n_groups : 1;
  r.in.stratum = check(r.stratum, n_strata, "stratum");
  r.in.n_strata = n_strata;
  r.in.cluster = check(r.cluster, n_clusters, "cluster");
  r.in.n_clusters = n_clusters;
  return r;
}

std::vector<std::size_t> units_per_group(const Units& u) {
  std::vector<std::size_t> m(u.n_groups());
  for (std::size_t g = 0; g < u.n_groups(); ++g) m[g] = u.group_end(g) - u.group_begin(g);
  return m;
}

py::dict result_dict(py::object n, py::object n_units, const Distribution& d, const Summary& s,
                     bool return_distribution) {
  py::dict out;
  out["n"] = n;
  out["n_units"] = n_units;
  out["estimate"] = to_numpy(d.estimate);
  out["boot_mean"] = to_numpy(s.boot_mean);
  out["se"] = to_numpy(s.se);
  out["ci_low"] = to_numpy(s.ci_low);
  out["ci_high"] = to_numpy(s.ci_high);
  out["degenerate"] = to_numpy(s.degenerate);
  out["n_valid"] = to_numpy(s.n_valid);
  out["used_counts"] = to_numpy(d.used_counts);
  out["acceleration"] = to_numpy(d.acceleration);
  if (return_distribution) {
    auto arr = to_numpy(d.theta);
    out["distribution"] = arr.reshape({static_cast<py::ssize_t>(d.n_groups),
                                       static_cast<py::ssize_t>(d.n_resamples)});
  }
  return out;
}

py::dict result_dict(const Units& u, const Distribution& d, const Summary& s,
                     bool return_distribution) {
  std::vector<std::int64_t> m;
  for (auto x : units_per_group(u)) m.push_back(static_cast<std::int64_t>(x));
  return result_dict(to_numpy(u.group_items), to_numpy(m), d, s, return_distribution);
}

py::dict bootstrap_multinomial(Array<double> values, OptI64 group, std::size_t n_groups,
                               OptI64 stratum, std::size_t n_strata, OptI64 cluster,
                               std::size_t n_clusters, Array<std::uint64_t> group_keys,
                               const std::string& statistic, const std::vector<double>& params,
                               std::size_t paired_split, std::int64_t n_resamples,
                               std::uint64_t seed, int threads, const std::string& resampler,
                               const std::string& method, double level,
                               bool return_distribution) {
  Records rec = make_records(values, group, n_groups, stratum, n_strata, cluster, n_clusters);
  auto stat = build_statistic(statistic, rec.in.k, params, paired_split);
  const Method m = parse_method(method);
  EngineOptions opt;
  opt.n_resamples = n_resamples;
  opt.seed = seed;
  opt.threads = threads;
  opt.resampler = parse_choice("resampler", resampler, kResamplers);
  std::vector<std::uint64_t> keys(group_keys.data(), group_keys.data() + group_keys.size());
  Units u;
  Distribution d;
  Summary s;
  run_interruptible([&] {
    u = build_units(rec.in);
    d = multinomial_bootstrap(u, *stat, keys, opt, m == Method::kBca);
    s = summarize(d, units_per_group(u), m, level, threads);
  });
  return result_dict(u, d, s, return_distribution);
}

py::dict bootstrap_from_counts(Array<double> values, Array<double> counts,
                               const std::string& statistic, const std::vector<double>& params,
                               const std::string& method, double level, bool return_distribution) {
  Records rec = make_records(values, std::nullopt, 1, std::nullopt, 1, std::nullopt, 1);
  auto stat = build_statistic(statistic, rec.in.k, params, 0);
  if (counts.ndim() != 2 || static_cast<std::size_t>(counts.shape(1)) != rec.in.n) {
    throw std::invalid_argument("counts must be (n_resamples, n)");
  }
  const Method m = parse_method(method);
  Units u;
  Distribution d;
  Summary s;
  run_interruptible([&] {
    u = build_units(rec.in);
    d = distribution_from_counts(u, *stat, counts.data(), static_cast<std::size_t>(counts.shape(0)),
                                 m == Method::kBca);
    s = summarize(d, units_per_group(u), m, level, 1);
  });
  return result_dict(u, d, s, return_distribution);
}

// Splits 128-bit sums into (hi, lo) words for numpy.
py::tuple split128(const std::vector<int128>& v, const std::vector<py::ssize_t>& shape) {
  py::array_t<std::int64_t> hi(shape);
  py::array_t<std::uint64_t> lo(shape);
  auto* h = hi.mutable_data();
  auto* l = lo.mutable_data();
  for (std::size_t i = 0; i < v.size(); ++i) {
    h[i] = static_cast<std::int64_t>(v[i] >> 64);
    l[i] = static_cast<std::uint64_t>(v[i]);
  }
  return py::make_tuple(hi, lo);
}

std::vector<int128> join128(const Array<std::int64_t>& hi, const Array<std::uint64_t>& lo) {
  if (hi.size() != lo.size()) throw std::invalid_argument("hi/lo size mismatch");
  std::vector<int128> v(static_cast<std::size_t>(hi.size()));
  for (std::size_t i = 0; i < v.size(); ++i) {
    v[i] = (static_cast<int128>(hi.data()[i]) << 64) | static_cast<int128>(lo.data()[i]);
  }
  return v;
}

py::dict poisson_partials(Array<double> values, OptI64 group, std::size_t n_groups,
                          OptI64 cluster, std::size_t n_clusters, Array<std::uint64_t> record_keys,
                          std::optional<Array<std::uint64_t>> cluster_keys,
                          const std::string& statistic, const std::vector<double>& params,
                          std::size_t paired_split, std::int64_t n_resamples, std::uint64_t seed,
                          int threads, bool with_acceleration) {
  Records rec = make_records(values, group, n_groups, std::nullopt, 1, cluster, n_clusters);
  auto stat = build_statistic(statistic, rec.in.k, params, paired_split);
  if (static_cast<std::size_t>(record_keys.size()) != rec.in.n) {
    throw std::invalid_argument("keys must have one entry per record");
  }
  if (cluster && (!cluster_keys || static_cast<std::size_t>(cluster_keys->size()) != n_clusters)) {
    throw std::invalid_argument("cluster_keys must have one entry per cluster code");
  }
  Units u;
  PoissonSums ps;
  std::vector<double> accel;
  run_interruptible([&] {
    u = build_units(rec.in);
    std::vector<std::uint64_t> unit_keys(u.n_units());
    for (std::size_t i = 0; i < u.n_units(); ++i) {
      unit_keys[i] = cluster ? cluster_keys->data()[u.cluster[i]] : record_keys.data()[u.record[i]];
    }
    const auto scale = exact_scales(rec.in.values, rec.in.n, rec.in.k);
    const auto fixed = fixed_unit_rows(u, rec.in.values, scale);
    ps = poisson_sums(u, fixed, scale, unit_keys.data(), seed, n_resamples, threads);
    accel.assign(u.n_groups(), std::numeric_limits<double>::quiet_NaN());
    if (with_acceleration) {
      for (std::size_t g = 0; g < u.n_groups(); ++g) {
        accel[g] = poisson_acceleration(*stat, ps, g, fixed, u);
      }
    }
  });
  const std::vector<py::ssize_t> shape = {static_cast<py::ssize_t>(ps.n_groups),
                                          static_cast<py::ssize_t>(ps.n_resamples + 1),
                                          static_cast<py::ssize_t>(ps.k)};
  py::dict out;
  py::tuple hl = split128(ps.sums, shape);
  out["hi"] = hl[0];
  out["lo"] = hl[1];
  out["weight"] = to_numpy(ps.weight).reshape({shape[0], shape[1]});
  out["scale"] = to_numpy(std::vector<std::int64_t>(ps.scale.begin(), ps.scale.end()));
  out["n"] = to_numpy(u.group_items);
  std::vector<std::int64_t> m;
  for (auto x : units_per_group(u)) m.push_back(static_cast<std::int64_t>(x));
  out["n_units"] = to_numpy(m);
  out["acceleration"] = to_numpy(accel);
  return out;
}

py::dict poisson_finalize(Array<std::int64_t> hi, Array<std::uint64_t> lo,
                          Array<std::int64_t> weight, Array<std::int64_t> scale,
                          Array<std::int64_t> n_items, Array<std::int64_t> n_units,
                          Array<double> acceleration, const std::string& statistic,
                          const std::vector<double>& params, std::size_t paired_split,
                          const std::string& method, double level, int threads,
                          bool return_distribution) {
  if (hi.ndim() != 3) throw std::invalid_argument("hi must be (groups, resamples + 1, k)");
  PoissonSums ps;
  ps.n_groups = static_cast<std::size_t>(hi.shape(0));
  ps.n_resamples = static_cast<std::size_t>(hi.shape(1)) - 1;
  ps.k = static_cast<std::size_t>(hi.shape(2));
  ps.sums = join128(hi, lo);
  ps.weight.assign(weight.data(), weight.data() + weight.size());
  ps.scale.assign(scale.data(), scale.data() + scale.size());
  if (ps.weight.size() != ps.n_groups * (ps.n_resamples + 1) || ps.scale.size() != ps.k) {
    throw std::invalid_argument("inconsistent Poisson partial shapes");
  }
  auto stat = build_statistic(statistic, ps.k, params, paired_split);
  const Method m = parse_method(method);
  std::vector<std::size_t> mg(n_units.data(), n_units.data() + n_units.size());
  Distribution d;
  Summary s;
  run_interruptible([&] {
    d = poisson_distribution(ps, *stat, threads);
    d.acceleration.assign(acceleration.data(), acceleration.data() + acceleration.size());
    s = summarize(d, mg, m, level, threads);
  });
  return result_dict(n_items, n_units, d, s, return_distribution);
}

template <typename T>
py::array_t<T> weight_matrix(const std::uint64_t* keys, std::size_t n, std::int64_t n_resamples,
                             std::uint64_t seed, int threads, std::optional<py::array> reuse) {
  const py::ssize_t rows = static_cast<py::ssize_t>(n_resamples), cols = static_cast<py::ssize_t>(n);
  py::array_t<T> out;
  if (reuse) {
    // A caller's buffer of at least rows x cols: its first rows * cols elements, as a matrix.
    auto buf = py::array_t<T>::ensure(*reuse);
    if (!buf || !(buf.flags() & py::array::c_style) || !buf.writeable() ||
        buf.size() < rows * cols) {
      throw std::invalid_argument(
          "out: expected a writeable C-contiguous array of the weights' dtype with at least "
          "n_resamples * len(keys) elements");
    }
    if (buf.ptr() != reuse->ptr()) {
      throw std::invalid_argument("out: expected an array of the weights' dtype (no conversion)");
    }
    out = py::array_t<T>({rows, cols}, {cols * static_cast<py::ssize_t>(sizeof(T)),
                                        static_cast<py::ssize_t>(sizeof(T))},
                         buf.mutable_data(), buf);
  } else {
    out = py::array_t<T>({rows, cols});
  }
  T* o = out.mutable_data();
  run_interruptible([&] {
    tb::stats::poisson_weight_matrix<T>(keys, n, static_cast<std::size_t>(n_resamples), seed,
                                        threads, o);
  });
  return out;
}

py::array poisson_weights(Array<std::uint64_t> keys, std::int64_t n_resamples,
                          std::uint64_t seed, int threads, bool float64,
                          std::optional<py::array> out) {
  if (keys.ndim() != 1) throw std::invalid_argument("keys: expected a 1-D uint64 array");
  if (n_resamples < 0) throw std::invalid_argument("n_resamples: expected >= 0");
  const auto n = static_cast<std::size_t>(keys.size());
  if (float64) return weight_matrix<double>(keys.data(), n, n_resamples, seed, threads, out);
  return weight_matrix<float>(keys.data(), n, n_resamples, seed, threads, out);
}

template <typename T>
py::array_t<T> weighted_sums(const std::uint64_t* keys, std::size_t n, py::array cols_in,
                             std::int64_t n_resamples, std::uint64_t seed, int threads) {
  auto cols = py::array_t<T, py::array::c_style>::ensure(cols_in);
  if (!cols || cols.ndim() != 2 || static_cast<std::size_t>(cols.shape(0)) != n) {
    throw std::invalid_argument("cols: expected a 2-D array with one row per key");
  }
  const auto c = static_cast<std::size_t>(cols.shape(1));
  py::array_t<T> out({static_cast<py::ssize_t>(n_resamples), static_cast<py::ssize_t>(c)});
  const T* src = cols.data();
  T* o = out.mutable_data();
  run_interruptible([&] {
    tb::stats::poisson_weighted_sums<T>(keys, n, src, c, static_cast<std::size_t>(n_resamples),
                                        seed, threads, o);
  });
  return out;
}

// W @ cols with W the weights poisson_weights gives (never built): (n_resamples, cols), in the
// dtype of cols (float32 or float64).
py::array poisson_weighted_sums(Array<std::uint64_t> keys, py::array cols,
                                std::int64_t n_resamples, std::uint64_t seed, int threads) {
  if (keys.ndim() != 1) throw std::invalid_argument("keys: expected a 1-D uint64 array");
  if (n_resamples < 0) throw std::invalid_argument("n_resamples: expected >= 0");
  const auto n = static_cast<std::size_t>(keys.size());
  if (cols.dtype().is(py::dtype::of<float>())) {
    return weighted_sums<float>(keys.data(), n, cols, n_resamples, seed, threads);
  }
  if (cols.dtype().is(py::dtype::of<double>())) {
    return weighted_sums<double>(keys.data(), n, cols, n_resamples, seed, threads);
  }
  throw std::invalid_argument("cols: expected a float32 or float64 array");
}

// numpy.quantile(values, [q_low, q_high], axis=1) of a C-contiguous 2-D float64 array, one
// row per task on up to `threads` threads: (low, high), NaN for a row holding a NaN (numpy's
// result there) and for rows of no values (where numpy raises an IndexError).
py::tuple row_quantile_pair(Array<double> values, double q_low, double q_high, int threads) {
  if (values.ndim() != 2) throw std::invalid_argument("values: expected a 2-D array");
  if (!(0.0 <= q_low && q_low <= q_high && q_high <= 1.0)) {
    throw std::invalid_argument("q_low, q_high: expected 0 <= q_low <= q_high <= 1");
  }
  const auto rows = static_cast<std::size_t>(values.shape(0));
  const auto cols = static_cast<std::size_t>(values.shape(1));
  py::array_t<double> low(static_cast<py::ssize_t>(rows)), high(static_cast<py::ssize_t>(rows));
  const double* v = values.data();
  double* lo = low.mutable_data();
  double* hi = high.mutable_data();
  run_interruptible([&] {
    tb::parallel_for(rows, threads, [&](std::size_t r) {
      std::vector<double> row(v + r * cols, v + (r + 1) * cols);
      if (row.empty()) {
        lo[r] = hi[r] = std::numeric_limits<double>::quiet_NaN();
        return;
      }
      for (const double x : row) {
        if (std::isnan(x)) {
          lo[r] = hi[r] = std::numeric_limits<double>::quiet_NaN();
          return;
        }
      }
      tb::stats::quantile_pair(row, q_low, q_high, &lo[r], &hi[r]);
    });
  });
  return py::make_tuple(low, high);
}

py::array_t<std::uint64_t> hash_strings(Array<std::int64_t> offsets, Array<std::uint8_t> data) {
  const auto count = static_cast<std::size_t>(offsets.size());
  const std::size_t n = count > 0 ? count - 1 : 0;
  const std::int64_t* off = offsets.data();
  const char* bytes = reinterpret_cast<const char*>(data.data());
  check_offsets(off, count, static_cast<std::int64_t>(data.size()), "offsets",
                OffsetSpan::kWithin);
  py::array_t<std::uint64_t> out(static_cast<py::ssize_t>(n));
  auto* o = out.mutable_data();
  run_interruptible([&] {
    for (std::size_t i = 0; i < n; ++i) {
      o[i] = tb::rng::stable_hash(bytes + off[i], static_cast<std::size_t>(off[i + 1] - off[i]));
    }
  });
  return out;
}

py::tuple factorize_fixed_bytes(Array<std::uint8_t> data, std::int64_t width) {
  if (width <= 0) throw std::invalid_argument("width: expected a positive record width in bytes");
  const auto total = static_cast<std::size_t>(data.size());
  const auto w = static_cast<std::size_t>(width);
  if (total % w != 0) {
    throw std::invalid_argument("data: expected a whole number of records of width bytes");
  }
  const std::size_t n = total / w;
  py::array_t<std::int64_t> codes(static_cast<py::ssize_t>(n));
  auto* c = codes.mutable_data();
  const auto* bytes = data.data();
  const auto first = run_interruptible([&] { return factorize_fixed(bytes, n, w, c); });
  return py::make_tuple(codes, to_numpy(first));
}

py::tuple factorize_string_offsets(Array<std::int64_t> offsets, Array<std::uint8_t> data,
                                   bool sort) {
  const auto count = static_cast<std::size_t>(offsets.size());
  const std::size_t n = count > 0 ? count - 1 : 0;
  const std::int64_t* off = offsets.data();
  check_offsets(off, count, static_cast<std::int64_t>(data.size()), "offsets",
                OffsetSpan::kWithin);
  py::array_t<std::int64_t> codes(static_cast<py::ssize_t>(n));
  auto* c = codes.mutable_data();
  const auto* bytes = data.data();
  const auto first = run_interruptible([&] { return factorize_offsets(bytes, off, n, c, sort); });
  return py::make_tuple(codes, to_numpy(first));
}

py::tuple factorize_string_views(const py::list& chunks, bool sort) {
  std::vector<Array<std::uint8_t>> held;  // keeps every view and data buffer alive
  std::vector<ViewChunk> parts;
  std::size_t n = 0;
  for (const auto& item : chunks) {
    const auto pair = py::cast<py::tuple>(item);
    if (pair.size() != 2) {
      throw std::invalid_argument("chunks: expected (views, buffers) pairs");
    }
    held.push_back(py::cast<Array<std::uint8_t>>(pair[0]));
    const auto total = static_cast<std::size_t>(held.back().size());
    if (total % 16 != 0) throw std::invalid_argument("views: expected 16 bytes per string");
    ViewChunk chunk{held.back().data(), total / 16, {}};
    std::vector<std::int64_t> sizes;
    for (const auto& b : py::cast<py::list>(pair[1])) {
      held.push_back(py::cast<Array<std::uint8_t>>(b));
      chunk.buffers.push_back(held.back().data());
      sizes.push_back(static_cast<std::int64_t>(held.back().size()));
    }
    check_views(chunk.views, chunk.n, sizes);
    n += chunk.n;
    parts.push_back(std::move(chunk));
  }
  py::array_t<std::int64_t> codes(static_cast<py::ssize_t>(n));
  auto* c = codes.mutable_data();
  const auto first = run_interruptible([&] { return factorize_views(parts, sort, c); });
  return py::make_tuple(codes, to_numpy(first));
}

// stats.compare's pairs of one family (stats/pairs.hpp): dist is models x resamples, pair p is
// model a[p] minus model b[p] with difference of estimates d[p].
py::dict pair_summaries(Array<double> dist, Array<std::int64_t> a, Array<std::int64_t> b,
                        Array<double> d, double q_low, double q_high, int threads) {
  if (dist.ndim() != 2) throw std::invalid_argument("dist: expected a 2-D array");
  if (a.ndim() != 1 || b.size() != a.size() || d.size() != a.size()) {
    throw std::invalid_argument("a, b, d: expected 1-D arrays of one length");
  }
  const auto n_models = static_cast<std::size_t>(dist.shape(0));
  const auto n_resamples = static_cast<std::size_t>(dist.shape(1));
  const auto n_pairs = static_cast<std::size_t>(a.size());
  tb::stats::PairSummaries s = run_interruptible([&] {
    return tb::stats::pair_summaries(dist.data(), n_models, n_resamples, a.data(), b.data(),
                                     d.data(), n_pairs, q_low, q_high, threads);
  });
  py::dict out;
  out["low"] = to_numpy(s.low);
  out["high"] = to_numpy(s.high);
  out["se"] = to_numpy(s.se);
  out["extreme"] = to_numpy(s.extreme);
  out["max_ratio"] = to_numpy(s.max_ratio);
  out["any_live"] = s.any_live;
  return out;
}

// stats.compare's (model, key) table: (table, no_repeat, binary).
py::tuple value_table(Array<std::int64_t> model, Array<std::int64_t> key, Array<double> v,
                      std::int64_t n_models, std::int64_t n_keys) {
  if (model.ndim() != 1 || key.size() != model.size() || v.size() != model.size()) {
    throw std::invalid_argument("model, key, v: expected 1-D arrays of one length");
  }
  if (n_models < 0 || n_keys < 0) throw std::invalid_argument("n_models, n_keys: expected >= 0");
  py::array_t<double> table({static_cast<py::ssize_t>(n_models), static_cast<py::ssize_t>(n_keys)});
  double* t = table.mutable_data();
  bool binary = true;
  const bool ok = run_interruptible([&] {
    return tb::stats::value_table(model.data(), key.data(), v.data(),
                                  static_cast<std::size_t>(model.size()),
                                  static_cast<std::size_t>(n_models),
                                  static_cast<std::size_t>(n_keys), t, &binary);
  });
  return py::make_tuple(table, ok, binary);
}

// Each key's cluster (that of its first row) and the first row that names another (-1: none).
py::tuple key_clusters(Array<std::int64_t> key, Array<std::int64_t> cluster, std::int64_t n_keys) {
  if (key.ndim() != 1 || cluster.size() != key.size()) {
    throw std::invalid_argument("key, cluster: expected 1-D arrays of one length");
  }
  if (n_keys < 0) throw std::invalid_argument("n_keys: expected >= 0");
  py::array_t<std::int64_t> of_key(static_cast<py::ssize_t>(n_keys));
  std::int64_t* o = of_key.mutable_data();
  const std::int64_t bad = run_interruptible([&] {
    return tb::stats::key_clusters(key.data(), cluster.data(), static_cast<std::size_t>(key.size()),
                                   static_cast<std::size_t>(n_keys), o);
  });
  return py::make_tuple(of_key, bad);
}

// The m x m counts of columns where both rows of a 2-D array are nonzero.
py::array_t<std::int64_t> nonzero_overlaps(Array<double> x, int threads) {
  if (x.ndim() != 2) throw std::invalid_argument("x: expected a 2-D array");
  const auto m = static_cast<std::size_t>(x.shape(0)), n = static_cast<std::size_t>(x.shape(1));
  std::vector<std::int64_t> both = run_interruptible(
      [&] { return tb::stats::nonzero_overlaps(x.data(), m, n, threads); });
  py::array_t<std::int64_t> out({static_cast<py::ssize_t>(m), static_cast<py::ssize_t>(m)});
  std::copy(both.begin(), both.end(), out.mutable_data());
  return out;
}

// stats.sign_flip_test's Monte Carlo count (stats/signflip.hpp): the signs of pattern r are the
// top bits of bytes[r * units .. (r + 1) * units).
std::int64_t sign_flip_hits(Array<double> sums, Array<std::uint8_t> bytes, std::int64_t n_patterns,
                            double threshold, int threads) {
  if (sums.ndim() != 1 || bytes.ndim() != 1) {
    throw std::invalid_argument("sums, bytes: expected 1-D arrays");
  }
  const auto units = static_cast<std::size_t>(sums.size());
  if (n_patterns < 0 ||
      static_cast<std::size_t>(bytes.size()) < static_cast<std::size_t>(n_patterns) * units) {
    throw std::invalid_argument("bytes: expected at least n_patterns * units sign bytes");
  }
  return run_interruptible([&] {
    return tb::stats::sign_flip_hits(sums.data(), units, bytes.data(),
                                     static_cast<std::size_t>(n_patterns), threshold, threads);
  });
}

// numpy's PCG64 state as four 64-bit words: state (high, low), increment (high, low).
tb::stats::Pcg64 pcg64_from_words(const std::vector<std::uint64_t>& w) {
  if (w.size() != 4) throw std::invalid_argument("state: expected four 64-bit words");
  using u128 = unsigned __int128;
  return {(static_cast<u128>(w[0]) << 64) | w[1], (static_cast<u128>(w[2]) << 64) | w[3]};
}

std::int64_t sign_flip_hits_pcg64(Array<double> sums, const std::vector<std::uint64_t>& state,
                                  std::int64_t n_patterns, std::int64_t chunk, double threshold,
                                  int threads) {
  if (sums.ndim() != 1) throw std::invalid_argument("sums: expected a 1-D array");
  if (n_patterns < 0 || chunk < 1) {
    throw std::invalid_argument("n_patterns, chunk: expected >= 0 and >= 1");
  }
  const tb::stats::Pcg64 start = pcg64_from_words(state);
  return run_interruptible([&] {
    return tb::stats::sign_flip_hits_pcg64(sums.data(), static_cast<std::size_t>(sums.size()),
                                           start, static_cast<std::size_t>(n_patterns),
                                           static_cast<std::size_t>(chunk), threshold, threads);
  });
}

// The distinct values of an int64 array, increasing, where their range is compact; None where it
// is not.
py::object compact_distinct(py::array_t<std::int64_t, py::array::c_style> x, int threads) {
  std::vector<std::int64_t> out;
  const bool ok = run_interruptible([&] {
    return tb::stats::compact_distinct(x.data(), static_cast<std::size_t>(x.size()), threads, out);
  });
  if (!ok) return py::none();
  return to_numpy(out);
}

// codes[r] = rank[k] where values[k] == x[r] (values: compact_distinct's of x).
py::array_t<std::int64_t> compact_codes(py::array_t<std::int64_t, py::array::c_style> x,
                                        Array<std::int64_t> values, Array<std::int64_t> rank,
                                        int threads) {
  const auto m = static_cast<std::size_t>(values.size());
  if (rank.size() != values.size()) throw std::invalid_argument("rank: one per value");
  for (std::size_t k = 1; k < m; ++k) {
    if (values.data()[k] <= values.data()[k - 1]) {
      throw std::invalid_argument("values: expected increasing values");
    }
  }
  py::array_t<std::int64_t> codes(static_cast<py::ssize_t>(x.size()));
  if (x.size() && !m) throw std::invalid_argument("values: expected the values of x");
  std::int64_t* c = codes.mutable_data();
  run_interruptible([&] {
    tb::stats::compact_codes(x.data(), static_cast<std::size_t>(x.size()), values.data(),
                             rank.data(), m, threads, c);
  });
  return codes;
}

// sign_flip_hits_pcg64 of every row of sums (sets x units) against its threshold.
py::array_t<std::int64_t> sign_flip_hits_pcg64_many(Array<double> sums, Array<double> thresholds,
                                                    const std::vector<std::uint64_t>& state,
                                                    std::int64_t n_patterns, std::int64_t chunk,
                                                    int threads) {
  if (sums.ndim() != 2 || thresholds.ndim() != 1 || thresholds.size() != sums.shape(0)) {
    throw std::invalid_argument("sums, thresholds: expected (sets, units) and (sets,) arrays");
  }
  if (n_patterns < 0 || chunk < 1) {
    throw std::invalid_argument("n_patterns, chunk: expected n_patterns >= 0 and chunk >= 1");
  }
  const tb::stats::Pcg64 start = pcg64_from_words(state);
  const auto sets = static_cast<std::size_t>(sums.shape(0));
  const auto units = static_cast<std::size_t>(sums.shape(1));
  const std::vector<std::int64_t> hits = run_interruptible([&] {
    return tb::stats::sign_flip_hits_pcg64_many(sums.data(), sets, units, thresholds.data(),
                                                start, static_cast<std::size_t>(n_patterns),
                                                static_cast<std::size_t>(chunk), threads);
  });
  return to_numpy(hits);
}

// The first row of each code 0..n_codes-1 among `codes` (-1 for a code that does not occur).
py::array_t<std::int64_t> first_rows(Array<std::int64_t> codes, std::int64_t n_codes) {
  if (n_codes < 0) throw std::invalid_argument("n_codes: expected >= 0");
  py::array_t<std::int64_t> out(static_cast<py::ssize_t>(n_codes));
  auto* o = out.mutable_data();
  std::fill(o, o + n_codes, std::int64_t{-1});
  const auto* c = codes.data();
  const auto n = static_cast<std::int64_t>(codes.size());
  std::int64_t missing = n_codes;
  for (std::int64_t r = 0; r < n && missing > 0; ++r) {
    const std::int64_t k = c[r];
    if (k < 0 || k >= n_codes) {
      throw std::invalid_argument("codes: expected values in [0, n_codes)");
    }
    if (o[k] < 0) {
      o[k] = r;
      --missing;
    }
  }
  return out;
}

py::array_t<std::uint64_t> mix64_array(Array<std::uint64_t> x) {
  py::array_t<std::uint64_t> out(x.size());
  for (py::ssize_t i = 0; i < x.size(); ++i) out.mutable_data()[i] = tb::rng::mix64(x.data()[i]);
  return out;
}

}  // namespace

void bind_stats(py::module_& m) {
  m.def("bootstrap_multinomial", &bootstrap_multinomial, py::arg("values"), py::arg("group"),
        py::arg("n_groups"), py::arg("stratum"), py::arg("n_strata"), py::arg("cluster"),
        py::arg("n_clusters"), py::arg("group_keys"), py::arg("statistic"), py::arg("params"),
        py::arg("paired_split"), py::arg("n_resamples"), py::arg("seed"), py::arg("threads"),
        py::arg("resampler"), py::arg("method"), py::arg("level"),
        py::arg("return_distribution"));
  m.def("bootstrap_from_counts", &bootstrap_from_counts, py::arg("values"), py::arg("counts"),
        py::arg("statistic"), py::arg("params"), py::arg("method"), py::arg("level"),
        py::arg("return_distribution"));
  m.def("poisson_partials", &poisson_partials, py::arg("values"), py::arg("group"),
        py::arg("n_groups"), py::arg("cluster"), py::arg("n_clusters"), py::arg("record_keys"),
        py::arg("cluster_keys"), py::arg("statistic"), py::arg("params"),
        py::arg("paired_split"), py::arg("n_resamples"), py::arg("seed"), py::arg("threads"),
        py::arg("with_acceleration"));
  m.def("poisson_finalize", &poisson_finalize, py::arg("hi"), py::arg("lo"), py::arg("weight"),
        py::arg("scale"), py::arg("n"), py::arg("n_units"), py::arg("acceleration"),
        py::arg("statistic"), py::arg("params"), py::arg("paired_split"), py::arg("method"),
        py::arg("level"), py::arg("threads"), py::arg("return_distribution"));
  m.def(
      "evaluate_statistic",
      [](const std::string& name, const std::vector<double>& params, Array<double> sums,
         double weight) {
        auto stat = make_statistic(name, static_cast<std::size_t>(sums.size()), params);
        return stat->evaluate(sums.data(), weight);
      },
      py::arg("name"), py::arg("params"), py::arg("sums"), py::arg("weight"),
      "Evaluates a registered statistic on column sums and a total item weight.");
  m.def("poisson_weights", &poisson_weights, py::arg("keys"), py::arg("n_resamples"),
        py::arg("seed"), py::arg("threads"), py::arg("float64"), py::arg("out") = py::none(),
        "The Poisson(1) weight of each key in each resample, (n_resamples, keys): the weights "
        "poisson_partials draws for units with these keys. With out (a C-contiguous buffer of "
        "the dtype, at least that many elements) they are written into its front, as a view.");
  m.def("poisson_weighted_sums", &poisson_weighted_sums, py::arg("keys"), py::arg("cols"),
        py::arg("n_resamples"), py::arg("seed"), py::arg("threads") = 0,
        "poisson_weights(keys, ...) @ cols, (n_resamples, cols) in the dtype of cols (float32 "
        "or float64), the weights drawn tile by tile and never stored: the same values as the "
        "product where every partial sum of a column is an exact integer of the dtype.");
  m.def("row_quantile_pair", &row_quantile_pair, py::arg("values"), py::arg("q_low"),
        py::arg("q_high"), py::arg("threads") = 0,
        "numpy.quantile(values, [q_low, q_high], axis=1) of a 2-D float64 array (linear "
        "method, bit for bit): (low, high), one per row.");
  m.def("pair_summaries", &pair_summaries, py::arg("dist"), py::arg("a"), py::arg("b"),
        py::arg("d"), py::arg("q_low"), py::arg("q_high"), py::arg("threads") = 0,
        "Every pair's resampled differences dist[a] - dist[b] summarised without building "
        "them: low, high (numpy.quantile, linear), se (numpy.std ddof=1, bit for bit), extreme "
        "(#|d* - d| >= |d|), max_ratio (per resample, the max over pairs with se > 0 of "
        "|d* - d| / se) and any_live.");
  m.def("value_table", &value_table, py::arg("model"), py::arg("key"), py::arg("v"),
        py::arg("n_models"), py::arg("n_keys"),
        "(table, no_repeat, binary): table[model, key] = v (NaN elsewhere; v free of NaN), "
        "whether no (model, key) pair repeats, and whether every v is 0 or 1.");
  m.def("key_clusters", &key_clusters, py::arg("key"), py::arg("cluster"), py::arg("n_keys"),
        "(cluster_of_key, bad): each key's cluster, that of its first row, and the first row "
        "whose cluster differs from its key's (-1: none).");
  m.def("nonzero_overlaps", &nonzero_overlaps, py::arg("x"), py::arg("threads") = 0,
        "(m, m) int64: for rows i and j of a 2-D array, the number of columns where both are "
        "nonzero (x != 0 as bit sets, x @ x.T of 0/1 rows without a BLAS call).");
  m.def("sign_flip_hits", &sign_flip_hits, py::arg("sums"), py::arg("bytes"),
        py::arg("n_patterns"), py::arg("threshold"), py::arg("threads") = 0,
        "How many sign patterns give |sum of +-sums| >= threshold; pattern r keeps a unit's "
        "sign where the top bit of bytes[r * units + unit] is set.");
  m.def("sign_flip_hits_pcg64", &sign_flip_hits_pcg64, py::arg("sums"), py::arg("state"),
        py::arg("n_patterns"), py::arg("chunk"), py::arg("threshold"), py::arg("threads") = 0,
        "sign_flip_hits of the patterns numpy's Generator.integers(0, 2, size=(m, units), "
        "dtype=np.int8) draws in chunks of m = chunk patterns from a fresh PCG64 of this state "
        "(state high, low, increment high, low), generated in the core.");
  m.def(
      "pcg64_outputs",
      [](const std::vector<std::uint64_t>& state, std::uint64_t skip, std::size_t n) {
        tb::stats::Pcg64 gen = pcg64_from_words(state);
        gen.advance(skip);
        std::vector<std::uint64_t> out(n);
        for (auto& v : out) v = gen.next();
        return to_numpy(out);
      },
      py::arg("state"), py::arg("skip"), py::arg("n"),
      "Outputs skip .. skip + n - 1 of a PCG64 of this state (for tests against numpy).");
  m.def("statistic_names", &statistic_names);
  m.def("hash_strings", &hash_strings, py::arg("offsets"), py::arg("data"),
        "Stable 64-bit hash of each string of an Arrow-style (offsets, bytes) array.");
  m.def("factorize_fixed", &factorize_fixed_bytes, py::arg("data"), py::arg("width"),
        "Dense codes of the fixed-width records of a byte buffer, in order of first appearance, "
        "and the index of each code's first record: (codes, first).");
  m.def("factorize_strings", &factorize_string_offsets, py::arg("offsets"), py::arg("data"),
        py::arg("sort") = false,
        "Dense codes of the strings of an Arrow-style (offsets, bytes) array, in order of first "
        "appearance (with sort, in byte-wise lexicographic order of the strings), and the index "
        "of each code's first string: (codes, first).");
  m.def("factorize_string_views", &factorize_string_views, py::arg("chunks"),
        py::arg("sort") = false,
        "factorize_strings for the chunks of an Arrow string-view column, coded as one column: "
        "a list of (views, buffers) pairs, the 16-byte views as uint8 and the data buffers as "
        "a list of uint8 arrays; every view is checked against its chunk's buffers.");
  m.def("compact_distinct", &compact_distinct, py::arg("x"), py::arg("threads") = 0,
        "The distinct values of a 1-D int64 array in increasing order, found with a presence "
        "table, where max - min < 4 len(x) + 1024; None where the range is wider.");
  m.def("compact_codes", &compact_codes, py::arg("x"), py::arg("values"), py::arg("rank"),
        py::arg("threads") = 0,
        "codes[r] = rank[k] where values[k] == x[r]; values are compact_distinct(x).");
  m.def("sign_flip_hits_pcg64_many", &sign_flip_hits_pcg64_many, py::arg("sums"),
        py::arg("thresholds"), py::arg("state"), py::arg("n_patterns"), py::arg("chunk"),
        py::arg("threads") = 0,
        "sign_flip_hits_pcg64 of every row of sums (sets x units) on the same patterns, each "
        "against its own threshold: the same counts, the patterns generated once per eight "
        "sets.");
  m.def("first_rows", &first_rows, py::arg("codes"), py::arg("n_codes"),
        "The first row of each code 0..n_codes-1 (-1 where a code does not occur); the scan "
        "stops once every code has been seen.");
  m.def("mix64", &mix64_array, py::arg("x"), "SplitMix64 finalizer of each word.");
}

}  // namespace tb::bindings
