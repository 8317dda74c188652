// _core.text: tokenizers, ROUGE, token/set F1 and their all-pairs matrices, the Porter stemmer,
// and sacrebleu-exact BLEU (csrc/text/). Text columns are read by read_string_column (one view
// per string, in place) and every batch is tokenized and scored with the GIL released.
#include <cstdint>
#include <optional>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "bindings/common.hpp"
#include "text/bleu.hpp"
#include "text/bleu_tokenize.hpp"
#include "text/porter.hpp"
#include "text/rouge.hpp"
#include "text/rouge_tokenize.hpp"

namespace tb::bindings {

namespace {

namespace tt = tb::text;

constexpr Choice<tt::TokenizerKind> kTokenizers[] = {
    {"rouge", tt::TokenizerKind::kRouge},
    {"unicode", tt::TokenizerKind::kUnicode},
    {"whitespace", tt::TokenizerKind::kWhitespace},
};

constexpr Choice<tt::Stemmer> kStemmers[] = {{"none", tt::Stemmer::kNone},
                                             {"porter", tt::Stemmer::kPorterNltk},
                                             {"porter-original", tt::Stemmer::kPorterOriginal}};

constexpr Choice<tt::PorterMode> kPorterModes[] = {{"nltk", tt::PorterMode::kNltk},
                                                   {"original", tt::PorterMode::kOriginal}};

constexpr Choice<tt::BleuTokenizer> kBleuTokenizers[] = {{"13a", tt::BleuTokenizer::k13a},
                                                         {"zh", tt::BleuTokenizer::kZh},
                                                         {"char", tt::BleuTokenizer::kChar},
                                                         {"none", tt::BleuTokenizer::kNone}};

constexpr Choice<tt::BleuSmooth> kBleuSmooth[] = {{"exp", tt::BleuSmooth::kExp},
                                                  {"floor", tt::BleuSmooth::kFloor},
                                                  {"add-k", tt::BleuSmooth::kAddK},
                                                  {"none", tt::BleuSmooth::kNone}};

// ------------------------------------------------------------------------------ ROUGE, F1

// The texts of one or more columns, in order, as the views the tokenizer reads; `columns` keep
// the viewed strings alive.
struct TokenizerInput {
  std::vector<StringColumn> columns;
  std::vector<tt::Utf8> views;

