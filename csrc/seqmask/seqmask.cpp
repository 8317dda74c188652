#include "seqmask/seqmask.hpp"

#include <algorithm>
#include <deque>
#include <stdexcept>
#include <string>

#include "common/parallel.hpp"

namespace tb::seqmask {

MarkerMatcher::MarkerMatcher(const std::int64_t* patterns, const std::int64_t* pattern_offsets,
                             std::size_t n_patterns, const std::int8_t* labels) {
  nodes_.emplace_back();
  for (std::size_t p = 0; p < n_patterns; ++p) {
    const std::int64_t b = pattern_offsets[p], e = pattern_offsets[p + 1];
    if (e <= b) throw std::invalid_argument("marker pattern " + std::to_string(p) + " is empty");
    if (labels[p] < 0) throw std::invalid_argument("marker labels must be >= 0");
    std::int32_t s = 0;
    for (std::int64_t i = b; i < e; ++i) {
      std::int32_t c = child(s, patterns[i]);
      if (c < 0) {
        c = static_cast<std::int32_t>(nodes_.size());
        auto& nx = nodes_[s].next;
        auto it = std::lower_bound(nx.begin(), nx.end(), patterns[i],
                                   [](const auto& a, std::int64_t t) { return a.first < t; });
        nx.insert(it, {patterns[i], c});
        nodes_.emplace_back();
      }
      s = c;
    }
    // Duplicate patterns: the first one's label wins (the Python side deduplicates anyway).
    if (nodes_[s].out < 0) {
      nodes_[s].out = static_cast<std::int32_t>(lengths_.size());
      lengths_.push_back(e - b);
      labels_.push_back(labels[p]);
    }
  }
  // Breadth-first failure links; a state's dictionary link is the nearest state on its failure
  // chain that ends a pattern (itself excluded).
  std::deque<std::int32_t> queue;
  for (const auto& [tok, c] : nodes_[0].next) {
    nodes_[c].fail = 0;
    queue.push_back(c);
  }
  while (!queue.empty()) {
    const std::int32_t s = queue.front();
    queue.pop_front();
    for (const auto& [tok, c] : nodes_[s].next) {
      std::int32_t f = nodes_[s].fail;
      while (f != 0 && child(f, tok) < 0) f = nodes_[f].fail;
      const std::int32_t fc = child(f, tok);
      nodes_[c].fail = (fc >= 0 && fc != c) ? fc : 0;
      const std::int32_t ff = nodes_[c].fail;
      nodes_[c].dict_link = nodes_[ff].out >= 0 ? ff : nodes_[ff].dict_link;
      queue.push_back(c);
    }
  }
}

std::int32_t MarkerMatcher::child(std::int32_t state, std::int64_t token) const {
  const auto& nx = nodes_[state].next;
  auto it = std::lower_bound(nx.begin(), nx.end(), token,
                             [](const auto& a, std::int64_t t) { return a.first < t; });
  return (it != nx.end() && it->first == token) ? it->second : -1;
}

std::int32_t MarkerMatcher::step(std::int32_t state, std::int64_t token) const {
  for (;;) {
    const std::int32_t c = child(state, token);
    if (c >= 0) return c;
    if (state == 0) return 0;
    state = nodes_[state].fail;
  }
}

namespace {
struct Occurrence {
  std::int64_t start, end;  // [start, end)
  std::int8_t label;
};
}  // namespace

template <class Id>
void MarkerMatcher::run_one(const Id* ids, std::int64_t n, bool mark_markers,
                            std::int8_t* seg) const {
  if (n <= 0) return;
  // Pass 1: every occurrence of every pattern (Aho-Corasick), as (start, end, label).
  std::vector<Occurrence> occ;
  std::int32_t s = 0;
  for (std::int64_t t = 0; t < n; ++t) {
    s = step(s, static_cast<std::int64_t>(ids[t]));
    for (std::int32_t o = nodes_[s].out >= 0 ? s : nodes_[s].dict_link; o >= 0;
         o = nodes_[o].dict_link) {
      const std::int32_t p = nodes_[o].out;
      occ.push_back({t + 1 - lengths_[p], t + 1, labels_[p]});
    }
  }
  // Pass 2 over the (few) occurrences: leftmost-longest, non-overlapping selection.
  std::stable_sort(occ.begin(), occ.end(), [](const Occurrence& a, const Occurrence& b) {
    return a.start != b.start ? a.start < b.start : a.end > b.end;
  });
  std::fill(seg, seg + n, std::int8_t{0});
  std::int64_t covered = 0;  // end of the last kept occurrence
  const Occurrence* open = nullptr;
  auto close_span = [&](std::int64_t until) {
    if (open == nullptr || open->label == 0) return;
    const std::int64_t from = mark_markers ? open->start : open->end;
    std::fill(seg + from, seg + until, open->label);
  };
  for (const auto& o : occ) {
    if (o.start < covered) continue;
    close_span(o.start);
    open = &o;
    covered = o.end;
  }
  close_span(n);
}

template <class Id>
void MarkerMatcher::run(const Id* ids, const std::int64_t* offsets, std::size_t n_seq,
                        bool mark_markers, std::int8_t* seg, int threads) const {
  tb::parallel_for(n_seq, threads, [&](std::size_t i) {
    const std::int64_t b = offsets[i], e = offsets[i + 1];
    run_one(ids + b, e - b, mark_markers, seg + b);
  });
}

void MarkerMatcher::segment_ids(const std::int64_t* ids, const std::int64_t* offsets,
                                std::size_t n_seq, bool mark_markers, std::int8_t* seg,
                                int threads) const {
  run(ids, offsets, n_seq, mark_markers, seg, threads);
}

void MarkerMatcher::segment_ids(const std::int32_t* ids, const std::int64_t* offsets,
                                std::size_t n_seq, bool mark_markers, std::int8_t* seg,
                                int threads) const {
  run(ids, offsets, n_seq, mark_markers, seg, threads);
}

}  // namespace tb::seqmask
