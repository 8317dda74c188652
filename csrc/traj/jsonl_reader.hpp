// The line reader of the compiled JSON-lines reader, shared by jsonl_columns.cpp (lines and
// fields) and jsonl_events.cpp (the events field): internal to the core.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "traj/json_cursor.hpp"
#include "traj/jsonl_columns.hpp"

namespace tb::traj {

// The keys of the fields as a tree: a node is a field's key (field >= 0) or the parent of the
// parts below it in dotted keys (children), never both. A node's children are found through a
// small hash of the key's length and end bytes.
struct KeyTree {
  static constexpr std::size_t kBuckets = 64;

  struct Node {
    std::vector<std::pair<std::string, int>> children;
    std::vector<std::vector<int>> buckets;  // kBuckets lists of indices into children
    int field = -1;
  };
  std::vector<Node> nodes{Node{}};

  static std::size_t bucket(std::string_view key) {
    if (key.empty()) return 0;
    return (key.size() * 31 + static_cast<std::uint8_t>(key.front()) +
            static_cast<std::uint8_t>(key.back()) * 7) %
           kBuckets;
  }

  int add(int node, const std::string& key) {
    const int next = static_cast<int>(nodes.size());
    Node& nd = nodes[static_cast<std::size_t>(node)];
    if (nd.buckets.empty()) nd.buckets.resize(kBuckets);
    nd.buckets[bucket(key)].push_back(static_cast<int>(nd.children.size()));
    nd.children.emplace_back(key, next);
    nodes.emplace_back();
    return next;
  }

  int child(int node, std::string_view key) const {
    const Node& nd = nodes[static_cast<std::size_t>(node)];
    if (nd.buckets.empty()) return -1;
    for (const int k : nd.buckets[bucket(key)]) {
      const auto& [name, index] = nd.children[static_cast<std::size_t>(k)];
      if (name.size() == key.size() && std::memcmp(name.data(), key.data(), key.size()) == 0) {
        return index;
      }
    }
    return -1;
  }
};

// A field's values of one task's lines, row by row (merged into a ColumnData at the end).
struct Builder {
  std::vector<std::uint8_t> valid;      // per row
  std::vector<std::int64_t> list_ends;  // lists: elements after each row
  std::vector<std::int64_t> ends;       // strings (scalars or elements): bytes after each
  std::string bytes;
  std::vector<std::uint8_t> bools;      // per value (scalars or elements)
  std::vector<std::int64_t> ints;
  std::vector<double> numbers;
};

// Reads the lines of one task into its builders (fields) and its events.
class LineReader : public JsonCursor {
 public:
  LineReader(const KeyTree& tree, const std::vector<FieldSpec>& fields, int max_depth,
             std::vector<Builder>& out, EventData& events,
             const std::vector<std::string>& event_kinds)
      : JsonCursor(max_depth), tree_(tree), fields_(fields), out_(out), events_(events),
        event_kinds_(event_kinds), stamp_(tree.nodes.size(), 0) {}

  // Reads line `index`; false gives up the line (reason()). keys: where a sampled line's key
  // names go (nullptr: not sampled).
  bool read(std::int64_t index, const std::uint8_t* begin, const std::uint8_t* end,
            std::vector<std::string>* keys);

  void set_leaves(std::vector<int> leaf) {
    leaf_ = std::move(leaf);
    marks_.assign(leaf_.size(), Mark{});
  }

  // Takes back what a line that read() gave up on appended, and gives it a null row in every
  // column instead (its values come from the line reader, or it is rejected there).
  void rollback();

 private:
  // An object at p_; node: the key-tree node its keys are looked up in (-1: none); keys: where
  // the key names go, after prefix and a dot when prefix is given (nullptr: not collected).
  bool object(int node, int depth, std::vector<std::string>* keys, const std::string* prefix);
  void null_row(std::size_t f);
  // One element of a list field (no null).
  bool element(FieldKind kind, Builder& b);
  // The value of field f at p_, checked against its kind and appended to its builder.
  bool read_field(std::size_t f, int depth);
  // The events list at p_ (null: none), into events_.
  bool read_events(int depth);
  // A string value or null at p_, into text (false: another value).
  bool text_or_null(TextData& text);
  // One event object at p_ (the index-th of its list).
  bool event(std::int64_t index, int depth);

  // A builder's sizes before a line appended to it (rollback()).
  struct Mark {
    std::uint32_t line = 0;
    std::size_t valid = 0, list_ends = 0, ends = 0, bytes = 0, bools = 0, ints = 0, numbers = 0;
  };

  const KeyTree& tree_;
  const std::vector<FieldSpec>& fields_;
  std::vector<Builder>& out_;
  EventData& events_;
  const std::vector<std::string>& event_kinds_;
  std::int64_t index_ = 0;          // the line being read
  std::size_t events_mark_ = 0;     // events_.size() before it
  std::string scratch_;
  std::vector<std::uint32_t> stamp_;  // per key-tree node: the line that had it last
  std::vector<int> leaf_;             // per field: its key-tree node
  std::vector<Mark> marks_;           // per field: its builder's sizes before the line
  std::uint32_t line_ = 0;
  std::vector<std::string> top_keys_;
};

}  // namespace tb::traj
