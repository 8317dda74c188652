// The only translation unit that sees pybind11. Validation and shaping of inputs happen in Python
// (python/tumorboard/stats.py); these wrappers check only what memory safety needs, convert arrays,
// and release the GIL around every heavy call.
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <cstdint>
#include <cstring>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "common/rng.hpp"
#include "seqmask/seqmask.hpp"
#include "stats/binomial.hpp"
#include "stats/bootstrap.hpp"
#include "stats/poisson.hpp"
#include "stats/statistic.hpp"
#include "stats/units.hpp"
#include "text/bleu.hpp"
#include "text/bleu_tokenize.hpp"
#include "text/rouge.hpp"
#include "text/rouge_tokenize.hpp"
#include "tiling/grid.hpp"
#include "tiling/resample.hpp"
#include "tiling/tissue.hpp"

namespace py = pybind11;
using namespace tb::stats;

namespace {

template <class T>
using Array = py::array_t<T, py::array::c_style | py::array::forcecast>;
using OptI64 = std::optional<Array<std::int64_t>>;

template <class T>
py::array_t<T> to_numpy(const std::vector<T>& v) {
  py::array_t<T> out(static_cast<py::ssize_t>(v.size()));
  if (!v.empty()) std::memcpy(out.mutable_data(), v.data(), v.size() * sizeof(T));
  return out;
}

Method parse_method(const std::string& m) {
  if (m == "percentile") return Method::kPercentile;
  if (m == "basic") return Method::kBasic;
  if (m == "bca") return Method::kBca;
  throw std::invalid_argument("method must be 'percentile', 'basic' or 'bca', got '" + m + "'");
}

Resampler parse_resampler(const std::string& r) {
  if (r == "auto") return Resampler::kAuto;
  if (r == "index") return Resampler::kIndex;
  if (r == "counts") return Resampler::kCounts;
  throw std::invalid_argument("resampler must be 'auto', 'index' or 'counts', got '" + r + "'");
}

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
  opt.resampler = parse_resampler(resampler);
  std::vector<std::uint64_t> keys(group_keys.data(), group_keys.data() + group_keys.size());
  Units u;
  Distribution d;
  Summary s;
  {
    py::gil_scoped_release release;
    u = build_units(rec.in);
    d = multinomial_bootstrap(u, *stat, keys, opt, m == Method::kBca);
    s = summarize(d, units_per_group(u), m, level, threads);
  }
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
  {
    py::gil_scoped_release release;
    u = build_units(rec.in);
    d = distribution_from_counts(u, *stat, counts.data(), static_cast<std::size_t>(counts.shape(0)),
                                 m == Method::kBca);
    s = summarize(d, units_per_group(u), m, level, 1);
  }
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
  {
    py::gil_scoped_release release;
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
  }
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
  {
    py::gil_scoped_release release;
    d = poisson_distribution(ps, *stat);
    d.acceleration.assign(acceleration.data(), acceleration.data() + acceleration.size());
    s = summarize(d, mg, m, level, threads);
  }
  return result_dict(n_items, n_units, d, s, return_distribution);
}

