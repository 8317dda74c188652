// ROUGE-N, ROUGE-L and ROUGE-Lsum exactly as rouge-score 0.1.2 computes them
// (rouge_score/rouge_scorer.py; Lin 2004, "ROUGE: A Package for Automatic Evaluation of
// Summaries"), plus SQuAD token F1 and set-of-tokens F1, over tokenized texts.
//
// Bitwise equality with rouge-score: counts are integers, precision/recall are one correctly
// rounded division of two integers (Python's int / int), and the F-measure is evaluated as
// 2 * p * r / (p + r) in that order (0 when p + r == 0), as rouge_score/scoring.py does.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include "text/rouge_tokenize.hpp"

namespace tb::text {

// A ROUGE variant: n >= 1 is ROUGE-N; kRougeL is sentence-level LCS ("rougeL"); kRougeLsum is
// summary-level union LCS over lines ("rougeLsum").
inline constexpr int kRougeL = 0;
inline constexpr int kRougeLsum = -1;

// Output slots: precision, recall and F-measure, each of the same length.
struct PrfOut {
  double* precision;
  double* recall;
  double* fmeasure;
};

// Texts [0, n) of `texts` are predictions and [n, 2n) their targets. For type t (index into
// `types`) and pair i, writes slot t * n + i.
void rouge_pairs(const TokenizedTexts& texts, std::size_t n, const std::vector<int>& types,
                 int threads, PrfOut out);

// Texts [0, na) are predictions a, [na, na + nb) targets b. Writes slot i * nb + j with the
// score of a[i] (prediction) against b[j] (target).
void rouge_matrix(const TokenizedTexts& texts, std::size_t na, std::size_t nb, int type,
                  int threads, PrfOut out);

// F1 over sets of distinct tokens (RadA-BenchPlat's final-response F1): 0 when either side has
// no tokens. Texts [0, n) are predictions, [n, 2n) references.
void set_f1(const TokenizedTexts& texts, std::size_t n, int threads, double* out);

// SQuAD token F1 (multiset overlap). `squad_normalize` applies normalize_answer to already
// lowercased texts; otherwise tokens are str.split() of the raw text. `both_empty` is returned
// when both sides have no tokens (SQuAD v2.0: 1.0, v1.1: 0.0); one empty side gives 0.
void token_f1(const std::vector<Utf8>& preds, const std::vector<Utf8>& refs,
              bool squad_normalize, double both_empty, int threads, double* out);

}  // namespace tb::text
