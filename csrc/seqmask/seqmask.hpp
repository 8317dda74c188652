// Segment ids from token ids: multi-pattern marker matching over a variable-length batch.
//
// The markers ("Thought:", "Action:", "Action Input:", "Observation:" as token-id sequences, each
// possibly in several tokenizations) are matched in one left-to-right pass per sequence with an
// Aho-Corasick automaton over token ids (Aho & Corasick, CACM 18(6), 1975). Overlapping
// occurrences are resolved leftmost-longest (POSIX semantics), so "Action Input:" is never taken
// for "Action:" or for any other marker that is a prefix, suffix or infix of it.
//
// Each kept occurrence opens a span that runs to the next kept occurrence or to the end of the
// sequence; a pattern with label 0 (e.g. "Observation:") closes the open span. LAMMI-Pathology
// (arXiv 2602.18773, its training figure) labels: 0 none, 1 thought, 2 action, 3 action
// input. The marker tokens themselves get the span's label when `mark_markers` is set, else 0.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace tb::seqmask {

class MarkerMatcher {
 public:
  // patterns: the token ids of all patterns concatenated; pattern_offsets: [n_patterns + 1];
  // labels: [n_patterns], each in [0, 127]. Empty patterns are rejected (std::invalid_argument).
  MarkerMatcher(const std::int64_t* patterns, const std::int64_t* pattern_offsets,
                std::size_t n_patterns, const std::int8_t* labels);

  std::size_t n_states() const { return nodes_.size(); }

  // seg[t] for t in [offsets[0], offsets[n_seq]); ids and seg are indexed alike, offsets are
  // non-decreasing and within the arrays (validated by the caller). Sequences are processed in parallel, each writes only its own slice.
  void segment_ids(const std::int64_t* ids, const std::int64_t* offsets, std::size_t n_seq,
                   bool mark_markers, std::int8_t* seg, int threads) const;
  void segment_ids(const std::int32_t* ids, const std::int64_t* offsets, std::size_t n_seq,
                   bool mark_markers, std::int8_t* seg, int threads) const;

 private:
  struct Node {
    std::vector<std::pair<std::int64_t, std::int32_t>> next;  // sorted by token id
    std::int32_t fail = 0;
    std::int32_t out = -1;       // longest pattern ending here (index into lengths_/labels_)
    std::int32_t dict_link = -1;  // nearest state on the failure chain that ends a pattern
  };
  std::int32_t child(std::int32_t state, std::int64_t token) const;
  std::int32_t step(std::int32_t state, std::int64_t token) const;
  template <class Id>
  void run_one(const Id* ids, std::int64_t n, bool mark_markers, std::int8_t* seg) const;
  template <class Id>
  void run(const Id* ids, const std::int64_t* offsets, std::size_t n_seq, bool mark_markers,
           std::int8_t* seg, int threads) const;

  std::vector<Node> nodes_;
  std::vector<std::int64_t> lengths_;
  std::vector<std::int8_t> labels_;
};

}  // namespace tb::seqmask