py::array_t<std::uint64_t> hash_strings(Array<std::int64_t> offsets, py::buffer data) {
  py::buffer_info info = data.request();
  const char* bytes = static_cast<const char*>(info.ptr);
  const std::size_t n = offsets.size() > 0 ? static_cast<std::size_t>(offsets.size()) - 1 : 0;
  const std::int64_t* off = offsets.data();
  const auto total = static_cast<std::int64_t>(info.size * info.itemsize);
  for (std::size_t i = 0; i <= n && n > 0; ++i) {
    if (off[i] < 0 || off[i] > total || (i > 0 && off[i] < off[i - 1])) {
      throw std::invalid_argument("invalid string offsets");
    }
  }
  py::array_t<std::uint64_t> out(static_cast<py::ssize_t>(n));
  auto* o = out.mutable_data();
  {
    py::gil_scoped_release release;
    for (std::size_t i = 0; i < n; ++i) {
      o[i] = tb::rng::stable_hash(bytes + off[i], static_cast<std::size_t>(off[i + 1] - off[i]));
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

PYBIND11_MODULE(_core, m) {
  m.doc() = "tumorboard compiled core (C++17)";
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
  m.def("statistic_names", &statistic_names);
  m.def("hash_strings", &hash_strings, py::arg("offsets"), py::arg("data"),
        "Stable 64-bit hash of each string of an Arrow-style (offsets, bytes) array.");
  m.def("mix64", &mix64_array, py::arg("x"), "SplitMix64 finalizer of each word.");
  m.def(
      "philox4x32",
      [](std::array<std::uint32_t, 4> counter, std::array<std::uint32_t, 2> key) {
        return tb::rng::Philox4x32::block(counter, key);
      },
      py::arg("counter"), py::arg("key"), "One Philox4x32-10 block (for known-answer tests).");
  m.def(
      "binomial_draws",
      [](std::int64_t n, double p, std::int64_t count, std::uint64_t seed) {
        py::array_t<std::int64_t> out(count);
        auto* o = out.mutable_data();
        py::gil_scoped_release release;
        tb::rng::Stream s(seed, 0, 0, tb::rng::Domain::kCountResample);
        for (std::int64_t i = 0; i < count; ++i) o[i] = binomial(n, p, s);
        return out;
      },
      py::arg("n"), py::arg("p"), py::arg("count"), py::arg("seed"),
      "Binomial(n, p) variates from the engine's sampler (for distribution tests).");
  m.def(
      "poisson1_from_u32",
      [](Array<std::uint32_t> x) {
        py::array_t<std::int64_t> out(x.size());
        for (py::ssize_t i = 0; i < x.size(); ++i) {
          out.mutable_data()[i] = poisson1_from_u32(x.data()[i]);
        }
        return out;
      },
      py::arg("x"), "Poisson(1) weights by inversion of uniform 32-bit words.");

  // @@rouge-bindings@@ (text: tokenizers, ROUGE, token/set F1, all-pairs matrices)
  // Strings are read in place as UTF-8 (PyUnicode_AsUTF8AndSize; lone surrogates go through
  // "surrogatepass"), then tokenization and scoring run with the GIL released.
  struct TextIn {
    std::vector<tb::text::Utf8> views;
    std::vector<py::object> keep;  // holds every str (and any re-encoded bytes) alive

    static TextIn read(const py::list& texts, const std::string& name) {
      TextIn in;
      const auto n = static_cast<std::size_t>(PyList_GET_SIZE(texts.ptr()));
      in.views.reserve(n);
      in.keep.reserve(n);
      for (std::size_t i = 0; i < n; ++i) {
        PyObject* o = PyList_GET_ITEM(texts.ptr(), static_cast<Py_ssize_t>(i));
        const bool nan = PyFloat_Check(o) && PyFloat_AS_DOUBLE(o) != PyFloat_AS_DOUBLE(o);
        if (o == Py_None || nan) {
          throw py::value_error(name + "[" + std::to_string(i) + "] is null (" +
                                (nan ? "NaN" : "None") + "); expected a str");
        }
        if (!PyUnicode_Check(o)) {
          throw py::type_error(name + "[" + std::to_string(i) + "]: expected a str, got " +
                               Py_TYPE(o)->tp_name);
        }
        in.keep.push_back(py::reinterpret_borrow<py::object>(o));
        Py_ssize_t size = 0;
        const char* data = PyUnicode_AsUTF8AndSize(o, &size);
        if (data == nullptr) {
          PyErr_Clear();
          PyObject* b = PyUnicode_AsEncodedString(o, "utf-8", "surrogatepass");
          if (b == nullptr) throw py::error_already_set();
          in.keep.push_back(py::reinterpret_steal<py::object>(b));
          data = PyBytes_AS_STRING(b);
          size = PyBytes_GET_SIZE(b);
        }
        in.views.push_back({data, static_cast<std::size_t>(size)});
      }
      return in;
    }

    void append(TextIn&& other) {
      views.insert(views.end(), other.views.begin(), other.views.end());
      for (auto& o : other.keep) keep.push_back(std::move(o));
    }

    static tb::text::TokenizerKind tokenizer(const std::string& s) {
      if (s == "rouge") return tb::text::TokenizerKind::kRouge;
      if (s == "unicode") return tb::text::TokenizerKind::kUnicode;
      if (s == "whitespace") return tb::text::TokenizerKind::kWhitespace;
      throw std::invalid_argument("tokenizer must be 'rouge', 'unicode' or 'whitespace', got '" +
                                  s + "'");
    }

    static tb::text::Stemmer stemmer(const std::string& s) {
      if (s == "none") return tb::text::Stemmer::kNone;
      if (s == "porter") return tb::text::Stemmer::kPorterNltk;
      if (s == "porter-original") return tb::text::Stemmer::kPorterOriginal;
      throw std::invalid_argument("stemmer must be 'none', 'porter' or 'porter-original', got '" +
                                  s + "'");
    }

    static py::tuple prf(std::vector<double>& p, std::vector<double>& r, std::vector<double>& f,
                         std::vector<py::ssize_t> shape) {
      return py::make_tuple(to_numpy(p).reshape(shape), to_numpy(r).reshape(shape),
                            to_numpy(f).reshape(shape));
    }
  };

  m.def(
      "text_check",
      [](const py::list& texts, const std::string& name) { TextIn::read(texts, name); },
      py::arg("texts"), py::arg("name"),
      "Raises the ValueError/TypeError that the text functions raise for a bad element.");
  m.def(
      "text_tokenize",
      [](const py::list& texts, const std::string& name, const std::string& tokenizer,
         const std::string& stemmer, int threads) {
        TextIn in = TextIn::read(texts, name);
        const auto kind = TextIn::tokenizer(tokenizer);
        const auto stem = TextIn::stemmer(stemmer);
        tb::text::TokenizedTexts toks;
        {
          py::gil_scoped_release release;
          toks = tb::text::tokenize_texts(in.views, kind, stem, threads);
        }
        py::list out(in.views.size());
        for (std::size_t i = 0; i < in.views.size(); ++i) {
          py::list row(toks.size(i));
          const tb::text::Token* t = toks.tokens(i);
          for (std::size_t k = 0; k < toks.size(i); ++k) {
            row[k] = py::reinterpret_steal<py::object>(PyUnicode_DecodeUTF8(
                t[k].data, static_cast<Py_ssize_t>(t[k].size), "surrogatepass"));
          }
          out[i] = row;
        }
        return out;
      },
      py::arg("texts"), py::arg("name"), py::arg("tokenizer"), py::arg("stemmer"),
      py::arg("threads"), "Tokens of each text (rouge | unicode | whitespace tokenizer).");
  m.def(
      "text_rouge",
      [](const py::list& hyps, const py::list& refs, const std::string& hyp_name,
         const std::string& ref_name, const std::vector<int>& types, const std::string& tokenizer,
         const std::string& stemmer, int threads) {
        TextIn in = TextIn::read(hyps, hyp_name);
        TextIn r = TextIn::read(refs, ref_name);
        const std::size_t n = in.views.size();
        if (r.views.size() != n) throw std::invalid_argument("hyps and refs differ in length");
        in.append(std::move(r));
        const auto kind = TextIn::tokenizer(tokenizer);
        const auto stem = TextIn::stemmer(stemmer);
        std::vector<double> p(types.size() * n), rc(types.size() * n), f(types.size() * n);
        {
          py::gil_scoped_release release;
          const auto toks = tb::text::tokenize_texts(in.views, kind, stem, threads);
          tb::text::rouge_pairs(toks, n, types, threads, {p.data(), rc.data(), f.data()});
        }
        return TextIn::prf(p, rc, f,
                           {static_cast<py::ssize_t>(types.size()), static_cast<py::ssize_t>(n)});
      },
      py::arg("hyps"), py::arg("refs"), py::arg("hyp_name"), py::arg("ref_name"),
      py::arg("types"), py::arg("tokenizer"), py::arg("stemmer"), py::arg("threads"),
      "(precision, recall, fmeasure), each (len(types), n); type n >= 1 ROUGE-N, 0 ROUGE-L, "
      "-1 ROUGE-Lsum.");
  m.def(
      "text_rouge_matrix",
      [](const py::list& a, const py::list& b, const std::string& a_name,
         const std::string& b_name, int type, const std::string& tokenizer,
         const std::string& stemmer, int threads) {
        TextIn in = TextIn::read(a, a_name);
        const std::size_t na = in.views.size();
        TextIn tb_in = TextIn::read(b, b_name);
        const std::size_t nb = tb_in.views.size();
        in.append(std::move(tb_in));
        const auto kind = TextIn::tokenizer(tokenizer);
        const auto stem = TextIn::stemmer(stemmer);
        std::vector<double> p(na * nb), r(na * nb), f(na * nb);
        {
          py::gil_scoped_release release;
          const auto toks = tb::text::tokenize_texts(in.views, kind, stem, threads);
          tb::text::rouge_matrix(toks, na, nb, type, threads, {p.data(), r.data(), f.data()});
        }
        return TextIn::prf(p, r, f, {static_cast<py::ssize_t>(na), static_cast<py::ssize_t>(nb)});
      },
      py::arg("a"), py::arg("b"), py::arg("a_name"), py::arg("b_name"), py::arg("type"),
      py::arg("tokenizer"), py::arg("stemmer"), py::arg("threads"),
      "(precision, recall, fmeasure), each (len(a), len(b)): a[i] predicted, b[j] the target.");
  m.def(
      "text_set_f1",
      [](const py::list& preds, const py::list& refs, const std::string& pred_name,
         const std::string& ref_name, const std::string& tokenizer, int threads) {
        TextIn in = TextIn::read(preds, pred_name);
        TextIn r = TextIn::read(refs, ref_name);
        const std::size_t n = in.views.size();
        if (r.views.size() != n) throw std::invalid_argument("preds and refs differ in length");
        in.append(std::move(r));
        const auto kind = TextIn::tokenizer(tokenizer);
        std::vector<double> out(n);
        {
          py::gil_scoped_release release;
          const auto toks =
              tb::text::tokenize_texts(in.views, kind, tb::text::Stemmer::kNone, threads);
          tb::text::set_f1(toks, n, threads, out.data());
        }
        return to_numpy(out);
      },
      py::arg("preds"), py::arg("refs"), py::arg("pred_name"), py::arg("ref_name"),
      py::arg("tokenizer"), py::arg("threads"), "F1 over sets of distinct tokens.");
  m.def(
      "text_token_f1",
      [](const py::list& preds, const py::list& refs, const std::string& pred_name,
         const std::string& ref_name, bool squad, double both_empty, int threads) {
        TextIn p = TextIn::read(preds, pred_name);
        TextIn r = TextIn::read(refs, ref_name);
        if (p.views.size() != r.views.size()) {
          throw std::invalid_argument("preds and refs differ in length");
        }
        std::vector<double> out(p.views.size());
        {
          py::gil_scoped_release release;
          tb::text::token_f1(p.views, r.views, squad, both_empty, threads, out.data());
        }
        return to_numpy(out);
      },
      py::arg("preds"), py::arg("refs"), py::arg("pred_name"), py::arg("ref_name"),
      py::arg("squad"), py::arg("both_empty"), py::arg("threads"),
      "SQuAD token F1 (texts already lowercased when squad=True).");
  m.def(
      "text_porter_stem",
      [](const std::vector<std::string>& words, const std::string& mode) {
        tb::text::PorterMode pm;
        if (mode == "nltk") {
          pm = tb::text::PorterMode::kNltk;
        } else if (mode == "original") {
          pm = tb::text::PorterMode::kOriginal;
        } else {
          throw std::invalid_argument("mode must be 'nltk' or 'original', got '" + mode + "'");
        }
        std::vector<std::string> out;
        out.reserve(words.size());
        for (const auto& w : words) {
          for (char c : w) {
            if (static_cast<unsigned char>(c) >= 0x80) {
              throw std::invalid_argument("porter_stem takes ASCII words, got '" + w + "'");
            }
          }
          out.push_back(tb::text::porter_stem(w, pm));
        }
        return out;
      },
      py::arg("words"), py::arg("mode"),
      "nltk PorterStemmer(mode).stem(word) for ASCII words (mode 'nltk' = NLTK_EXTENSIONS, "
      "'original' = ORIGINAL_ALGORITHM).");
  m.def(
      "text_char_flags",
      [](Array<std::uint32_t> cps) {
        py::array_t<std::uint8_t> out(cps.size());
        for (py::ssize_t i = 0; i < cps.size(); ++i) {
          out.mutable_data()[i] = tb::text::char_flags(cps.data()[i]);
        }
        return out;
      },
      py::arg("cps"), "Character-class flags of code points (see csrc/text/unicode_table.hpp).");
  m.attr("text_unicode_version") = tb::text::unicode_version();

  // @@bleu-bindings@@ (text: sacrebleu-exact BLEU)
  // Text columns arrive as a list of str (None allowed where sacrebleu allows it: in
  // reference streams) or as an Arrow-style tuple (offsets int64, UTF-8 bytes uint8, validity
  // uint8 or None). Strings are viewed in place (PyUnicode_AsUTF8AndSize); with lowercase,
  // non-ASCII strings are lowered by Python's str.lower (exact Unicode rules), ASCII in C++.
  struct BleuBind {
    struct Column {
      tb::text::TextColumn col;
      std::vector<py::object> keep;  // owners of the viewed bytes while the GIL is released
    };

    static std::string where(const std::string& name, std::size_t i) {
      return name + "[" + std::to_string(i) + "]";
    }

    // UTF-8 bytes of a str, in place; lone surrogates are encoded with "surrogatepass" (they
    // are opaque non-space, non-CJK characters to every rule, as in Python).
    static std::string_view utf8_of(PyObject* s, Column& c) {
      Py_ssize_t size = 0;
      const char* data = PyUnicode_AsUTF8AndSize(s, &size);
      if (data == nullptr) {
        PyErr_Clear();
        PyObject* b = PyUnicode_AsEncodedString(s, "utf-8", "surrogatepass");
        if (b == nullptr) throw py::error_already_set();
        c.keep.push_back(py::reinterpret_steal<py::object>(b));
        data = PyBytes_AS_STRING(b);
        size = PyBytes_GET_SIZE(b);
      }
      return {data, static_cast<std::size_t>(size)};
    }

    static std::string_view lowered(PyObject* s, Column& c) {
      py::object low = py::reinterpret_borrow<py::object>(s).attr("lower")();
      c.keep.push_back(low);
      return utf8_of(low.ptr(), c);
    }

    static Column from_list(py::handle obj, const std::string& name, bool allow_missing,
                            bool lower) {
      Column c;
      PyObject* lst = PySequence_List(obj.ptr());
      if (lst == nullptr) throw py::error_already_set();
      c.keep.push_back(py::reinterpret_steal<py::object>(lst));
      const auto n = static_cast<std::size_t>(PyList_GET_SIZE(lst));
      c.col.text.resize(n);
      for (std::size_t i = 0; i < n; ++i) {
        PyObject* s = PyList_GET_ITEM(lst, static_cast<Py_ssize_t>(i));
        const bool nan = PyFloat_Check(s) && PyFloat_AS_DOUBLE(s) != PyFloat_AS_DOUBLE(s);
        if (s == Py_None || nan) {
          if (!allow_missing) {
            throw py::value_error(where(name, i) + " is null (" + (nan ? "NaN" : "None") +
                                  "); expected a str");
          }
          if (c.col.present.empty()) c.col.present.assign(n, 1);
          c.col.present[i] = 0;
          continue;
        }
        if (!PyUnicode_Check(s)) {
          throw py::type_error(where(name, i) + ": expected a str, got " +
                               std::string(Py_TYPE(s)->tp_name));
        }
        c.col.text[i] = (lower && !PyUnicode_IS_ASCII(s)) ? lowered(s, c) : utf8_of(s, c);
      }
      return c;
    }

    static Column from_arrow(py::tuple t, const std::string& name, bool allow_missing,
                             bool lower) {
      if (t.size() != 3) throw py::value_error(name + ": expected (offsets, data, validity)");
      Column c;
      auto offsets = t[0].cast<Array<std::int64_t>>();
      auto data = t[1].cast<Array<std::uint8_t>>();
      c.keep.push_back(offsets);
      c.keep.push_back(data);
      const std::int64_t* off = offsets.data();
      const auto total = static_cast<std::int64_t>(data.size());
      const std::size_t n = offsets.size() > 0 ? static_cast<std::size_t>(offsets.size()) - 1 : 0;
      for (std::size_t i = 0; i <= n && offsets.size() > 0; ++i) {
        if (off[i] < 0 || off[i] > total || (i > 0 && off[i] < off[i - 1])) {
          throw py::value_error(name + ": invalid string offsets");
        }
      }
      if (!t[2].is_none()) {
        auto valid = t[2].cast<Array<std::uint8_t>>();
        if (static_cast<std::size_t>(valid.size()) != n) {
          throw py::value_error(name + ": validity needs one entry per string");
        }
        c.col.present.assign(valid.data(), valid.data() + n);
        for (std::size_t i = 0; i < n && !allow_missing; ++i) {
          if (!c.col.present[i]) {
            throw py::value_error(where(name, i) + " is null; expected a str");
          }
        }
      }
      const char* bytes = reinterpret_cast<const char*>(data.data());
      c.col.text.resize(n);
      for (std::size_t i = 0; i < n; ++i) {
        std::string_view s(bytes + off[i], static_cast<std::size_t>(off[i + 1] - off[i]));
        bool ascii = true;
        for (const char ch : s) ascii &= static_cast<unsigned char>(ch) < 0x80;
        if (lower && !ascii && c.col.has(i)) {
          PyObject* u = PyUnicode_DecodeUTF8(s.data(), static_cast<Py_ssize_t>(s.size()),
                                             "surrogatepass");
          if (u == nullptr) {
            PyErr_Clear();
            throw py::value_error(where(name, i) + ": invalid UTF-8");
          }
          auto owner = py::reinterpret_steal<py::object>(u);
          s = lowered(u, c);
        }
        c.col.text[i] = s;
      }
      return c;
    }

    static Column column(py::handle obj, const std::string& name, bool allow_missing,
                         bool lower) {
      if (py::isinstance<py::tuple>(obj)) {
        return from_arrow(py::reinterpret_borrow<py::tuple>(obj), name, allow_missing, lower);
      }
      return from_list(obj, name, allow_missing, lower);
    }

    struct Inputs {
      Column hyps;
      std::vector<Column> refs;
      std::vector<tb::text::TextColumn> ref_cols;
    };

    // refs: a list of reference streams (each a column); a single stream may not hold None.
    static Inputs inputs(py::handle hyps, py::list refs, bool lower) {
      Inputs in;
      in.hyps = column(hyps, "hyps", false, lower);
      const bool multi = refs.size() > 1;
      for (std::size_t k = 0; k < refs.size(); ++k) {
        const std::string name = multi ? "refs[" + std::to_string(k) + "]" : std::string("refs");
        in.refs.push_back(column(refs[k], name, multi, lower));
        if (in.refs.back().col.size() != in.hyps.col.size()) {
          throw py::value_error(name + ": expected " + std::to_string(in.hyps.col.size()) +
                                " texts (one per hypothesis), got " +
                                std::to_string(in.refs.back().col.size()));
        }
      }
      if (refs.size() == 0) throw py::value_error("refs: expected at least one reference stream");
      for (std::size_t i = 0; multi && i < in.hyps.col.size(); ++i) {
        bool any = false;
        for (const auto& r : in.refs) any |= r.col.has(i);
        if (!any) {
          throw py::value_error("refs: item " + std::to_string(i) +
                                " has no reference (None in every stream)");
        }
      }
      for (auto& r : in.refs) in.ref_cols.push_back(r.col);
      return in;
    }

    static tb::text::BleuConfig config(const std::string& tokenize, bool lowercase,
                                       int max_order) {
      if (max_order < 1) throw py::value_error("max_order must be >= 1");
      tb::text::BleuConfig cfg;
      cfg.tokenizer = tb::text::parse_bleu_tokenizer(tokenize);
      cfg.lowercase = lowercase;
      cfg.max_order = max_order;
      return cfg;
    }

    static tb::text::BleuScoreOptions options(int max_order, const std::string& smooth,
                                              std::optional<double> smooth_value,
                                              bool effective_order, int python_sum) {
      tb::text::BleuScoreOptions o;
      o.smooth = tb::text::parse_bleu_smooth(smooth);
      o.smooth_value = smooth_value ? *smooth_value : tb::text::bleu_default_smooth_value(o.smooth);
      o.effective_order = effective_order;
      o.max_order = max_order;
      o.sum = python_sum ? tb::text::PySum::kNeumaier : tb::text::PySum::kSequential;
      return o;
    }

    static py::array_t<std::int64_t> statistics(const Inputs& in,
                                                const tb::text::BleuConfig& cfg, int threads) {
      const auto n = static_cast<py::ssize_t>(in.hyps.col.size());
      const auto k = static_cast<py::ssize_t>(tb::text::bleu_n_columns(cfg.max_order));
      py::array_t<std::int64_t> out({n, k});
      std::int64_t* o = out.mutable_data();
      py::gil_scoped_release release;
      tb::text::bleu_statistics(in.hyps.col, in.ref_cols, cfg, threads, o);
      return out;
    }
  };

  m.def(
      "bleu_statistics",
      [](py::handle hyps, py::list refs, const std::string& tokenize, bool lowercase,
         int max_order, int threads) {
        const auto cfg = BleuBind::config(tokenize, lowercase, max_order);
        const auto in = BleuBind::inputs(hyps, refs, lowercase);
        return BleuBind::statistics(in, cfg, threads);
      },
      py::arg("hyps"), py::arg("refs"), py::arg("tokenize"), py::arg("lowercase"),
      py::arg("max_order"), py::arg("threads"),
      "Per-item BLEU statistics (n, 2*max_order+2): matches, totals, hyp_len, ref_len.");
  m.def(
      "bleu_sentence",
      [](py::handle hyps, py::list refs, const std::string& tokenize, bool lowercase,
         int max_order, const std::string& smooth, std::optional<double> smooth_value,
         bool effective_order, int python_sum, int threads) {
        const auto cfg = BleuBind::config(tokenize, lowercase, max_order);
        const auto opt =
            BleuBind::options(max_order, smooth, smooth_value, effective_order, python_sum);
        const auto in = BleuBind::inputs(hyps, refs, lowercase);
        auto stats = BleuBind::statistics(in, cfg, threads);
        const auto n = static_cast<py::ssize_t>(in.hyps.col.size());
        py::array_t<double> score(n), bp(n), ratio(n);
        py::array_t<double> precisions({n, static_cast<py::ssize_t>(max_order)});
        {
          double *s = score.mutable_data(), *b = bp.mutable_data(), *r = ratio.mutable_data();
          double* p = precisions.mutable_data();
          const std::int64_t* st = stats.data();
          py::gil_scoped_release release;
          tb::text::bleu_scores(st, static_cast<std::size_t>(n), opt, threads, s, b, r, p);
        }
        py::dict out;
        out["statistics"] = stats;
        out["score"] = score;
        out["bp"] = bp;
        out["ratio"] = ratio;
        out["precisions"] = precisions;
        return out;
      },
      py::arg("hyps"), py::arg("refs"), py::arg("tokenize"), py::arg("lowercase"),
      py::arg("max_order"), py::arg("smooth"), py::arg("smooth_value"),
      py::arg("effective_order"), py::arg("python_sum"), py::arg("threads"),
      "Sentence BLEU of each item (sacrebleu's BLEU.sentence_score).");
  m.def(
      "bleu_from_statistics",
      [](Array<double> stats, int max_order, const std::string& smooth,
         std::optional<double> smooth_value, bool effective_order, int python_sum) {
        const auto opt =
            BleuBind::options(max_order, smooth, smooth_value, effective_order, python_sum);
        const auto k = static_cast<py::ssize_t>(tb::text::bleu_n_columns(max_order));
        if (stats.ndim() != 2 || stats.shape(1) != k) {
          throw py::value_error("statistics must be (n, " + std::to_string(k) + ")");
        }
        const py::ssize_t n = stats.shape(0);
        py::array_t<double> score(n), bp(n), ratio(n);
        py::array_t<double> precisions({n, static_cast<py::ssize_t>(max_order)});
        for (py::ssize_t i = 0; i < n; ++i) {
          const auto r = tb::text::bleu_score(stats.data() + i * k, opt,
                                              precisions.mutable_data() + i * max_order);
          score.mutable_data()[i] = r.score;
          bp.mutable_data()[i] = r.bp;
          ratio.mutable_data()[i] = r.ratio;
        }
        py::dict out;
        out["score"] = score;
        out["bp"] = bp;
        out["ratio"] = ratio;
        out["precisions"] = precisions;
        return out;
      },
      py::arg("statistics"), py::arg("max_order"), py::arg("smooth"), py::arg("smooth_value"),
      py::arg("effective_order"), py::arg("python_sum"),
      "BLEU (sacrebleu's compute_bleu) of each row of (summed) statistics.");
  m.def(
      "bleu_tokenize",
      [](py::handle texts, const std::string& tokenize, bool lowercase) {
        const auto tok = tb::text::parse_bleu_tokenizer(tokenize);
        const auto c = BleuBind::column(texts, "texts", false, lowercase);
        py::list out;
        for (const auto& s : c.col.text) {
          const std::string t = tb::text::bleu_tokenized_string(s, tok, lowercase);
          out.append(py::reinterpret_steal<py::object>(
              PyUnicode_DecodeUTF8(t.data(), static_cast<Py_ssize_t>(t.size()), "surrogatepass")));
        }
        return out;
      },
      py::arg("texts"), py::arg("tokenize"), py::arg("lowercase"),
      "sacrebleu's tokenizer output (tokens joined by one space) of each text.");

  // @@tiling-bindings@@ (tiling: tissue mask, patch grid, fused preprocessing)
  // ---- tiling: tissue mask, patch grid, fused preprocessing (csrc/tiling/) ----
  {
    namespace tl = tb::tiling;
    using U8 = Array<std::uint8_t>;
    auto check_image = [](const py::array& a, const char* name, bool allow_3d) {
      if (a.ndim() != 2 && !(allow_3d && a.ndim() == 3)) {
        throw std::invalid_argument(std::string(name) + " must be a 2-D" +
                                    (allow_3d ? " or 3-D" : "") + " array");
      }
    };
    auto parse_filter = [](const std::string& f) {
      if (f == "bilinear") return tl::Filter::kBilinear;
      if (f == "bicubic") return tl::Filter::kBicubic;
      throw std::invalid_argument("interpolation must be 'bilinear' or 'bicubic', got '" + f + "'");
    };
    m.def(
        "tiling_hsv_saturation",
        [](U8 rgb, int threads) {
          if (rgb.ndim() != 3 || (rgb.shape(2) != 3 && rgb.shape(2) != 4)) {
            throw std::invalid_argument("rgb must be (h, w, 3|4) uint8");
          }
          py::array_t<std::uint8_t> out({rgb.shape(0), rgb.shape(1)});
          auto* o = out.mutable_data();
          py::gil_scoped_release release;
          tl::hsv_saturation(rgb.data(), static_cast<std::size_t>(rgb.shape(0) * rgb.shape(1)),
                             static_cast<int>(rgb.shape(2)), o, threads);
          return out;
        },
        py::arg("rgb"), py::arg("threads"), "HSV saturation (OpenCV 8-bit convention).");
    m.def(
        "tiling_median_blur",
        [=](U8 img, int k, int threads) {
          check_image(img, "image", false);
          py::array_t<std::uint8_t> out({img.shape(0), img.shape(1)});
          auto* o = out.mutable_data();
          py::gil_scoped_release release;
          tl::median_blur(img.data(), img.shape(0), img.shape(1), k, o, threads);
          return out;
        },
        py::arg("image"), py::arg("k"), py::arg("threads"),
        "k x k median with replicated borders.");
    m.def(
        "tiling_otsu_threshold",
        [](U8 img) {
          py::gil_scoped_release release;
          return tl::otsu_threshold(img.data(), static_cast<std::size_t>(img.size()));
        },
        py::arg("image"), "Otsu threshold of 8-bit data (foreground: value > t).");
    m.def(
        "tiling_binary_close",
        [=](U8 mask, int k, int threads) {
          check_image(mask, "mask", false);
          py::array_t<std::uint8_t> out({mask.shape(0), mask.shape(1)});
          auto* o = out.mutable_data();
          py::gil_scoped_release release;
          tl::binary_close(mask.data(), mask.shape(0), mask.shape(1), k, o, threads);
          return out;
        },
        py::arg("mask"), py::arg("k"), py::arg("threads"),
        "Closing with a k x k square anchored at (k/2, k/2).");
    auto stats_dict = [](const tl::FilterStats& s) {
      py::dict d;
      d["n_regions"] = s.n_regions;
      d["n_kept"] = s.n_kept;
      d["n_holes"] = s.n_holes;
      d["n_holes_kept"] = s.n_holes_kept;
      return d;
    };
    m.def(
        "tiling_filter_regions",
        [=](U8 mask, double min_area, double min_hole_area, int max_n_holes) {
          check_image(mask, "mask", false);
          py::array_t<std::uint8_t> out({mask.shape(0), mask.shape(1)});
          tl::RegionFilter f{min_area, min_hole_area, max_n_holes};
          tl::FilterStats st;
          {
            auto* o = out.mutable_data();
            py::gil_scoped_release release;
            st = tl::filter_regions(mask.data(), mask.shape(0), mask.shape(1), f, o);
          }
          return py::make_tuple(out, stats_dict(st));
        },
        py::arg("mask"), py::arg("min_area"), py::arg("min_hole_area"), py::arg("max_n_holes"),
        "Region/hole area filter; returns (mask, stats).");
    m.def(
        "tiling_mask_polygons",
        [=](U8 mask) {
          check_image(mask, "mask", false);
          std::vector<tl::Polygon> polys;
          {
            py::gil_scoped_release release;
            polys = tl::mask_polygons(mask.data(), mask.shape(0), mask.shape(1));
          }
          auto ring = [](const std::vector<std::int32_t>& v) {
            py::array_t<std::int32_t> a({static_cast<py::ssize_t>(v.size() / 2), py::ssize_t{2}});
            if (!v.empty()) std::memcpy(a.mutable_data(), v.data(), v.size() * sizeof(std::int32_t));
            return a;
          };
          py::list out;
          for (const auto& p : polys) {
            py::list holes;
            for (const auto& hr : p.holes) holes.append(ring(hr));
            out.append(py::make_tuple(ring(p.outer), holes, p.area));
          }
          return out;
        },
        py::arg("mask"), "Pixel-edge polygons of a 0/1 mask: [(outer, [holes], area)].");
    m.def(
        "tiling_tissue_mask",
        [=](U8 rgb, int sthresh, bool use_otsu, int mthresh, int close, double min_area,
            double min_hole_area, int max_n_holes, int threads) {
          if (rgb.ndim() != 3 || (rgb.shape(2) != 3 && rgb.shape(2) != 4)) {
            throw std::invalid_argument("rgb must be (h, w, 3|4) uint8");
          }
          tl::TissueParams p;
          p.sthresh = sthresh;
          p.use_otsu = use_otsu;
          p.mthresh = mthresh;
          p.close = close;
          p.filter = {min_area, min_hole_area, max_n_holes};
          tl::TissueResult r;
          {
            py::gil_scoped_release release;
            r = tl::tissue_mask(rgb.data(), rgb.shape(0), rgb.shape(1),
                                static_cast<int>(rgb.shape(2)), p, threads);
          }
          py::array_t<std::uint8_t> mask({rgb.shape(0), rgb.shape(1)});
          std::memcpy(mask.mutable_data(), r.mask.data(), r.mask.size());
          py::dict d = stats_dict(r.stats);
          d["mask"] = mask;
          d["threshold"] = r.threshold;
          return d;
        },
        py::arg("rgb"), py::arg("sthresh"), py::arg("use_otsu"), py::arg("mthresh"),
        py::arg("close"), py::arg("min_area"), py::arg("min_hole_area"), py::arg("max_n_holes"),
        py::arg("threads"), "Saturation -> median -> threshold -> closing -> region filter.");
    m.def(
        "tiling_patch_grid",
        [=](std::optional<U8> mask, std::int64_t width, std::int64_t height, std::int64_t patch,
            std::int64_t step, double min_tissue, int threads) {
          if (mask) check_image(*mask, "mask", false);
          tl::GridParams p{width, height, patch, step, min_tissue};
          tl::GridResult g;
          {
            const std::uint8_t* md = mask ? mask->data() : nullptr;
            const std::int64_t mh = mask ? mask->shape(0) : 0, mw = mask ? mask->shape(1) : 0;
            py::gil_scoped_release release;
            g = tl::patch_grid(md, mh, mw, p, threads);
          }
          const auto n = static_cast<py::ssize_t>(g.fraction.size());
          py::array_t<std::int64_t> coords({n, py::ssize_t{2}});
          if (n) std::memcpy(coords.mutable_data(), g.coords.data(), g.coords.size() * 8);
          return py::make_tuple(coords, to_numpy(g.fraction), g.n_cols, g.n_rows);
        },
        py::arg("mask"), py::arg("width"), py::arg("height"), py::arg("patch"), py::arg("step"),
        py::arg("min_tissue"), py::arg("threads"),
        "Row-major level-0 patch grid filtered by tissue; returns (coords, fraction, cols, rows).");
    m.def(
        "tiling_resize",
        [=](U8 img, std::int64_t out_h, std::int64_t out_w, const std::string& filter,
            int threads) {
          check_image(img, "image", true);
          const int c = img.ndim() == 3 ? static_cast<int>(img.shape(2)) : 1;
          const tl::Filter f = parse_filter(filter);
          std::vector<py::ssize_t> shape = {static_cast<py::ssize_t>(out_h),
                                            static_cast<py::ssize_t>(out_w)};
          if (img.ndim() == 3) shape.push_back(c);
          py::array_t<std::uint8_t> out(shape);
          auto* o = out.mutable_data();
          py::gil_scoped_release release;
          tl::resize_image(img.data(), img.shape(0), img.shape(1), c, out_h, out_w, f, o, threads);
          return out;
        },
        py::arg("image"), py::arg("out_h"), py::arg("out_w"), py::arg("interpolation"),
        py::arg("threads"), "PIL-exact antialiased resize of a uint8 image.");
    m.def(
        "tiling_argb32_to_rgb",
        [](Array<std::uint32_t> argb, int threads) {
          if (argb.ndim() != 2) throw std::invalid_argument("argb must be (h, w) uint32");
          py::array_t<std::uint8_t> out({argb.shape(0), argb.shape(1), py::ssize_t{3}});
          auto* o = out.mutable_data();
          py::gil_scoped_release release;
          tl::argb32_to_rgb(argb.data(), static_cast<std::size_t>(argb.size()), o, threads);
          return out;
        },
        py::arg("argb"), py::arg("threads"),
        "Premultiplied ARGB32 (OpenSlide buffers) to RGB over white.");
    m.def(
        "tiling_preprocess",
        [=](py::array src, const std::string& format, std::optional<Array<std::int32_t>> crops,
            py::array out, const std::string& out_type, const std::string& filter,
            std::vector<float> mean, std::vector<float> std_, int threads) {
          tl::PreprocessParams p;
          std::size_t px_bytes = 0;
          py::ssize_t want_ndim = 4;
          if (format == "rgb") {
            p.format = tl::PixelFormat::kRGB, px_bytes = 3;
          } else if (format == "rgba") {
            p.format = tl::PixelFormat::kRGBA, px_bytes = 4;
          } else if (format == "argb32") {
            p.format = tl::PixelFormat::kARGB32, px_bytes = 4, want_ndim = 3;
          } else {
            throw std::invalid_argument("format must be 'rgb', 'rgba' or 'argb32'");
          }
          const bool src_ok = src.ndim() == want_ndim &&
                              (src.flags() & py::array::c_style) &&
                              (want_ndim == 3 ? src.itemsize() == 4 && src.dtype().kind() == 'u'
                                              : src.itemsize() == 1 && src.dtype().kind() == 'u' &&
                                                    static_cast<std::size_t>(src.shape(3)) == px_bytes);
          if (!src_ok) throw std::invalid_argument("src has the wrong dtype, shape or layout");
          std::size_t out_bytes = 0;
          if (out_type == "float32") {
            p.type = tl::OutType::kFloat32, out_bytes = 4;
          } else if (out_type == "float16") {
            p.type = tl::OutType::kFloat16, out_bytes = 2;
          } else if (out_type == "bfloat16") {
            p.type = tl::OutType::kBFloat16, out_bytes = 2;
          } else {
            throw std::invalid_argument("out_type must be 'float32', 'float16' or 'bfloat16'");
          }
          const py::ssize_t n = src.shape(0);
          if (out.ndim() != 4 || out.shape(0) != n || out.shape(1) != 3 ||
              static_cast<std::size_t>(out.itemsize()) != out_bytes ||
              !(out.flags() & py::array::c_style) || !out.writeable()) {
            throw std::invalid_argument("out must be a writeable C-contiguous (n, 3, h, w) buffer");
          }
          if (crops && (crops->ndim() != 2 || crops->shape(0) != n || crops->shape(1) != 4)) {
            throw std::invalid_argument("crops must be (n, 4) int32");
          }
          if (mean.size() != 3 || std_.size() != 3) throw std::invalid_argument("mean/std need 3 values");
          for (int c = 0; c < 3; ++c) p.mean[c] = mean[c], p.std[c] = std_[c];
          p.out_h = out.shape(2);
          p.out_w = out.shape(3);
          p.filter = parse_filter(filter);
          const void* s = src.data();
          void* o = out.mutable_data();
          const std::int32_t* cr = crops ? crops->data() : nullptr;
          py::gil_scoped_release release;
          tl::preprocess_batch(s, n, src.shape(1), src.shape(2), cr, p, o, threads);
        },
        py::arg("src"), py::arg("format"), py::arg("crops"), py::arg("out"), py::arg("out_type"),
        py::arg("interpolation"), py::arg("mean"), py::arg("std"), py::arg("threads"),
        "Fused crop + PIL-exact resize + normalise into an NCHW float buffer (GIL released).");
  }

  // @@seqmask-bindings@@ (seqmask: segment ids from token ids)
  // ---- seqmask: segment ids from token ids (csrc/seqmask/) ----
  m.def(
      "seqmask_segment_ids",
      [](py::array ids, Array<std::int64_t> offsets, Array<std::int64_t> patterns,
         Array<std::int64_t> pattern_offsets, Array<std::int8_t> labels, bool mark_markers,
         int threads) {
        if (ids.ndim() != 1 || offsets.ndim() != 1 || offsets.size() < 1) {
          throw std::invalid_argument("ids must be 1-D and offsets 1-D with at least one entry");
        }
        const auto n_pat = static_cast<std::size_t>(labels.size());
        if (pattern_offsets.size() != labels.size() + 1) {
          throw std::invalid_argument("pattern_offsets must have len(labels) + 1 entries");
        }
        const std::int64_t* po = pattern_offsets.data();
        if (po[0] != 0 || po[n_pat] != patterns.size()) {
          throw std::invalid_argument("pattern_offsets must run from 0 to len(patterns)");
        }
        for (std::size_t p = 0; p < n_pat; ++p) {
          if (po[p + 1] < po[p]) throw std::invalid_argument("pattern_offsets must not decrease");
        }
        const auto n_tok = static_cast<std::int64_t>(ids.size());
        const std::int64_t* off = offsets.data();
        const auto n_seq = static_cast<std::size_t>(offsets.size() - 1);
        if (off[0] != 0 || off[n_seq] != n_tok) {
          throw std::invalid_argument("offsets must run from 0 to len(ids)");
        }
        for (std::size_t i = 0; i < n_seq; ++i) {
          if (off[i + 1] < off[i]) throw std::invalid_argument("offsets must not decrease");
        }
        const tb::seqmask::MarkerMatcher matcher(patterns.data(), po, n_pat, labels.data());
        py::array_t<std::int8_t> seg(n_tok);
        std::int8_t* out = seg.mutable_data();
        if (py::isinstance<py::array_t<std::int32_t>>(ids)) {
          auto a = Array<std::int32_t>::ensure(ids);
          const std::int32_t* p = a.data();
          py::gil_scoped_release release;
          matcher.segment_ids(p, off, n_seq, mark_markers, out, threads);
        } else {
          auto a = Array<std::int64_t>::ensure(ids);
          if (!a) throw std::invalid_argument("ids must be an integer array");
          const std::int64_t* p = a.data();
          py::gil_scoped_release release;
          matcher.segment_ids(p, off, n_seq, mark_markers, out, threads);
        }
        return seg;
      },
      py::arg("ids"), py::arg("offsets"), py::arg("patterns"), py::arg("pattern_offsets"),
      py::arg("labels"), py::arg("mark_markers"), py::arg("threads"),
      "Segment id (int8) of every token: Aho-Corasick marker matching, leftmost-longest, spans "
      "to the next marker (GIL released).");
}
