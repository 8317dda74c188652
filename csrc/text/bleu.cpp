#include "bleu.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <stdexcept>
#include <utility>

#include "common/parallel.hpp"

namespace tb::text {
namespace {

constexpr std::uint32_t kNone = std::numeric_limits<std::uint32_t>::max();

// A hash of a short byte string. The words it mixes determine the bytes uniquely for a given
// length (overlapping loads for the tail, as in wyhash), and the length is mixed in; equality
// is always checked on the bytes anyway.
inline std::uint64_t token_hash(const char* p, std::size_t n) {
  std::uint64_t h = 0x9E3779B97F4A7C15ull * (n + 1);
  while (n >= 8) {
    std::uint64_t w;
    std::memcpy(&w, p, 8);
    h = (h ^ w) * 0xBF58476D1CE4E5B9ull;
    h ^= h >> 29;
    p += 8;
    n -= 8;
  }
  std::uint64_t w = 0;
  if (n >= 4) {
    std::uint32_t a, b;
    std::memcpy(&a, p, 4);
    std::memcpy(&b, p + n - 4, 4);
    w = a | (static_cast<std::uint64_t>(b) << 32);
  } else if (n > 0) {
    const auto* u = reinterpret_cast<const unsigned char*>(p);
    w = (static_cast<std::uint64_t>(u[0]) << 16) | (static_cast<std::uint64_t>(u[n >> 1]) << 8) |
        u[n - 1];
  }
  h = (h ^ w) * 0x94D049BB133111EBull;
  h ^= h >> 31;
  h *= 0xD6E8FEB86659FD93ull;
  return h ^ (h >> 32);
}

// Power-of-two table size for `expected` keys (load factor <= 1/2).
inline std::size_t table_capacity(std::size_t expected) {
  std::size_t cap = 16;
  while (cap < 2 * expected) cap <<= 1;
  return cap;
}

// Open-addressing tables are cleared by bumping a generation stamp, not by refilling: a slot is
// occupied iff its stamp equals the current generation. Storage only grows; each reset uses the
// first table_capacity(expected) slots, so small items stay cache-resident after a large one.
template <class Slot>
class StampedTable {
 public:
  void reset(std::size_t expected) {
    const std::size_t cap = table_capacity(expected);
    if (slots_.size() < cap) {
      slots_.assign(cap, Slot{});
      gen_ = 0;
    }
    if (++gen_ == 0) {  // wrapped: clear the stamps once
      for (auto& s : slots_) s.gen = 0;
      gen_ = 1;
    }
    mask_ = cap - 1;
  }

 protected:
  std::vector<Slot> slots_;
  std::size_t mask_ = 0;
  std::uint32_t gen_ = 0;
};

struct TokenSlot {
  std::uint64_t hash = 0;
  const char* data = nullptr;
  std::uint32_t len = 0;
  std::uint32_t id = 0;
  std::uint32_t gen = 0;
};

// Token bytes -> dense ids; the keys are views that must outlive the current generation.
class TokenMap : public StampedTable<TokenSlot> {
 public:
  // The id of `t`, inserting it with id `next` if absent.
  std::uint32_t intern(std::string_view t, std::uint32_t next) {
    const std::uint64_t h = token_hash(t.data(), t.size());
    for (std::size_t i = h & mask_;; i = (i + 1) & mask_) {
      TokenSlot& s = slots_[i];
      if (s.gen != gen_) {
        s = TokenSlot{h, t.data(), static_cast<std::uint32_t>(t.size()), next, gen_};
        return next;
      }
      if (s.hash == h && equal(s, t)) return s.id;
    }
  }
  std::uint32_t find(std::string_view t) const {
    const std::uint64_t h = token_hash(t.data(), t.size());
    for (std::size_t i = h & mask_;; i = (i + 1) & mask_) {
      const TokenSlot& s = slots_[i];
      if (s.gen != gen_) return kNone;
      if (s.hash == h && equal(s, t)) return s.id;
    }
  }