  void add(StringColumn column) {
    views.reserve(views.size() + column.size());
    for (const auto& s : column.text) views.push_back({s.data(), s.size()});
    columns.push_back(std::move(column));
  }
};

void check_same_length(std::size_t a, std::size_t b, const char* a_name, const char* b_name) {
  if (a != b) {
    throw std::invalid_argument(std::string(a_name) + " and " + b_name + " differ in length (" +
                                std::to_string(a) + " and " + std::to_string(b) + ")");
  }
}

py::tuple prf(const std::vector<double>& p, const std::vector<double>& r,
              const std::vector<double>& f, const std::vector<py::ssize_t>& shape) {
  return py::make_tuple(to_numpy(p).reshape(shape), to_numpy(r).reshape(shape),
                        to_numpy(f).reshape(shape));
}

py::list tokenize(const py::list& texts, const std::string& name, const std::string& tokenizer,
                  const std::string& stemmer, int threads) {
  TokenizerInput in;
  in.add(read_string_column(texts, name));
  const auto kind = parse_choice("tokenizer", tokenizer, kTokenizers);
  const auto stem = parse_choice("stemmer", stemmer, kStemmers);
  tt::TokenizedTexts toks;
  run_interruptible([&] {
    toks = tt::tokenize_texts(in.views, kind, stem, threads);
  });
  py::list out(in.views.size());
  for (std::size_t i = 0; i < in.views.size(); ++i) {
    py::list row(toks.size(i));
    const tt::Token* t = toks.tokens(i);
    for (std::size_t k = 0; k < toks.size(i); ++k) {
      row[k] = py::reinterpret_steal<py::object>(
          PyUnicode_DecodeUTF8(t[k].data, static_cast<Py_ssize_t>(t[k].size), "surrogatepass"));
    }
    out[i] = row;
  }
  return out;
}

py::tuple rouge(const py::list& hyps, const py::list& refs, const std::string& hyp_name,
                const std::string& ref_name, const std::vector<int>& types,
                const std::string& tokenizer, const std::string& stemmer, int threads) {
  TokenizerInput in;
  in.add(read_string_column(hyps, hyp_name));
  in.add(read_string_column(refs, ref_name));
  const std::size_t n = in.columns[0].size();
  check_same_length(n, in.columns[1].size(), "hyps", "refs");
  const auto kind = parse_choice("tokenizer", tokenizer, kTokenizers);
  const auto stem = parse_choice("stemmer", stemmer, kStemmers);
  std::vector<double> p(types.size() * n), r(types.size() * n), f(types.size() * n);
  run_interruptible([&] {
    const auto toks = tt::tokenize_texts(in.views, kind, stem, threads);
    tt::rouge_pairs(toks, n, types, threads, {p.data(), r.data(), f.data()});
  });
  return prf(p, r, f, {static_cast<py::ssize_t>(types.size()), static_cast<py::ssize_t>(n)});
}

py::tuple rouge_matrix(const py::list& a, const py::list& b, const std::string& a_name,
                       const std::string& b_name, int type, const std::string& tokenizer,
                       const std::string& stemmer, int threads) {
  TokenizerInput in;
  in.add(read_string_column(a, a_name));
  in.add(read_string_column(b, b_name));
  const std::size_t na = in.columns[0].size(), nb = in.columns[1].size();
  const auto kind = parse_choice("tokenizer", tokenizer, kTokenizers);
  const auto stem = parse_choice("stemmer", stemmer, kStemmers);
  std::vector<double> p(na * nb), r(na * nb), f(na * nb);
  run_interruptible([&] {
    const auto toks = tt::tokenize_texts(in.views, kind, stem, threads);
    tt::rouge_matrix(toks, na, nb, type, threads, {p.data(), r.data(), f.data()});
  });
  return prf(p, r, f, {static_cast<py::ssize_t>(na), static_cast<py::ssize_t>(nb)});
}

py::array_t<double> set_f1(const py::list& preds, const py::list& refs,
                           const std::string& pred_name, const std::string& ref_name,
                           const std::string& tokenizer, int threads) {
  TokenizerInput in;
  in.add(read_string_column(preds, pred_name));
  in.add(read_string_column(refs, ref_name));
  const std::size_t n = in.columns[0].size();
  check_same_length(n, in.columns[1].size(), "preds", "refs");
  const auto kind = parse_choice("tokenizer", tokenizer, kTokenizers);
  std::vector<double> out(n);
  run_interruptible([&] {
    const auto toks = tt::tokenize_texts(in.views, kind, tt::Stemmer::kNone, threads);
    tt::set_f1(toks, n, threads, out.data());
  });
  return to_numpy(out);
}

py::array_t<double> token_f1(const py::list& preds, const py::list& refs,
                             const std::string& pred_name, const std::string& ref_name,
                             bool squad, double both_empty, int threads) {
  TokenizerInput p, r;
  p.add(read_string_column(preds, pred_name));
  r.add(read_string_column(refs, ref_name));
  check_same_length(p.views.size(), r.views.size(), "preds", "refs");
  std::vector<double> out(p.views.size());
  run_interruptible([&] {
    tt::token_f1(p.views, r.views, squad, both_empty, threads, out.data());
  });
  return to_numpy(out);
}

std::vector<std::string> porter_stem(const std::vector<std::string>& words,
                                     const std::string& mode) {
  const auto pm = parse_choice("mode", mode, kPorterModes);
  std::vector<std::string> out;
  out.reserve(words.size());
  for (std::size_t i = 0; i < words.size(); ++i) {
    for (const char c : words[i]) {
      if (static_cast<unsigned char>(c) >= 0x80) {
        throw std::invalid_argument(entry_name("words", i) + ": expected an ASCII word, got '" +
                                    words[i] + "'");
      }
    }
    out.push_back(tt::porter_stem(words[i], pm));
  }
  return out;
}

py::array_t<std::uint8_t> char_flags(Array<std::uint32_t> cps) {
  py::array_t<std::uint8_t> out(cps.size());
  for (py::ssize_t i = 0; i < cps.size(); ++i) {
    out.mutable_data()[i] = tt::char_flags(cps.data()[i]);
  }
  return out;
}

// ------------------------------------------------------------------------------------- BLEU

// Hypotheses and reference streams (refs[k].text[i]: the k-th reference of item i).
struct BleuInputs {
  std::vector<StringColumn> owners;  // keep the viewed strings alive
  tt::TextColumn hyps;
  std::vector<tt::TextColumn> refs;
};

// The core's view of a column; the views are moved out, `c` keeps owning the strings.
tt::TextColumn text_column(StringColumn& c) {
  return {std::move(c.text), std::move(c.present)};
}

// refs: a list of reference streams (each a column); a single stream may not hold None.
BleuInputs bleu_inputs(py::handle hyps, const py::list& refs, bool lower) {
  BleuInputs in;
  in.owners.push_back(read_string_column(hyps, "hyps", {false, lower}));
  in.hyps = text_column(in.owners.back());
  if (refs.size() == 0) {
    throw std::invalid_argument("refs: expected at least one reference stream");
  }
  const bool multi = refs.size() > 1;
  for (std::size_t k = 0; k < refs.size(); ++k) {
    const std::string name = multi ? entry_name("refs", k) : std::string("refs");
    in.owners.push_back(read_string_column(refs[k], name, {multi, lower}));
    in.refs.push_back(text_column(in.owners.back()));
    if (in.refs.back().size() != in.hyps.size()) {
      throw std::invalid_argument(name + ": expected " + std::to_string(in.hyps.size()) +
                                  " texts (one per hypothesis), got " +
                                  std::to_string(in.refs.back().size()));
    }
  }
  for (std::size_t i = 0; multi && i < in.hyps.size(); ++i) {
    bool any = false;
    for (const auto& r : in.refs) any |= r.has(i);
    if (!any) {
      throw std::invalid_argument("refs: item " + std::to_string(i) +
                                  " has no reference (None in every stream)");
    }
  }
  return in;
}

void check_max_order(int max_order) {
  if (max_order < 1) {
    throw std::invalid_argument("max_order: expected an integer >= 1, got " +
                                std::to_string(max_order));
  }
}

tt::BleuConfig bleu_config(const std::string& tokenize, bool lowercase, int max_order) {
  check_max_order(max_order);
  tt::BleuConfig cfg;
  cfg.tokenizer = parse_choice("tokenize", tokenize, kBleuTokenizers);
  cfg.lowercase = lowercase;
  cfg.max_order = max_order;
  return cfg;
}

tt::BleuScoreOptions bleu_options(int max_order, const std::string& smooth,
                                  std::optional<double> smooth_value, bool effective_order,
                                  int python_sum) {
  check_max_order(max_order);
  tt::BleuScoreOptions o;
  o.smooth = parse_choice("smooth", smooth, kBleuSmooth);
  o.smooth_value = smooth_value ? *smooth_value : tt::bleu_default_smooth_value(o.smooth);
  o.effective_order = effective_order;
  o.max_order = max_order;
  o.sum = python_sum ? tt::PySum::kNeumaier : tt::PySum::kSequential;
  return o;
}

py::array_t<std::int64_t> bleu_statistics_of(const BleuInputs& in, const tt::BleuConfig& cfg,
                                             int threads) {
  const auto n = static_cast<py::ssize_t>(in.hyps.size());
  const auto k = static_cast<py::ssize_t>(tt::bleu_n_columns(cfg.max_order));
  py::array_t<std::int64_t> out({n, k});
  std::int64_t* o = out.mutable_data();
  py::gil_scoped_release release;
  tt::bleu_statistics(in.hyps, in.refs, cfg, threads, o);
  return out;
}

py::array_t<std::int64_t> bleu_statistics(py::handle hyps, const py::list& refs,
                                          const std::string& tokenize, bool lowercase,
                                          int max_order, int threads) {
  const auto cfg = bleu_config(tokenize, lowercase, max_order);
  const auto in = bleu_inputs(hyps, refs, lowercase);
  return bleu_statistics_of(in, cfg, threads);
}

py::dict bleu_sentence(py::handle hyps, const py::list& refs, const std::string& tokenize,
                       bool lowercase, int max_order, const std::string& smooth,
                       std::optional<double> smooth_value, bool effective_order, int python_sum,
                       int threads) {
  const auto cfg = bleu_config(tokenize, lowercase, max_order);
  const auto opt = bleu_options(max_order, smooth, smooth_value, effective_order, python_sum);
  const auto in = bleu_inputs(hyps, refs, lowercase);
  auto stats = bleu_statistics_of(in, cfg, threads);
  const auto n = static_cast<py::ssize_t>(in.hyps.size());
  py::array_t<double> score(n), bp(n), ratio(n);
  py::array_t<double> precisions({n, static_cast<py::ssize_t>(max_order)});
  {
    double *s = score.mutable_data(), *b = bp.mutable_data(), *r = ratio.mutable_data();
    double* p = precisions.mutable_data();
    const std::int64_t* st = stats.data();
    py::gil_scoped_release release;
    tt::bleu_scores(st, static_cast<std::size_t>(n), opt, threads, s, b, r, p);
  }
  py::dict out;
  out["statistics"] = stats;
  out["score"] = score;
  out["bp"] = bp;
  out["ratio"] = ratio;
  out["precisions"] = precisions;
  return out;
}

py::dict bleu_from_statistics(Array<double> stats, int max_order, const std::string& smooth,
                              std::optional<double> smooth_value, bool effective_order,
                              int python_sum) {
  const auto opt = bleu_options(max_order, smooth, smooth_value, effective_order, python_sum);
  const auto k = static_cast<py::ssize_t>(tt::bleu_n_columns(max_order));
  if (stats.ndim() != 2 || stats.shape(1) != k) {
    throw std::invalid_argument("statistics: expected an (n, " + std::to_string(k) +
                                ") array for max_order " + std::to_string(max_order));
  }
  const py::ssize_t n = stats.shape(0);
  py::array_t<double> score(n), bp(n), ratio(n);
  py::array_t<double> precisions({n, static_cast<py::ssize_t>(max_order)});
  for (py::ssize_t i = 0; i < n; ++i) {
    const auto r =
        tt::bleu_score(stats.data() + i * k, opt, precisions.mutable_data() + i * max_order);
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
}

py::list bleu_tokenize(py::handle texts, const std::string& tokenize, bool lowercase) {
  const auto tok = parse_choice("tokenize", tokenize, kBleuTokenizers);
  const auto c = read_string_column(texts, "texts", {false, lowercase});
  py::list out;
  for (const auto& s : c.text) {
    const std::string t = tt::bleu_tokenized_string(s, tok, lowercase);
    out.append(py::reinterpret_steal<py::object>(
        PyUnicode_DecodeUTF8(t.data(), static_cast<Py_ssize_t>(t.size()), "surrogatepass")));
  }
  return out;
}

}  // namespace

void bind_text(py::module_& m) {
  m.def(
      "check",
      [](const py::list& texts, const std::string& name) { read_string_column(texts, name); },
      py::arg("texts"), py::arg("name"),
      "Raises the error the text functions raise for a bad element of texts (a missing entry: "
      "InvalidArgumentError; not a str: InvalidTypeError).");
  m.def("tokenize", &tokenize, py::arg("texts"), py::arg("name"), py::arg("tokenizer"),
        py::arg("stemmer"), py::arg("threads"),
        "Tokens of each text (rouge | unicode | whitespace tokenizer).");
  m.def("rouge", &rouge, py::arg("hyps"), py::arg("refs"), py::arg("hyp_name"),
        py::arg("ref_name"), py::arg("types"), py::arg("tokenizer"), py::arg("stemmer"),
        py::arg("threads"),
        "(precision, recall, fmeasure), each (len(types), n); type n >= 1 ROUGE-N, 0 ROUGE-L, "
        "-1 ROUGE-Lsum.");
  m.def("rouge_matrix", &rouge_matrix, py::arg("a"), py::arg("b"), py::arg("a_name"),
        py::arg("b_name"), py::arg("type"), py::arg("tokenizer"), py::arg("stemmer"),
        py::arg("threads"),
        "(precision, recall, fmeasure), each (len(a), len(b)): a[i] predicted, b[j] the target.");
  m.def("set_f1", &set_f1, py::arg("preds"), py::arg("refs"), py::arg("pred_name"),
        py::arg("ref_name"), py::arg("tokenizer"), py::arg("threads"),
        "F1 over sets of distinct tokens.");
  m.def("token_f1", &token_f1, py::arg("preds"), py::arg("refs"), py::arg("pred_name"),
        py::arg("ref_name"), py::arg("squad"), py::arg("both_empty"), py::arg("threads"),
        "SQuAD token F1 (texts already lowercased when squad=True).");
  m.def("porter_stem", &porter_stem, py::arg("words"), py::arg("mode"),
        "nltk PorterStemmer(mode).stem(word) for ASCII words (mode 'nltk' = NLTK_EXTENSIONS, "
        "'original' = ORIGINAL_ALGORITHM).");
  m.def("char_flags", &char_flags, py::arg("cps"),
        "Character-class flags of code points (see csrc/text/unicode_table.hpp).");
  m.attr("unicode_version") = tt::unicode_version();
  m.def("bleu_statistics", &bleu_statistics, py::arg("hyps"), py::arg("refs"),
        py::arg("tokenize"), py::arg("lowercase"), py::arg("max_order"), py::arg("threads"),
        "Per-item BLEU statistics (n, 2*max_order+2): matches, totals, hyp_len, ref_len.");
  m.def("bleu_sentence", &bleu_sentence, py::arg("hyps"), py::arg("refs"), py::arg("tokenize"),
        py::arg("lowercase"), py::arg("max_order"), py::arg("smooth"), py::arg("smooth_value"),
        py::arg("effective_order"), py::arg("python_sum"), py::arg("threads"),
        "Sentence BLEU of each item (sacrebleu's BLEU.sentence_score).");
  m.def("bleu_from_statistics", &bleu_from_statistics, py::arg("statistics"),
        py::arg("max_order"), py::arg("smooth"), py::arg("smooth_value"),
        py::arg("effective_order"), py::arg("python_sum"),
        "BLEU (sacrebleu's compute_bleu) of each row of (summed) statistics.");
  m.def("bleu_tokenize", &bleu_tokenize, py::arg("texts"), py::arg("tokenize"),
        py::arg("lowercase"),
        "sacrebleu's tokenizer output (tokens joined by one space) of each text.");
}

}  // namespace tb::bindings
