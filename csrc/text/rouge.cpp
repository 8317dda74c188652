#include "text/rouge.hpp"

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <memory>
#include <string>
#include <string_view>
#include <utility>

#include "common/parallel.hpp"

namespace tb::text {

namespace {

// rouge_score.scoring.fmeasure, evaluated in the same order.
inline double fmeasure(double p, double r) {
  if (p + r > 0) return 2 * p * r / (p + r);
  return 0.0;
}

inline std::uint64_t mix(std::uint64_t z) {
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

inline std::size_t popcount(std::uint64_t x) {
  return static_cast<std::size_t>(__builtin_popcountll(x));
}

inline std::size_t table_size(std::size_t n) {
  std::size_t c = 16;
  while (c < 2 * n + 2) c <<= 1;
  return c;
}

// Threads worth starting for `work` units (tokens or token pairs): one per ~8k units.
inline int workers_for(std::size_t work, std::size_t tasks, int threads) {
  const std::size_t by_work = work / 8192 + 1;
  std::size_t w = static_cast<std::size_t>(resolve_threads(threads));
  w = std::min(w, by_work);
  w = std::min(w, tasks);
  return static_cast<int>(std::max<std::size_t>(w, 1));
}

// Runs fn(i) for i in [0, n) in contiguous blocks; make() builds one scratch state per block.
template <class Make, class Fn>
void blocked_for(std::size_t n, int workers, Make&& make, Fn&& fn) {
  if (n == 0) return;
  const std::size_t n_tasks =
      workers <= 1 ? 1 : std::min<std::size_t>(n, static_cast<std::size_t>(workers) * 8);
  const std::size_t block = (n + n_tasks - 1) / n_tasks;
  parallel_for(n_tasks, workers, [&](std::size_t t) {
    const std::size_t begin = t * block;
    const std::size_t end = std::min(n, begin + block);
    if (begin >= end) return;
    auto state = make();
    for (std::size_t i = begin; i < end; ++i) fn(state, i);
  });
}

// Tokens (compared by bytes) -> dense ids 0..k-1.
class TokenIds {
 public:
  void reset(std::size_t expected) {
    const std::size_t cap = table_size(expected);
    slots_.assign(cap, -1);
    mask_ = cap - 1;
    reps_.clear();
  }

  std::uint32_t id(const Token& t) {
    for (std::size_t i = t.hash & mask_;; i = (i + 1) & mask_) {
      const std::int32_t s = slots_[i];
      if (s < 0) {
        slots_[i] = static_cast<std::int32_t>(reps_.size());
        reps_.push_back(&t);
        return static_cast<std::uint32_t>(reps_.size() - 1);
      }
      if (same_token(*reps_[static_cast<std::size_t>(s)], t)) return static_cast<std::uint32_t>(s);
    }
  }

  std::size_t size() const { return reps_.size(); }

 private:
  std::vector<std::int32_t> slots_;
  std::vector<const Token*> reps_;
  std::size_t mask_ = 0;
};

// 64-bit keys (an (n-1)-gram id and a token id) -> dense ids.
class KeyIds {
 public:
  void reset(std::size_t expected) {
    const std::size_t cap = table_size(expected);
    slots_.assign(cap, -1);
    mask_ = cap - 1;
    keys_.clear();
  }

  std::uint32_t id(std::uint64_t key) {
    for (std::size_t i = mix(key) & mask_;; i = (i + 1) & mask_) {
      const std::int32_t s = slots_[i];
      if (s < 0) {
        slots_[i] = static_cast<std::int32_t>(keys_.size());
        keys_.push_back(key);
        return static_cast<std::uint32_t>(keys_.size() - 1);
      }
      if (keys_[static_cast<std::size_t>(s)] == key) return static_cast<std::uint32_t>(s);
    }
  }

  std::size_t size() const { return keys_.size(); }

 private:
  std::vector<std::int32_t> slots_;
  std::vector<std::uint64_t> keys_;
  std::size_t mask_ = 0;
};

inline std::uint64_t gram_key(std::uint32_t prefix, std::uint32_t token) {
  return (static_cast<std::uint64_t>(prefix) << 32) | token;
}

// Bit-parallel LCS (Allison & Dix 1986; Hyyro 2004): bit j of the row vector V is 0 exactly
// where the LCS table row steps up at column j + 1, so the LCS length is the number of zero
// bits and any table entry is a prefix count of zeros.
class Lcs {
 public:
  // Sets the pattern (the table's columns) over dense ids < k.
  void set_pattern(const std::uint32_t* pat, std::size_t n, std::size_t k) {
    if (mask_of_.size() < k) mask_of_.resize(k, -1);
    pat_ = pat;
    n_pat_ = n;
    words_ = (n + 63) / 64;
    masks_.clear();
    for (std::size_t j = 0; j < n; ++j) {
      std::int32_t& m = mask_of_[pat[j]];
      if (m < 0) {
        m = static_cast<std::int32_t>(masks_.size() / words_);
        masks_.resize(masks_.size() + words_, 0);
      }
      masks_[static_cast<std::size_t>(m) * words_ + j / 64] |= 1ull << (j % 64);
    }
  }

  void clear_pattern() {
    for (std::size_t j = 0; j < n_pat_; ++j) mask_of_[pat_[j]] = -1;
    n_pat_ = 0;
  }

  // LCS length of `text` against the pattern.
  std::size_t length(const std::uint32_t* text, std::size_t n) {
    if (n_pat_ == 0 || n == 0) return 0;
    if (words_ == 1) {
      std::uint64_t v = ~0ull;
      for (std::size_t i = 0; i < n; ++i) {
        const std::int32_t m = mask_of_[text[i]];
        if (m < 0) continue;
        const std::uint64_t u = v & masks_[static_cast<std::size_t>(m)];
        v = (v + u) | (v - u);
      }
      const std::uint64_t low = n_pat_ == 64 ? ~0ull : ((1ull << n_pat_) - 1);
      return popcount(~v & low);
    }
    row_.assign(words_, ~0ull);
    for (std::size_t i = 0; i < n; ++i) {
      const std::int32_t m = mask_of_[text[i]];
      if (m >= 0) step(row_.data(), &masks_[static_cast<std::size_t>(m) * words_]);
    }
    return zeros(row_.data(), n_pat_);
  }

  // rouge-score's lcs_ind(ref, can) with ref = `ref` (rows) and can = the pattern (columns):
  // the LCS read out by _backtrack_norec; sets mark[i] = 1 for each chosen position i of ref.
  void mark_backtrack(const std::uint32_t* ref, std::size_t n_ref, std::uint8_t* mark) {
    if (n_pat_ == 0 || n_ref == 0) return;
    const std::size_t w = words_;
    rows_.assign((n_ref + 1) * w, ~0ull);
    for (std::size_t i = 1; i <= n_ref; ++i) {
      std::uint64_t* row = &rows_[i * w];
      std::memcpy(row, row - w, w * sizeof(std::uint64_t));
      const std::int32_t m = mask_of_[ref[i - 1]];
      if (m >= 0) step(row, &masks_[static_cast<std::size_t>(m) * w]);
    }
    auto table = [&](std::size_t i, std::size_t j) { return zeros(&rows_[i * w], j); };
    std::size_t i = n_ref;
    std::size_t j = n_pat_;
    while (i > 0 && j > 0) {
      if (ref[i - 1] == pat_[j - 1]) {
        mark[i - 1] = 1;
        --i;
        --j;
      } else if (table(i, j - 1) > table(i - 1, j)) {
        --j;
      } else {
        --i;
      }
    }
  }

 private:
  void step(std::uint64_t* v, const std::uint64_t* m) const {
    std::uint64_t carry = 0;
    for (std::size_t w = 0; w < words_; ++w) {
      const std::uint64_t x = v[w];
      const std::uint64_t u = x & m[w];
      const std::uint64_t s1 = x + u;
      const std::uint64_t c1 = s1 < x;
      const std::uint64_t s = s1 + carry;
      const std::uint64_t c2 = s < s1;
      carry = c1 | c2;
      v[w] = s | (x - u);
    }
  }

  // Zero bits among bits [0, j) of a row.
  static std::size_t zeros(const std::uint64_t* row, std::size_t j) {
    std::size_t ones = 0;
    const std::size_t full = j / 64;
    for (std::size_t w = 0; w < full; ++w) ones += popcount(row[w]);
    if (j % 64) ones += popcount(row[full] & ((1ull << (j % 64)) - 1));
    return j - ones;
  }

  std::vector<std::int32_t> mask_of_;
  std::vector<std::uint64_t> masks_, row_, rows_;
  const std::uint32_t* pat_ = nullptr;
  std::size_t n_pat_ = 0;
  std::size_t words_ = 1;
};

struct Prf {
  double p, r, f;
};

inline Prf ratio_score(std::size_t hits, std::size_t n_pred, std::size_t n_target) {
  // rouge-score divides by max(count, 1).
  const double p =
      static_cast<double>(hits) / static_cast<double>(std::max<std::size_t>(n_pred, 1));
  const double r =
      static_cast<double>(hits) / static_cast<double>(std::max<std::size_t>(n_target, 1));
  return {p, r, fmeasure(p, r)};
}

// Scores one (prediction, target) pair; the buffers are reused across pairs.
class PairScorer {
 public:
  // Loads a pair of token sequences, interning tokens to local ids by their bytes.
  void load(const Token* pred, std::size_t n_pred, const Token* target, std::size_t n_target) {
    pred_ = pred;
    target_ = target;
    ids_.reset(n_pred + n_target);
    hid_.resize(n_pred);
    rid_.resize(n_target);
    for (std::size_t i = 0; i < n_pred; ++i) hid_[i] = ids_.id(pred[i]);
    for (std::size_t i = 0; i < n_target; ++i) rid_[i] = ids_.id(target[i]);
    k_ = ids_.size();
    level_ = 0;
  }

  // Loads a pair whose tokens already carry global ids (dense ids < n_global).
  void load_global(const Token* pred, const std::uint32_t* gpred, std::size_t n_pred,
                   const Token* target, const std::uint32_t* gtarget, std::size_t n_target,
                   std::size_t n_global) {
    pred_ = pred;
    target_ = target;
    if (local_of_.size() < n_global) local_of_.resize(n_global, -1);
    k_ = 0;
    auto local = [&](std::uint32_t g) {
      std::int32_t& l = local_of_[g];
      if (l < 0) l = static_cast<std::int32_t>(k_++);
      return static_cast<std::uint32_t>(l);
    };
    hid_.resize(n_pred);
    rid_.resize(n_target);
    for (std::size_t i = 0; i < n_pred; ++i) hid_[i] = local(gpred[i]);
    for (std::size_t i = 0; i < n_target; ++i) rid_[i] = local(gtarget[i]);
    for (std::size_t i = 0; i < n_pred; ++i) local_of_[gpred[i]] = -1;
    for (std::size_t i = 0; i < n_target; ++i) local_of_[gtarget[i]] = -1;
    level_ = 0;
  }

  // rouge_scorer._score_ngrams(_create_ngrams(target, n), _create_ngrams(prediction, n)).
  Prf ngram(int n) {
    const auto un = static_cast<std::size_t>(n);
    if (level_ == 0 || un < level_) {
      gh_ = hid_;
      gr_ = rid_;
      kg_ = k_;
      level_ = 1;
    }
    while (level_ < un) {
      keys_.reset(gh_.size() + gr_.size());
      extend(gh_, hid_);
      extend(gr_, rid_);
      kg_ = keys_.size();
      ++level_;
    }
    cnt_h_.assign(kg_, 0);
    cnt_r_.assign(kg_, 0);
    for (auto g : gh_) ++cnt_h_[g];
    for (auto g : gr_) ++cnt_r_[g];
    std::size_t hits = 0;
    for (std::size_t g = 0; g < kg_; ++g) hits += std::min(cnt_h_[g], cnt_r_[g]);
    return ratio_score(hits, gh_.size(), gr_.size());
  }

  // rouge_scorer._score_lcs(target, prediction).
  Prf lcs() {
    if (hid_.empty() || rid_.empty()) return {0.0, 0.0, 0.0};
    const bool pred_is_pattern = hid_.size() <= rid_.size();
    const auto& pat = pred_is_pattern ? hid_ : rid_;
    const auto& text = pred_is_pattern ? rid_ : hid_;
    lcs_.set_pattern(pat.data(), pat.size(), k_);
    const std::size_t len = lcs_.length(text.data(), text.size());
    lcs_.clear_pattern();
    const double p = static_cast<double>(len) / static_cast<double>(hid_.size());
    const double r = static_cast<double>(len) / static_cast<double>(rid_.size());
    return {p, r, fmeasure(p, r)};
  }

  // rouge_scorer._summary_level_lcs over the lines of target and prediction.
  Prf lsum() {
    const std::size_t m = rid_.size();
    const std::size_t n = hid_.size();
    if (m == 0 || n == 0) return {0.0, 0.0, 0.0};
    sentences(target_, m, &rb_);
    sentences(pred_, n, &hb_);
    cnt_h_.assign(k_, 0);
    cnt_r_.assign(k_, 0);
    for (auto t : hid_) ++cnt_h_[t];
    for (auto t : rid_) ++cnt_r_[t];
    mark_.assign(m, 0);
    // The union over candidate sentences of each reference sentence's LCS positions.
    for (std::size_t c = 0; c + 1 < hb_.size(); ++c) {
      lcs_.set_pattern(hid_.data() + hb_[c], hb_[c + 1] - hb_[c], k_);
      for (std::size_t s = 0; s + 1 < rb_.size(); ++s) {
        lcs_.mark_backtrack(rid_.data() + rb_[s], rb_[s + 1] - rb_[s], mark_.data() + rb_[s]);
      }
      lcs_.clear_pattern();
    }
    std::size_t hits = 0;
    for (std::size_t i = 0; i < m; ++i) {
      if (!mark_[i]) continue;
      const auto t = rid_[i];
      if (cnt_h_[t] > 0 && cnt_r_[t] > 0) {
        ++hits;
        --cnt_h_[t];
        --cnt_r_[t];
      }
    }
    const double recall = static_cast<double>(hits) / static_cast<double>(m);
    const double precision = static_cast<double>(hits) / static_cast<double>(n);
    return {precision, recall, fmeasure(precision, recall)};
  }

  // F1 over the sets of distinct tokens.
  double set_f1() {
    cnt_h_.assign(k_, 0);
    cnt_r_.assign(k_, 0);
    std::size_t dp = 0;
    std::size_t dr = 0;
    for (auto t : hid_) dp += cnt_h_[t]++ == 0;
    for (auto t : rid_) dr += cnt_r_[t]++ == 0;
    if (dp == 0 || dr == 0) return 0.0;
    std::size_t common = 0;
    for (std::size_t t = 0; t < k_; ++t) common += cnt_h_[t] > 0 && cnt_r_[t] > 0;
    const double p = static_cast<double>(common) / static_cast<double>(dp);
    const double r = static_cast<double>(common) / static_cast<double>(dr);
    return p + r > 0 ? 2 * (p * r) / (p + r) : 0.0;
  }

  // Multiset overlap of the loaded pair (SQuAD's sum((Counter(p) & Counter(g)).values())).
  std::size_t multiset_overlap() {
    cnt_h_.assign(k_, 0);
    cnt_r_.assign(k_, 0);
    for (auto t : hid_) ++cnt_h_[t];
    for (auto t : rid_) ++cnt_r_[t];
    std::size_t same = 0;
    for (std::size_t t = 0; t < k_; ++t) same += std::min(cnt_h_[t], cnt_r_[t]);
    return same;
  }

 private:
  // Grams of length level_ + 1 from grams of length level_ (ids of `grams`) and `tokens`.
  void extend(std::vector<std::uint32_t>& grams, const std::vector<std::uint32_t>& tokens) {
    const std::size_t n_next = tokens.size() > level_ ? tokens.size() - level_ : 0;
    for (std::size_t i = 0; i < n_next; ++i) {
      grams[i] = keys_.id(gram_key(grams[i], tokens[i + level_]));
    }
    grams.resize(n_next);
  }

  static void sentences(const Token* toks, std::size_t n, std::vector<std::size_t>* bounds) {
    bounds->clear();
    bounds->push_back(0);
    for (std::size_t i = 1; i < n; ++i) {
      if (toks[i].line != toks[i - 1].line) bounds->push_back(i);
    }
    bounds->push_back(n);
  }

  const Token* pred_ = nullptr;
  const Token* target_ = nullptr;
  TokenIds ids_;
  KeyIds keys_;
  std::vector<std::int32_t> local_of_;
  std::vector<std::uint32_t> hid_, rid_, gh_, gr_, cnt_h_, cnt_r_;
  std::size_t k_ = 0;
  std::size_t kg_ = 0;
  std::size_t level_ = 0;
  Lcs lcs_;
  std::vector<std::uint8_t> mark_;
  std::vector<std::size_t> hb_, rb_;
};

inline void write(PrfOut out, std::size_t slot, const Prf& s) {
  out.precision[slot] = s.p;
  out.recall[slot] = s.r;
  out.fmeasure[slot] = s.f;
}

inline Prf score_type(PairScorer& s, int type) {
  if (type == kRougeL) return s.lcs();
  if (type == kRougeLsum) return s.lsum();
  return s.ngram(type);
}

}  // namespace

void rouge_pairs(const TokenizedTexts& texts, std::size_t n, const std::vector<int>& types,
                 int threads, PrfOut out) {
  if (types.empty()) return;
  const int workers = workers_for(texts.total_tokens() * types.size(), n, threads);
  blocked_for(
      n, workers, [] { return PairScorer(); },
      [&](PairScorer& s, std::size_t i) {
        s.load(texts.tokens(i), texts.size(i), texts.tokens(n + i), texts.size(n + i));
        for (std::size_t t = 0; t < types.size(); ++t) {
          write(out, t * n + i, score_type(s, types[t]));
        }
      });
}

void rouge_matrix(const TokenizedTexts& texts, std::size_t na, std::size_t nb, int type,
                  int threads, PrfOut out) {
  const std::size_t n_texts = na + nb;
  // Global token ids (serial; each text is tokenized once, every pair reuses them).
  std::vector<std::size_t> first(n_texts + 1, 0);
  for (std::size_t i = 0; i < n_texts; ++i) first[i + 1] = first[i] + texts.size(i);
  std::vector<std::uint32_t> gid(first[n_texts]);
  TokenIds ids;
  ids.reset(first[n_texts]);
  for (std::size_t i = 0; i < n_texts; ++i) {
    const Token* t = texts.tokens(i);
    for (std::size_t k = 0; k < texts.size(i); ++k) gid[first[i] + k] = ids.id(t[k]);
  }
  const std::size_t vocab = ids.size();
  const std::size_t avg_pair = n_texts ? 2 * first[n_texts] / n_texts : 0;
  const int workers = workers_for(na * nb * (avg_pair + 1), na * nb, threads);

  if (type >= 1) {
    // Each text's n-grams as sorted (gram id, count) runs; a pair is one merge.
    std::vector<std::uint32_t> grams(gid);
    std::vector<std::size_t> len(n_texts);
    for (std::size_t i = 0; i < n_texts; ++i) len[i] = texts.size(i);
    KeyIds keys;
    for (int level = 1; level < type; ++level) {
      keys.reset(first[n_texts]);
      for (std::size_t i = 0; i < n_texts; ++i) {
        const std::size_t n_next = len[i] > 0 ? len[i] - 1 : 0;
        for (std::size_t k = 0; k < n_next; ++k) {
          const std::size_t at = first[i] + k;
          grams[at] = keys.id(gram_key(grams[at], gid[at + static_cast<std::size_t>(level)]));
        }
        len[i] = n_next;
      }
    }
    std::vector<std::size_t> run_first(n_texts + 1, 0);
    std::vector<std::pair<std::uint32_t, std::uint32_t>> runs;
    runs.reserve(first[n_texts]);
    std::vector<std::uint32_t> tmp;
    for (std::size_t i = 0; i < n_texts; ++i) {
      tmp.assign(grams.begin() + static_cast<std::ptrdiff_t>(first[i]),
                 grams.begin() + static_cast<std::ptrdiff_t>(first[i] + len[i]));
      std::sort(tmp.begin(), tmp.end());
      for (std::size_t k = 0; k < tmp.size();) {
        std::size_t e = k;
        while (e < tmp.size() && tmp[e] == tmp[k]) ++e;
        runs.emplace_back(tmp[k], static_cast<std::uint32_t>(e - k));
        k = e;
      }
      run_first[i + 1] = runs.size();
    }
    blocked_for(
        na * nb, workers, [] { return 0; },
        [&](int&, std::size_t idx) {
          const std::size_t i = idx / nb;
          const std::size_t j = idx % nb;
          const auto* a = runs.data() + run_first[i];
          const auto* a1 = runs.data() + run_first[i + 1];
          const auto* b = runs.data() + run_first[na + j];
          const auto* b1 = runs.data() + run_first[na + j + 1];
          std::size_t hits = 0;
          while (a != a1 && b != b1) {
            if (a->first < b->first) {
              ++a;
            } else if (b->first < a->first) {
              ++b;
            } else {
              hits += std::min(a->second, b->second);
              ++a;
              ++b;
            }
          }
          write(out, idx, ratio_score(hits, len[i], len[na + j]));
        });
    return;
  }
  blocked_for(
      na * nb, workers, [] { return PairScorer(); },
      [&](PairScorer& s, std::size_t idx) {
        const std::size_t i = idx / nb;
        const std::size_t b = na + idx % nb;
        s.load_global(texts.tokens(i), gid.data() + first[i], texts.size(i), texts.tokens(b),
                      gid.data() + first[b], texts.size(b), vocab);
        write(out, idx, score_type(s, type));
      });
}

void set_f1(const TokenizedTexts& texts, std::size_t n, int threads, double* out) {
  const int workers = workers_for(texts.total_tokens(), n, threads);
  blocked_for(
      n, workers, [] { return PairScorer(); },
      [&](PairScorer& s, std::size_t i) {
        s.load(texts.tokens(i), texts.size(i), texts.tokens(n + i), texts.size(n + i));
        out[i] = s.set_f1();
      });
}

void token_f1(const std::vector<Utf8>& preds, const std::vector<Utf8>& refs,
              bool squad_normalize, double both_empty, int threads, double* out) {
  const std::size_t n = preds.size();
  std::size_t bytes = 0;
  for (std::size_t i = 0; i < n; ++i) bytes += preds[i].size + refs[i].size;
  const int workers = workers_for(bytes / 4, n, threads);
  struct State {
    PairScorer scorer;
    std::string buf_p, buf_r;
    std::vector<std::string_view> vp, vr;
    std::vector<Token> tp, tr;
  };
  auto split = [&](const Utf8& text, std::string& buf, std::vector<std::string_view>& views) {
    if (squad_normalize) {
      squad_tokens(text.data, text.size, buf, views);
      return;
    }
    whitespace_split(text.data, text.size, views);
  };
  auto to_tokens = [](const std::vector<std::string_view>& views, std::vector<Token>& toks) {
    toks.resize(views.size());
    for (std::size_t k = 0; k < views.size(); ++k) {
      toks[k] = Token{hash_bytes(views[k].data(), views[k].size()), views[k].data(),
                      static_cast<std::uint32_t>(views[k].size()), 0};
    }
  };
  blocked_for(
      n, workers, [] { return std::make_unique<State>(); },
      [&](std::unique_ptr<State>& st, std::size_t i) {
        split(preds[i], st->buf_p, st->vp);
        split(refs[i], st->buf_r, st->vr);
        if (st->vp.empty() || st->vr.empty()) {
          out[i] = st->vp.empty() && st->vr.empty() ? both_empty : 0.0;
          return;
        }
        to_tokens(st->vp, st->tp);
        to_tokens(st->vr, st->tr);
        st->scorer.load(st->tp.data(), st->tp.size(), st->tr.data(), st->tr.size());
        const std::size_t same = st->scorer.multiset_overlap();
        if (same == 0) {
          out[i] = 0.0;
          return;
        }
        const double p = static_cast<double>(same) / static_cast<double>(st->tp.size());
        const double r = static_cast<double>(same) / static_cast<double>(st->tr.size());
        out[i] = (2 * p * r) / (p + r);
      });
}

}  // namespace tb::text