 private:
  static bool equal(const TokenSlot& s, std::string_view t) {
    return s.len == t.size() && std::memcmp(s.data, t.data(), t.size()) == 0;
  }
};

struct PairSlot {
  std::uint64_t key = 0;
  std::uint32_t id = 0;
  std::uint32_t gen = 0;
};

// (prefix n-gram id, token id) -> dense n-gram id. Ids are unique across orders, so the pair
// identifies an n-gram exactly (no hashing of token tuples, no collisions).
class PairMap : public StampedTable<PairSlot> {
 public:
  static std::uint64_t key(std::uint32_t prefix, std::uint32_t token) {
    return (static_cast<std::uint64_t>(prefix) << 32) | token;
  }
  std::uint32_t intern(std::uint64_t k, std::uint32_t next) {
    for (std::size_t i = slot(k);; i = (i + 1) & mask_) {
      PairSlot& s = slots_[i];
      if (s.gen != gen_) {
        s = PairSlot{k, next, gen_};
        return next;
      }
      if (s.key == k) return s.id;
    }
  }
  std::uint32_t find(std::uint64_t k) const {
    for (std::size_t i = slot(k);; i = (i + 1) & mask_) {
      const PairSlot& s = slots_[i];
      if (s.gen != gen_) return kNone;
      if (s.key == k) return s.id;
    }
  }

