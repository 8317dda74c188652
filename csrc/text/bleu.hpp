// BLEU (Papineni et al. 2002) exactly as sacrebleu 2.x computes it (sacrebleu/metrics/bleu.py).
//
// Per-item sufficient statistics, in the column order used everywhere in tumorboard:
//   [matches_1 .. matches_N, totals_1 .. totals_N, hyp_len, ref_len]      (N = max_order)
// matches_n: clipped n-gram matches (hypothesis count clipped by the maximum count over the
// references), totals_n: hypothesis n-grams of order n, hyp_len: hypothesis tokens, ref_len: the
// length of the reference closest to hyp_len (ties to the shorter one). (sacrebleu itself keeps
// [hyp_len, ref_len, matches..., totals...].) Corpus BLEU is bleu_score() of the column sums.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "bleu_tokenize.hpp"

namespace tb::text {

// A column of UTF-8 strings. `present` (empty = all present) marks missing entries: sacrebleu
// accepts None in reference streams to give items different numbers of references.
struct TextColumn {
  std::vector<std::string_view> text;
  std::vector<std::uint8_t> present;
  std::size_t size() const { return text.size(); }
  bool has(std::size_t i) const { return present.empty() || present[i] != 0; }
};

struct BleuConfig {
  BleuTokenizer tokenizer = BleuTokenizer::k13a;
  bool lowercase = false;  // lowers ASCII letters; non-ASCII text must come lowered
  int max_order = 4;
};

inline std::size_t bleu_n_columns(int max_order) {
  return 2 * static_cast<std::size_t>(max_order) + 2;
}

// Writes hyps.size() rows of bleu_n_columns(max_order) statistics to `out` (row-major).
// `refs` holds reference streams: refs[k].text[i] is the k-th reference of item i. Every item
// needs at least one present reference (std::invalid_argument otherwise). Items run in
// parallel on `threads` threads (<= 0: all cores); the output does not depend on the count.
void bleu_statistics(const TextColumn& hyps, const std::vector<TextColumn>& refs,
                     const BleuConfig& config, int threads, std::int64_t* out);

enum class BleuSmooth : int { kNone = 0, kFloor = 1, kAddK = 2, kExp = 3 };

// sacrebleu's SMOOTH_DEFAULTS: floor 0.1, add-k 1; NaN for methods without a value.
double bleu_default_smooth_value(BleuSmooth smooth);

// How Python's built-in sum() adds the log precisions: CPython <= 3.11 adds left to right;
// CPython >= 3.12 uses Neumaier compensated summation for float items (int items, here the
// -9999999999 that sacrebleu's my_log returns for a zero precision, are added uncompensated).
enum class PySum : int { kSequential = 0, kNeumaier = 1 };

struct BleuScoreOptions {
  BleuSmooth smooth = BleuSmooth::kExp;
  double smooth_value = 0.0;  // already resolved (no NaN)
  bool effective_order = false;
  int max_order = 4;
  PySum sum = PySum::kSequential;
};

struct BleuScoreParts {
  double score = 0.0;  // 0-100
  double bp = 0.0;
  double ratio = 0.0;
};

// sacrebleu's BLEU.compute_bleu on statistics in the column order above (doubles, so that the
// bootstrap engine's weighted sums can be passed directly; integer counts are exact below 2^53).
// `precisions` (max_order doubles, may be null) receives sacrebleu's precisions (0-100).
// The operations are those of sacrebleu, in the same order, in IEEE double: the result is
// bitwise identical to sacrebleu's float.
BleuScoreParts bleu_score(const double* stats, const BleuScoreOptions& options,
                          double* precisions);

// bleu_score of each of n rows of integer statistics (sentence BLEU); outputs have n entries
// (precisions: n x max_order). Rows run in parallel on `threads` threads.
void bleu_scores(const std::int64_t* stats, std::size_t n, const BleuScoreOptions& options,
                 int threads, double* score, double* bp, double* ratio, double* precisions);

}  // namespace tb::text
