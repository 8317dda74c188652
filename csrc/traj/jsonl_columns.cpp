// The lines of a JSON-lines block and the bulk reader over them: records read field by field
// (the key tree of the requested keys, the fields' checks), columns built per task and merged
// in line order. The grammar is json_cursor.cpp; the events field jsonl_events.cpp.
#include "traj/jsonl_columns.hpp"

#include <algorithm>
#include <atomic>
#include <charconv>
#include <cstring>
#include <mutex>
#include <string_view>
#include <unordered_set>
#include <utility>

#include "common/parallel.hpp"
#include "traj/jsonl_reader.hpp"

namespace tb::traj {

namespace {

inline bool is_strip_blank(std::uint8_t c) {
  return c == ' ' || c == '\t' || c == '\r' || c == 0x0B || c == 0x0C;
}

// Sets bit at + k of bits (least significant bit first) for every flags[k] that is not 0.
void pack_bits(const std::vector<std::uint8_t>& flags, std::int64_t at, std::uint8_t* bits) {
  for (std::size_t k = 0; k < flags.size(); ++k) {
    if (flags[k] != 0) {
      const auto i = static_cast<std::size_t>(at) + k;
      bits[i >> 3] = static_cast<std::uint8_t>(bits[i >> 3] | (1u << (i & 7)));
    }
  }
}

// Appends string values (their ends within b.bytes) to offsets/bytes, shifted by the bytes
// before them.
void append_strings(const Builder& b, ColumnData& col) {
  const auto base = static_cast<std::int64_t>(col.bytes.size());
  for (const std::int64_t end : b.ends) col.offsets.push_back(base + end);
  col.bytes += b.bytes;
}

ColumnData merge(FieldKind kind, const std::vector<const Builder*>& parts) {
  ColumnData col;
  col.kind = kind;
  const ValueLayout layout = value_layout(kind);
  if (layout == ValueLayout::kNone) return col;
  std::int64_t rows = 0;
  std::int64_t values = 0;  // scalars or list elements
  for (const Builder* b : parts) {
    rows += static_cast<std::int64_t>(b->valid.size());
    values += static_cast<std::int64_t>(std::max({b->ends.size(), b->bools.size(),
                                                  b->ints.size(), b->numbers.size()}));
  }
  col.validity.assign(static_cast<std::size_t>((rows + 7) / 8), 0);
  std::int64_t at = 0;
  for (const Builder* b : parts) {
    pack_bits(b->valid, at, col.validity.data());
    at += static_cast<std::int64_t>(b->valid.size());
    for (const std::uint8_t v : b->valid) col.null_count += v == 0;
  }
  if (is_list(kind)) {
    col.list_offsets.reserve(static_cast<std::size_t>(rows) + 1);
    col.list_offsets.push_back(0);
    std::int64_t base = 0;
    for (const Builder* b : parts) {
      for (const std::int64_t end : b->list_ends) col.list_offsets.push_back(base + end);
      base += static_cast<std::int64_t>(std::max({b->ends.size(), b->bools.size(),
                                                  b->ints.size(), b->numbers.size()}));
    }
  }
  if (layout == ValueLayout::kStrings) {
    std::size_t total = 0;
    for (const Builder* b : parts) total += b->bytes.size();
    col.bytes.reserve(total);
    col.offsets.reserve(static_cast<std::size_t>(values) + 1);
    col.offsets.push_back(0);
    for (const Builder* b : parts) append_strings(*b, col);
  } else if (layout == ValueLayout::kBools) {
    col.bytes.assign(static_cast<std::size_t>((values + 7) / 8), '\0');
    auto* bits = reinterpret_cast<std::uint8_t*>(col.bytes.data());
    std::int64_t k = 0;
    for (const Builder* b : parts) {
      pack_bits(b->bools, k, bits);
      k += static_cast<std::int64_t>(b->bools.size());
    }
  } else if (layout == ValueLayout::kInts) {
    col.ints.reserve(static_cast<std::size_t>(values));
    for (const Builder* b : parts) col.ints.insert(col.ints.end(), b->ints.begin(), b->ints.end());
  } else {
    col.numbers.reserve(static_cast<std::size_t>(values));
    for (const Builder* b : parts) {
      col.numbers.insert(col.numbers.end(), b->numbers.begin(), b->numbers.end());
    }
  }
  return col;
}


}  // namespace

// Reads line `index`; false gives up the line (reason()). keys: where a sampled line's key
// names go (nullptr: not sampled).
bool LineReader::read(std::int64_t index, const std::uint8_t* begin, const std::uint8_t* end,
          std::vector<std::string>* keys) {
  p_ = begin;
  e_ = end;
  index_ = index;
  events_mark_ = events_.size();
  ++line_;
  top_keys_.clear();
  space();
  if (p_ >= e_ || *p_ != '{') return fail("not a JSON object");
  if (!object(0, 1, keys, nullptr)) return false;
  space();
  if (p_ != e_) return fail("not JSON (extra data after the object)");
  for (std::size_t f = 0; f < fields_.size(); ++f) {
    if (fields_[f].kind == FieldKind::kNested) continue;
    if (stamp_[static_cast<std::size_t>(leaf_[f])] != line_) null_row(f);
  }
  return true;
}

// Takes back what a line that read() gave up on appended, and gives it a null row in every
// column instead (its values come from the line reader, or it is rejected there).
void LineReader::rollback() {
  events_.truncate(events_mark_);
  for (std::size_t f = 0; f < fields_.size(); ++f) {
    if (fields_[f].kind == FieldKind::kNested) continue;
    const Mark& m = marks_[f];
    if (m.line == line_) {
      Builder& b = out_[f];
      b.valid.resize(m.valid);
      b.list_ends.resize(m.list_ends);
      b.ends.resize(m.ends);
      b.bytes.resize(m.bytes);
      b.bools.resize(m.bools);
      b.ints.resize(m.ints);
      b.numbers.resize(m.numbers);
    }
    null_row(f);
  }
}

// An object at p_; node: the key-tree node its keys are looked up in (-1: none); keys: where
// the key names go, after prefix and a dot when prefix is given (nullptr: not collected).
bool LineReader::object(int node, int depth, std::vector<std::string>* keys,
                        const std::string* prefix) {
  return members(depth, [&](std::string_view key) {
    std::string name;  // the key, kept past nested parses where it is needed
    if (keys != nullptr) {
      name = key;
      keys->push_back(prefix != nullptr ? *prefix + "." + name : name);
      if (prefix == nullptr) {  // a repeated key of a sampled record: the line reader
        if (std::find(top_keys_.begin(), top_keys_.end(), name) != top_keys_.end()) {
          return fail("a repeated key");
        }
        top_keys_.push_back(name);
      }
    }
    const int child = node >= 0 ? tree_.child(node, key) : -1;
    const bool sub_keys = keys != nullptr && prefix == nullptr && *p_ == '{';
    if (child >= 0) {
      auto& stamp = stamp_[static_cast<std::size_t>(child)];
      if (stamp == line_) return fail("a repeated key");
      stamp = line_;
      const int field = tree_.nodes[static_cast<std::size_t>(child)].field;
      if (field >= 0) {
        if (fields_[static_cast<std::size_t>(field)].kind == FieldKind::kNested) {
          return fail("a field read as nested JSON");
        }
        // (a field's object value has its sub-keys sampled by the line reader only: nested
        // kinds give up here, and no scalar kind accepts an object)
        return read_field(static_cast<std::size_t>(field), depth);
      }
      if (*p_ == '{') {
        return object(child, depth + 1, sub_keys ? keys : nullptr, sub_keys ? &name : nullptr);
      }
      return value(depth);
    }
    if (sub_keys) return object(-1, depth + 1, keys, &name);
    return value(depth);
  });
}

void LineReader::null_row(std::size_t f) {
  Builder& b = out_[f];
  const FieldKind kind = fields_[f].kind;
  b.valid.push_back(0);
  switch (kind) {
    case FieldKind::kId:
    case FieldKind::kStr:
      b.ends.push_back(static_cast<std::int64_t>(b.bytes.size()));
      break;
    case FieldKind::kBool:
      b.bools.push_back(0);
      break;
    case FieldKind::kInt:
    case FieldKind::kInt32:
      b.ints.push_back(0);
      break;
    case FieldKind::kNumber:
    case FieldKind::kFlag:
      b.numbers.push_back(0.0);
      break;
    case FieldKind::kStrList:
      b.list_ends.push_back(static_cast<std::int64_t>(b.ends.size()));
      break;
    case FieldKind::kIntList:
      b.list_ends.push_back(static_cast<std::int64_t>(b.ints.size()));
      break;
    case FieldKind::kNumberList:
      b.list_ends.push_back(static_cast<std::int64_t>(b.numbers.size()));
      break;
    case FieldKind::kBoolList:
      b.list_ends.push_back(static_cast<std::int64_t>(b.bools.size()));
      break;
    case FieldKind::kNested:
    case FieldKind::kEvents:
      break;
  }
}

// One element of a list field (no null).
bool LineReader::element(FieldKind kind, Builder& b) {
  if (p_ >= e_) return fail("not JSON (a value is missing)");
  const std::uint8_t c = *p_;
  switch (kind) {
    case FieldKind::kStrList:
      if (c != '"') return fail("a list element of the wrong type");
      if (!string(&b.bytes)) return false;
      b.ends.push_back(static_cast<std::int64_t>(b.bytes.size()));
      return true;
    case FieldKind::kBoolList:
      if (c == 't' && literal("true", 4)) {
        b.bools.push_back(1);
        return true;
      }
      if (c == 'f' && literal("false", 5)) {
        b.bools.push_back(0);
        return true;
      }
      return fail("a list element of the wrong type");
    default: {
      if (c != '-' && !is_digit(c)) return fail("a list element of the wrong type");
      Number n;
      if (!number(n)) return false;
      if (kind == FieldKind::kIntList) {
        if (!n.integer) return fail("a list element of the wrong type");
        b.ints.push_back(n.i);
      } else {
        b.numbers.push_back(n.as_double());
      }
      return true;
    }
  }
}

// The value of field f at p_, checked against its kind and appended to its builder.
bool LineReader::read_field(std::size_t f, int depth) {
  Builder& b = out_[f];
  marks_[f] = Mark{line_,         b.valid.size(), b.list_ends.size(), b.ends.size(),
                   b.bytes.size(), b.bools.size(), b.ints.size(),     b.numbers.size()};
  const FieldKind kind = fields_[f].kind;
  const std::uint8_t c = *p_;
  if (c == 'n') {
    if (!literal("null", 4)) return false;
    null_row(f);
    return true;
  }
  switch (kind) {
    case FieldKind::kId:
    case FieldKind::kStr: {
      if (c == '"') {
        if (!string(&b.bytes)) return false;
      } else if (kind == FieldKind::kId && (c == '-' || is_digit(c))) {
        Number n;
        if (!number(n)) return false;
        if (!n.integer) return fail("a value of the wrong type");
        char text[24];
        const auto r = std::to_chars(text, text + sizeof text, n.i);
        b.bytes.append(text, r.ptr);
      } else {
        return fail("a value of the wrong type");
      }
      b.ends.push_back(static_cast<std::int64_t>(b.bytes.size()));
      break;
    }
    case FieldKind::kBool:
      if (c == 't' && literal("true", 4)) {
        b.bools.push_back(1);
      } else if (c == 'f' && literal("false", 5)) {
        b.bools.push_back(0);
      } else {
        return fail("a value of the wrong type");
      }
      break;
    case FieldKind::kInt:
    case FieldKind::kInt32: {
      if (c != '-' && !is_digit(c)) return fail("a value of the wrong type");
      Number n;
      if (!number(n)) return false;
      if (!n.integer) return fail("a value of the wrong type");
      if (kind == FieldKind::kInt32 && (n.i < -2147483648LL || n.i > 2147483647LL)) {
        return fail("an integer outside 32 bits");
      }
      b.ints.push_back(n.i);
      break;
    }
    case FieldKind::kNumber:
    case FieldKind::kFlag: {
      double v = 0.0;
      if (kind == FieldKind::kFlag && c == 't' && literal("true", 4)) {
        v = 1.0;
      } else if (kind == FieldKind::kFlag && c == 'f' && literal("false", 5)) {
        v = 0.0;
      } else if (c == '-' || is_digit(c)) {
        Number n;
        if (!number(n)) return false;
        v = n.as_double();
        if (kind == FieldKind::kFlag && !(v >= 0.0 && v <= 1.0)) {
          return fail("a flag outside [0, 1]");
        }
      } else {
        return fail("a value of the wrong type");
      }
      b.numbers.push_back(v);
      break;
    }
    case FieldKind::kStrList:
    case FieldKind::kIntList:
    case FieldKind::kNumberList:
    case FieldKind::kBoolList: {
      if (c != '[') return fail("a value of the wrong type");
      if (!elements(depth + 1, [&] { return element(kind, b); })) return false;
      const std::size_t count = kind == FieldKind::kStrList    ? b.ends.size()
                                : kind == FieldKind::kIntList  ? b.ints.size()
                                : kind == FieldKind::kBoolList ? b.bools.size()
                                                               : b.numbers.size();
      b.list_ends.push_back(static_cast<std::int64_t>(count));
      break;
    }
    case FieldKind::kNested:
      return fail("a field read as nested JSON");
    case FieldKind::kEvents:
      if (!read_events(depth)) return false;
      break;
  }
  b.valid.push_back(1);
  return true;
}

LineSpans line_spans(const std::uint8_t* data, std::size_t n) {
  LineSpans out;
  std::size_t begin = 0;
  std::int64_t index = 0;
  for (;;) {
    const void* nl = n > begin ? std::memchr(data + begin, '\n', n - begin) : nullptr;
    const std::size_t end = nl != nullptr ? static_cast<const std::uint8_t*>(nl) - data : n;
    std::size_t i = begin;
    while (i < end && is_strip_blank(data[i])) ++i;
    if (i < end) {
      out.starts.push_back(static_cast<std::int64_t>(begin));
      out.ends.push_back(static_cast<std::int64_t>(end));
      out.index.push_back(index);
    }
    if (nl == nullptr) break;
    ++index;
    begin = end + 1;
  }
  return out;
}

ReadColumns read_columns(const std::uint8_t* data, const std::int64_t* starts,
                         const std::int64_t* ends, std::size_t n,
                         const std::vector<FieldSpec>& fields, int max_depth, std::size_t sample,
                         bool per_line, const std::vector<std::string>& event_kinds,
                         int threads) {
  ReadColumns result;
  // the key tree; a key that is both a value and a parent, or read by two fields, is left to
  // the line reader
  KeyTree tree;
  std::vector<int> leaf(fields.size(), -1);
  for (std::size_t f = 0; f < fields.size(); ++f) {
    int node = 0;
    for (std::size_t k = 0; k < fields[f].path.size(); ++k) {
      if (tree.nodes[static_cast<std::size_t>(node)].field >= 0) {
        result.reason = "a key is both a value and a parent";
        return result;
      }
      const int next = tree.child(node, fields[f].path[k]);
      node = next >= 0 ? next : tree.add(node, fields[f].path[k]);
    }
    auto& nd = tree.nodes[static_cast<std::size_t>(node)];
    if (node == 0 || nd.field >= 0 || !nd.children.empty()) {
      result.reason = "a key read by two fields, or both a value and a parent";
      return result;
    }
    nd.field = static_cast<int>(f);
    leaf[f] = node;
  }

  const std::size_t workers = static_cast<std::size_t>(resolve_threads(threads));
  const std::size_t n_tasks = std::max<std::size_t>(1, std::min<std::size_t>(n, workers * 8));
  std::vector<std::vector<Builder>> parts(n_tasks, std::vector<Builder>(fields.size()));
  std::vector<std::vector<std::string>> keys(n_tasks);
  std::vector<std::vector<std::int64_t>> given_up(n_tasks);
  std::vector<EventData> events(n_tasks);
  std::atomic<bool> failed{false};
  std::mutex mutex;
  std::int64_t bad_line = -1;
  std::string bad_reason;
  parallel_for(n_tasks, threads, [&](std::size_t t) {
    const std::size_t begin = n * t / n_tasks;
    const std::size_t end = n * (t + 1) / n_tasks;
    std::vector<Builder>& out = parts[t];
    for (std::size_t f = 0; f < fields.size(); ++f) out[f].valid.reserve(end - begin);
    LineReader reader(tree, fields, max_depth, out, events[t], event_kinds);
    reader.set_leaves(leaf);
    for (std::size_t i = begin; i < end; ++i) {
      if (failed.load(std::memory_order_relaxed)) return;
      std::vector<std::string>* sink = i < sample ? &keys[t] : nullptr;
      if (!reader.read(static_cast<std::int64_t>(i), data + starts[i], data + ends[i], sink)) {
        if (per_line) {
          reader.rollback();
          given_up[t].push_back(static_cast<std::int64_t>(i));
          continue;
        }
        failed.store(true);
        std::lock_guard<std::mutex> lock(mutex);
        if (bad_line < 0 || static_cast<std::int64_t>(i) < bad_line) {
          bad_line = static_cast<std::int64_t>(i);
          bad_reason = reader.reason();
        }
        return;
      }
    }
  });
  if (failed.load()) {
    result.line = bad_line;
    result.reason = bad_reason;
    return result;
  }
  result.columns.resize(fields.size());
  parallel_for(fields.size(), threads, [&](std::size_t f) {
    std::vector<const Builder*> column_parts(n_tasks);
    for (std::size_t t = 0; t < n_tasks; ++t) column_parts[t] = &parts[t][f];
    result.columns[f] = merge(fields[f].kind, column_parts);
    for (std::size_t t = 0; t < n_tasks; ++t) parts[t][f] = Builder{};  // memory back early
  });
  for (const auto& part : given_up) {
    result.given_up.insert(result.given_up.end(), part.begin(), part.end());
  }
  for (auto& part : events) result.events.append(std::move(part));
  std::unordered_set<std::string> seen;
  for (auto& task_keys : keys) {
    for (auto& k : task_keys) {
      if (seen.insert(k).second) result.keys_seen.push_back(std::move(k));
    }
  }
  result.ok = true;
  return result;
}

}  // namespace tb::traj