 private:
  std::size_t slot(std::uint64_t k) const {
    std::uint64_t h = k * 0x9E3779B97F4A7C15ull;
    return static_cast<std::size_t>(h ^ (h >> 32)) & mask_;
  }
};

// Per-task scratch, reused across the items of a task.
struct Work {
  BleuTokenizerScratch hyp_scratch, ref_scratch;
  std::vector<std::string_view> tokens;
  TokenMap tokens_map;
  PairMap ngram_map;
  std::vector<std::uint32_t> hyp_tok, ref_tok, prev, cur;
  std::vector<std::uint32_t> order_begin;  // ids of order n are [order_begin[n-1], order_begin[n])
  std::vector<std::uint32_t> hyp_count, ref_max, ref_count, touched;
  std::vector<std::int64_t> ref_lens;
};

// sacrebleu's BLEU._get_closest_ref_len: the closest length, ties to the shorter reference.
std::int64_t closest_ref_len(std::int64_t hyp_len, const std::vector<std::int64_t>& lens) {
  std::int64_t best_diff = -1, best = -1;
  for (const std::int64_t r : lens) {
    const std::int64_t diff = hyp_len > r ? hyp_len - r : r - hyp_len;
    if (best_diff == -1 || diff < best_diff) {
      best_diff = diff;
      best = r;
    } else if (diff == best_diff && r < best) {
      best = r;
    }
  }
  return best;
}

void item_statistics(std::size_t i, const TextColumn& hyps, const std::vector<TextColumn>& refs,
                     const BleuConfig& cfg, Work& w, std::int64_t* row) {
  const int order = cfg.max_order;
  auto& toks = w.tokens;
  bleu_tokenize(hyps.text[i], cfg.tokenizer, cfg.lowercase, w.hyp_scratch, toks);
  const std::size_t len = toks.size();

  // Hypothesis: token ids, then n-gram ids order by order, counting each id.
  w.tokens_map.reset(len);
  w.hyp_tok.resize(len);
  std::uint32_t next = 0;
  for (std::size_t j = 0; j < len; ++j) {
    const std::uint32_t id = w.tokens_map.intern(toks[j], next);
    if (id == next) ++next;
    w.hyp_tok[j] = id;
  }
  w.hyp_count.assign(next, 0);
  for (std::size_t j = 0; j < len; ++j) ++w.hyp_count[w.hyp_tok[j]];
  w.order_begin.assign(static_cast<std::size_t>(order) + 1, next);
  w.order_begin[0] = 0;
  w.ngram_map.reset(len * static_cast<std::size_t>(order > 1 ? order - 1 : 0));
  w.prev.assign(w.hyp_tok.begin(), w.hyp_tok.end());
  w.cur.resize(len);
  for (int n = 2; n <= order && static_cast<std::size_t>(n) <= len; ++n) {
    const std::size_t m = len - static_cast<std::size_t>(n) + 1;
    for (std::size_t j = 0; j < m; ++j) {
      const std::uint64_t k = PairMap::key(w.prev[j], w.hyp_tok[j + n - 1]);
      const std::uint32_t id = w.ngram_map.intern(k, next);
      if (id == next) {
        ++next;
        w.hyp_count.push_back(0);
      }
      ++w.hyp_count[id];
      w.cur[j] = id;
    }
    std::swap(w.prev, w.cur);
    w.order_begin[n] = next;
  }
  for (int n = 1; n <= order; ++n) {
    if (w.order_begin[n] < w.order_begin[n - 1]) w.order_begin[n] = w.order_begin[n - 1];
  }

  // References: look their n-grams up among the hypothesis's (others can never match); the
  // clipping count is the maximum over references (sacrebleu merges reference Counters by max).
  w.ref_max.assign(next, 0);
  w.ref_count.assign(next, 0);
  w.ref_lens.clear();
  bool first = true;
  for (const TextColumn& stream : refs) {
    if (!stream.has(i)) continue;
    bleu_tokenize(stream.text[i], cfg.tokenizer, cfg.lowercase, w.ref_scratch, toks);
    const std::size_t rlen = toks.size();
    w.ref_lens.push_back(static_cast<std::int64_t>(rlen));
    if (next == 0) continue;
    std::uint32_t* target = first ? w.ref_max.data() : w.ref_count.data();
    auto bump = [&](std::uint32_t id) {
      if (!first && target[id] == 0) w.touched.push_back(id);
      ++target[id];
    };
    w.ref_tok.resize(rlen);
    bool any = false;
    for (std::size_t j = 0; j < rlen; ++j) {
      const std::uint32_t id = w.tokens_map.find(toks[j]);
      w.ref_tok[j] = id;
      if (id != kNone) {
        bump(id);
        any = true;
      }
    }
    w.prev.assign(w.ref_tok.begin(), w.ref_tok.end());
    w.cur.resize(rlen);
    for (int n = 2; n <= order && any && static_cast<std::size_t>(n) <= rlen; ++n) {
      if (w.order_begin[n] == w.order_begin[n - 1]) break;  // no hypothesis n-grams
      any = false;
      const std::size_t m = rlen - static_cast<std::size_t>(n) + 1;
      for (std::size_t j = 0; j < m; ++j) {
        const std::uint32_t a = w.prev[j], b = w.ref_tok[j + n - 1];
        std::uint32_t id = kNone;
        if (a != kNone && b != kNone) id = w.ngram_map.find(PairMap::key(a, b));
        w.cur[j] = id;
        if (id != kNone) {
          bump(id);
          any = true;
        }
      }
      std::swap(w.prev, w.cur);
    }
    if (!first) {
      for (const std::uint32_t id : w.touched) {
        w.ref_max[id] = std::max(w.ref_max[id], w.ref_count[id]);
        w.ref_count[id] = 0;
      }
      w.touched.clear();
    }
    first = false;
  }
  if (w.ref_lens.empty()) {
    throw std::invalid_argument("item " + std::to_string(i) + " has no reference");
  }

  for (int n = 1; n <= order; ++n) {
    std::int64_t matches = 0;
    for (std::uint32_t id = w.order_begin[n - 1]; id < w.order_begin[n]; ++id) {
      matches += std::min(w.hyp_count[id], w.ref_max[id]);
    }
    row[n - 1] = matches;
    row[order + n - 1] =
        len >= static_cast<std::size_t>(n) ? static_cast<std::int64_t>(len) - n + 1 : 0;
  }
  row[2 * order] = static_cast<std::int64_t>(len);
  row[2 * order + 1] = closest_ref_len(static_cast<std::int64_t>(len), w.ref_lens);
}

// One term of sacrebleu's `sum([my_log(p) for p in precisions[:eff_order]])`: my_log returns
// the int -9999999999 for a zero precision and math.log(p) otherwise.
constexpr double kLogZero = -9999999999.0;

// Python's built-in sum() of those terms (start 0), for the given CPython summation rule.
double python_sum_of_logs(const double* p, int count, PySum rule) {
  if (rule == PySum::kSequential) {
    double s = 0.0;
    for (int j = 0; j < count; ++j) s += p[j] == 0.0 ? kLogZero : std::log(p[j]);
    return s;
  }
  // CPython >= 3.12: a leading run of ints is summed exactly as integers; the first float is
  // added to it plainly; later floats use Neumaier's compensation, ints are added plainly; the
  // compensation is added at the end when it is non-zero and finite.
  int j = 0;
  double f = 0.0;  // exact: the int run is a small multiple of 9999999999
  while (j < count && p[j] == 0.0) {
    f += kLogZero;
    ++j;
  }
  if (j == count) return f;
  f = f + std::log(p[j++]);
  double c = 0.0;
  for (; j < count; ++j) {
    if (p[j] == 0.0) {
      f += kLogZero;
      continue;
    }
    const double x = std::log(p[j]);
    const double t = f + x;
    if (std::fabs(f) >= std::fabs(x)) {
      c += (f - t) + x;
    } else {
      c += (x - t) + f;
    }
    f = t;
  }
  if (c != 0.0 && std::isfinite(c)) f += c;
  return f;
}

}  // namespace

void bleu_statistics(const TextColumn& hyps, const std::vector<TextColumn>& refs,
                     const BleuConfig& config, int threads, std::int64_t* out) {
  if (config.max_order < 1) throw std::invalid_argument("max_order must be >= 1");
  for (const auto& r : refs) {
    if (r.size() != hyps.size()) {
      throw std::invalid_argument("every reference stream needs one entry per hypothesis");
    }
  }
  const std::size_t n = hyps.size();
  const std::size_t k = bleu_n_columns(config.max_order);
  constexpr std::size_t kChunk = 64;
  const std::size_t tasks = (n + kChunk - 1) / kChunk;
  parallel_for(tasks, threads, [&](std::size_t t) {
    Work w;
    const std::size_t end = std::min(n, (t + 1) * kChunk);
    for (std::size_t i = t * kChunk; i < end; ++i) {
      item_statistics(i, hyps, refs, config, w, out + i * k);
    }
  });
}

double bleu_default_smooth_value(BleuSmooth smooth) {
  switch (smooth) {
    case BleuSmooth::kFloor:
      return 0.1;
    case BleuSmooth::kAddK:
      return 1.0;
    default:
      return std::numeric_limits<double>::quiet_NaN();
  }
}

BleuScoreParts bleu_score(const double* stats, const BleuScoreOptions& o, double* precisions) {
  const int order = o.max_order;
  const double* correct = stats;
  const double* total = stats + order;
  const double sys_len = stats[2 * order];
  const double ref_len = stats[2 * order + 1];
  BleuScoreParts r;
  r.bp = 1.0;
  if (sys_len < ref_len) r.bp = sys_len > 0 ? std::exp(1.0 - ref_len / sys_len) : 0.0;
  r.ratio = ref_len != 0.0 ? sys_len / ref_len : 0.0;

  constexpr int kStack = 32;
  double stack[kStack];
  std::vector<double> heap;
  double* p = stack;
  if (order > kStack) {
    heap.resize(static_cast<std::size_t>(order));
    p = heap.data();
  }
  std::fill(p, p + order, 0.0);
  bool any = false;
  for (int n = 0; n < order; ++n) any |= correct[n] != 0.0;
  if (any) {
    double smooth_mteval = 1.0;
    int eff_order = order;
    for (int n = 1; n <= order; ++n) {
      double c = correct[n - 1], t = total[n - 1];
      if (o.smooth == BleuSmooth::kAddK && n > 1) {
        c += o.smooth_value;
        t += o.smooth_value;
      }
      if (t == 0.0) break;
      if (o.effective_order) eff_order = n;
      if (c == 0.0) {
        if (o.smooth == BleuSmooth::kExp) {
          smooth_mteval *= 2.0;
          p[n - 1] = 100.0 / (smooth_mteval * t);
        } else if (o.smooth == BleuSmooth::kFloor) {
          p[n - 1] = 100.0 * o.smooth_value / t;
        }
      } else {
        p[n - 1] = 100.0 * c / t;
      }
    }
    const double s = python_sum_of_logs(p, eff_order, o.sum);
    r.score = r.bp * std::exp(s / static_cast<double>(eff_order));
  }
  if (precisions) std::copy(p, p + order, precisions);
  return r;
}

void bleu_scores(const std::int64_t* stats, std::size_t n, const BleuScoreOptions& options,
                 int threads, double* score, double* bp, double* ratio, double* precisions) {
  const std::size_t k = bleu_n_columns(options.max_order);
  const std::size_t order = static_cast<std::size_t>(options.max_order);
  constexpr std::size_t kChunk = 1024;
  parallel_for((n + kChunk - 1) / kChunk, threads, [&](std::size_t t) {
    std::vector<double> row(k);
    const std::size_t end = std::min(n, (t + 1) * kChunk);
    for (std::size_t i = t * kChunk; i < end; ++i) {
      for (std::size_t j = 0; j < k; ++j) row[j] = static_cast<double>(stats[i * k + j]);
      const BleuScoreParts r = bleu_score(row.data(), options, precisions + i * order);
      score[i] = r.score;
      bp[i] = r.bp;
      ratio[i] = r.ratio;
    }
  });
}

}  // namespace tb::text
