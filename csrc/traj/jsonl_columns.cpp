// JSON grammar: RFC 8259 §2-§7, as Python's json module (CPython Modules/_json.c, strict mode)
// reads it; the checks of tumorboard._json.load_json on top (nesting depth, integers within 64
// bits, numbers within a double's range, no lone surrogate escape, strict UTF-8).
#include "traj/jsonl_columns.hpp"

#include <algorithm>
#include <atomic>
#include <charconv>
#include <cmath>
#include <cstring>
#include <mutex>
#include <string_view>
#include <system_error>
#include <unordered_set>
#include <utility>

#if defined(__SSE2__)
#include <emmintrin.h>
#endif

#include "common/parallel.hpp"
#include "traj/json_text.hpp"
#include "traj/utf8_check.hpp"

namespace tb::traj {

namespace {

inline bool is_strip_blank(std::uint8_t c) {
  return c == ' ' || c == '\t' || c == '\r' || c == 0x0B || c == 0x0C;
}

inline bool is_digit(std::uint8_t c) { return c >= '0' && c <= '9'; }

inline bool is_json_space(std::uint8_t c) {
  return c == ' ' || c == '\t' || c == '\r' || c == '\n';
}

inline int hex_value(std::uint8_t c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

// The code unit of the four hex digits at p (p has at least four bytes), or -1.
inline std::int32_t hex4(const std::uint8_t* p) {
  std::int32_t v = 0;
  for (int k = 0; k < 4; ++k) {
    const int d = hex_value(p[k]);
    if (d < 0) return -1;
    v = v * 16 + d;
  }
  return v;
}

void append_utf8(std::string& out, std::uint32_t cp) {
  if (cp < 0x80) {
    out.push_back(static_cast<char>(cp));
  } else if (cp < 0x800) {
    out.push_back(static_cast<char>(0xC0 | (cp >> 6)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else if (cp < 0x10000) {
    out.push_back(static_cast<char>(0xE0 | (cp >> 12)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else {
    out.push_back(static_cast<char>(0xF0 | (cp >> 18)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 12) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  }
}

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

bool is_list(FieldKind k) {
  return k == FieldKind::kStrList || k == FieldKind::kIntList || k == FieldKind::kNumberList ||
         k == FieldKind::kBoolList;
}

// A number as Python's json module reads it: an int without a fraction or exponent, else a
// float.
struct Number {
  bool integer = true;
  std::int64_t i = 0;
  double d = 0.0;
  double as_double() const { return integer ? static_cast<double>(i) : d; }
};

// Reads the lines of one task into its builders.
class LineReader {
 public:
  LineReader(const KeyTree& tree, const std::vector<FieldSpec>& fields, int max_depth,
             std::vector<Builder>& out, EventData& events,
             const std::vector<std::string>& event_kinds)
      : tree_(tree), fields_(fields), max_depth_(max_depth), out_(out), events_(events),
        event_kinds_(event_kinds), stamp_(tree.nodes.size(), 0) {}

  // Reads line `index`; false gives up the line (reason()). keys: where a sampled line's key
  // names go (nullptr: not sampled).
  bool read(std::int64_t index, const std::uint8_t* begin, const std::uint8_t* end,
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

  void set_leaves(std::vector<int> leaf) {
    leaf_ = std::move(leaf);
    marks_.assign(leaf_.size(), Mark{});
  }
  const char* reason() const { return reason_; }

  // Takes back what a line that read() gave up on appended, and gives it a null row in every
  // column instead (its values come from the line reader, or it is rejected there).
  void rollback() {
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

 private:
  bool fail(const char* why) {
    reason_ = why;
    return false;
  }

  void space() {
    while (p_ < e_ && is_json_space(*p_)) ++p_;
  }

  bool literal(const char* word, std::size_t n) {
    if (static_cast<std::size_t>(e_ - p_) < n || std::memcmp(p_, word, n) != 0) {
      return fail("not JSON (an invalid value)");
    }
    p_ += n;
    return true;
  }

  // Advances p_ to the next byte of a string that is not plain ASCII text: a quote, a
  // backslash, a control character or a byte of a UTF-8 sequence (or to the end).
  void skip_plain() {
#if defined(__SSE2__)
    const __m128i quote = _mm_set1_epi8('"');
    const __m128i backslash = _mm_set1_epi8('\\');
    const __m128i space = _mm_set1_epi8(0x20);
    while (e_ - p_ >= 16) {
      const __m128i v = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p_));
      // signed compare: bytes 0x80-0xFF are negative, so below 0x20 too
      const __m128i special = _mm_or_si128(
          _mm_or_si128(_mm_cmpeq_epi8(v, quote), _mm_cmpeq_epi8(v, backslash)),
          _mm_cmplt_epi8(v, space));
      const int mask = _mm_movemask_epi8(special);
      if (mask != 0) {
        p_ += __builtin_ctz(static_cast<unsigned>(mask));
        return;
      }
      p_ += 16;
    }
#endif
    while (p_ < e_) {
      const std::uint8_t c = *p_;
      if (c == '"' || c == '\\' || c < 0x20 || c >= 0x80) return;
      ++p_;
    }
  }

  // A string at p_ (its opening quote); its text is appended to out unless out is nullptr.
  bool string(std::string* out) {
    ++p_;
    const std::uint8_t* run = p_;  // bytes copied as they are
    for (;;) {
      skip_plain();
      if (p_ >= e_) return fail("not JSON (an unterminated string)");
      const std::uint8_t c = *p_;
      if (c == '"') {
        if (out != nullptr) out->append(reinterpret_cast<const char*>(run), p_ - run);
        ++p_;
        return true;
      }
      if (c >= 0x80) {
        const std::size_t len = utf8_length(p_, static_cast<std::size_t>(e_ - p_));
        if (len == 0) return fail("not UTF-8 text");
        p_ += len;
        continue;
      }
      if (c < 0x20) return fail("not JSON (a control character in a string)");
      if (out != nullptr) out->append(reinterpret_cast<const char*>(run), p_ - run);
      if (e_ - p_ < 2) return fail("not JSON (an unterminated string)");
      const std::uint8_t esc = p_[1];
      p_ += 2;
      char plain = 0;
      switch (esc) {
        case '"': plain = '"'; break;
        case '\\': plain = '\\'; break;
        case '/': plain = '/'; break;
        case 'b': plain = '\b'; break;
        case 'f': plain = '\f'; break;
        case 'n': plain = '\n'; break;
        case 'r': plain = '\r'; break;
        case 't': plain = '\t'; break;
        case 'u': {
          if (e_ - p_ < 4) return fail("not JSON (an invalid \\u escape)");
          std::int32_t cp = hex4(p_);
          if (cp < 0) return fail("not JSON (an invalid \\u escape)");
          p_ += 4;
          if (cp >= 0xDC00 && cp <= 0xDFFF) return fail("a lone surrogate escape");
          if (cp >= 0xD800 && cp <= 0xDBFF) {  // a pair, or a lone surrogate
            const std::int32_t low = e_ - p_ >= 6 && p_[0] == '\\' && p_[1] == 'u' ? hex4(p_ + 2)
                                                                                     : -1;
            if (low < 0xDC00 || low > 0xDFFF) return fail("a lone surrogate escape");
            cp = 0x10000 + ((cp - 0xD800) << 10) + (low - 0xDC00);
            p_ += 6;
          }
          if (out != nullptr) append_utf8(*out, static_cast<std::uint32_t>(cp));
          break;
        }
        default:
          return fail("not JSON (an invalid escape)");
      }
      if (plain != 0 && out != nullptr) out->push_back(plain);
      run = p_;
    }
  }

  // A key at p_: a view of its bytes in the line, or of key_ when it has escapes (valid until
  // the next key).
  bool key_text(std::string_view& key) {
    const std::uint8_t* begin = p_ + 1;
    ++p_;
    skip_plain();
    if (p_ < e_ && *p_ == '"') {  // plain ASCII, the common case
      key = std::string_view(reinterpret_cast<const char*>(begin),
                             static_cast<std::size_t>(p_ - begin));
      ++p_;
      return true;
    }
    p_ = begin - 1;
    key_.clear();
    if (!string(&key_)) return false;
    key = key_;
    return true;
  }

  bool number(Number& n) {
    const std::uint8_t* start = p_;
    const bool negative = *p_ == '-';
    if (negative) ++p_;
    if (p_ >= e_ || !is_digit(*p_)) return fail("not JSON (an invalid number)");
    const std::uint8_t* int_begin = p_;
    if (*p_ == '0') {
      ++p_;
    } else {
      while (p_ < e_ && is_digit(*p_)) ++p_;
    }
    const std::uint8_t* int_end = p_;
    n.integer = true;
    if (p_ < e_ && *p_ == '.') {
      ++p_;
      if (p_ >= e_ || !is_digit(*p_)) return fail("not JSON (an invalid number)");
      while (p_ < e_ && is_digit(*p_)) ++p_;
      n.integer = false;
    }
    if (p_ < e_ && (*p_ == 'e' || *p_ == 'E')) {
      ++p_;
      if (p_ < e_ && (*p_ == '+' || *p_ == '-')) ++p_;
      if (p_ >= e_ || !is_digit(*p_)) return fail("not JSON (an invalid number)");
      while (p_ < e_ && is_digit(*p_)) ++p_;
      n.integer = false;
    }
    if (n.integer) {
      if (int_end - int_begin > 19) return fail("an integer outside the signed 64-bit range");
      std::uint64_t v = 0;
      for (const std::uint8_t* q = int_begin; q < int_end; ++q) v = v * 10 + (*q - '0');
      if (v > (negative ? 9223372036854775808ull : 9223372036854775807ull)) {
        return fail("an integer outside the signed 64-bit range");
      }
      n.i = negative ? static_cast<std::int64_t>(0 - v) : static_cast<std::int64_t>(v);
      return true;
    }
    // correctly rounded, as Python's float(); out of range (overflow, or an underflow that
    // from_chars reports) goes to the line reader, which decides
    const auto r = std::from_chars(reinterpret_cast<const char*>(start),
                                   reinterpret_cast<const char*>(p_), n.d);
    if (r.ec != std::errc() || r.ptr != reinterpret_cast<const char*>(p_) || !std::isfinite(n.d)) {
      return fail("a number outside a double's range");
    }
    return true;
  }

  bool value(int depth) {
    if (p_ >= e_) return fail("not JSON (a value is missing)");
    switch (*p_) {
      case '{':
        return object(-1, depth + 1, nullptr, nullptr);
      case '[':
        return array(depth + 1);
      case '"':
        return string(nullptr);
      case 't':
        return literal("true", 4);
      case 'f':
        return literal("false", 5);
      case 'n':
        return literal("null", 4);
      default: {
        if (*p_ != '-' && !is_digit(*p_)) return fail("not JSON (an invalid value)");
        Number n;
        return number(n);
      }
    }
  }

  bool array(int depth) {
    if (depth > max_depth_) return fail("JSON nested too deep");
    ++p_;
    space();
    if (p_ < e_ && *p_ == ']') {
      ++p_;
      return true;
    }
    for (;;) {
      space();
      if (!value(depth)) return false;
      space();
      if (p_ >= e_) return fail("not JSON (an unterminated array)");
      if (*p_ == ']') {
        ++p_;
        return true;
      }
      if (*p_ != ',') return fail("not JSON (expected ',' or ']')");
      ++p_;
    }
  }

  // An object at p_; node: the key-tree node its keys are looked up in (-1: none); keys: where
  // the key names go, after prefix and a dot when prefix is given (nullptr: not collected).
  bool object(int node, int depth, std::vector<std::string>* keys, const std::string* prefix) {
    if (depth > max_depth_) return fail("JSON nested too deep");
    ++p_;
    space();
    if (p_ < e_ && *p_ == '}') {
      ++p_;
      return true;
    }
    for (;;) {
      space();
      if (p_ >= e_ || *p_ != '"') return fail("not JSON (expected a key)");
      std::string_view key;
      if (!key_text(key)) return false;
      space();
      if (p_ >= e_ || *p_ != ':') return fail("not JSON (expected ':')");
      ++p_;
      space();
      if (p_ >= e_) return fail("not JSON (a value is missing)");
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
          if (!read_field(static_cast<std::size_t>(field), depth)) return false;
          // (a field's object value has its sub-keys sampled by the line reader only: nested
          // kinds give up above, and no scalar kind accepts an object)
        } else if (*p_ == '{') {
          if (!object(child, depth + 1, sub_keys ? keys : nullptr, sub_keys ? &name : nullptr)) {
            return false;
          }
        } else if (!value(depth)) {
          return false;
        }
      } else if (sub_keys) {
        if (!object(-1, depth + 1, keys, &name)) return false;
      } else if (!value(depth)) {
        return false;
      }
      space();
      if (p_ >= e_) return fail("not JSON (an unterminated object)");
      if (*p_ == '}') {
        ++p_;
        return true;
      }
      if (*p_ != ',') return fail("not JSON (expected ',' or '}')");
      ++p_;
    }
  }

  void null_row(std::size_t f) {
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
  bool element(FieldKind kind, Builder& b) {
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
  bool read_field(std::size_t f, int depth) {
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
        if (depth + 1 > max_depth_) return fail("JSON nested too deep");
        ++p_;
        space();
        if (p_ < e_ && *p_ == ']') {
          ++p_;
        } else {
          for (;;) {
            space();
            if (!element(kind, b)) return false;
            space();
            if (p_ >= e_) return fail("not JSON (an unterminated array)");
            if (*p_ == ']') {
              ++p_;
              break;
            }
            if (*p_ != ',') return fail("not JSON (expected ',' or ']')");
            ++p_;
          }
        }
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

  // A value at p_ as tumorboard._json.json_text writes it (json.dumps with ensure_ascii=False
  // and sort_keys=True): members of an object sorted by key, a repeated key's last value, ", "
  // and ": " between, strings escaped as json.dumps escapes them, floats as repr() writes them.
  bool canonical(std::string& out, int depth) {
    if (p_ >= e_) return fail("not JSON (a value is missing)");
    const std::uint8_t c = *p_;
    if (c == '{' || c == '[') {
      if (depth + 1 > max_depth_) return fail("JSON nested too deep");
      const bool object = c == '{';
      const std::uint8_t close = object ? '}' : ']';
      ++p_;
      space();
      std::vector<std::pair<std::string, std::string>> members;  // (key, text); arrays: no key
      if (p_ < e_ && *p_ == close) {
        ++p_;
      } else {
        for (;;) {
          space();
          std::string key;
          if (object) {
            if (p_ >= e_ || *p_ != '"') return fail("not JSON (expected a key)");
            if (!string(&key)) return false;
            space();
            if (p_ >= e_ || *p_ != ':') return fail("not JSON (expected ':')");
            ++p_;
            space();
          }
          std::string text;
          if (!canonical(text, depth + 1)) return false;
          auto same = object ? std::find_if(members.begin(), members.end(),
                                            [&](const auto& m) { return m.first == key; })
                             : members.end();
          if (same != members.end()) {
            same->second = std::move(text);  // a dict keeps a repeated key's last value
          } else {
            members.emplace_back(std::move(key), std::move(text));
          }
          space();
          if (p_ >= e_) return fail("not JSON (an unterminated container)");
          if (*p_ == close) {
            ++p_;
            break;
          }
          if (*p_ != ',') return fail("not JSON (expected ',')");
          ++p_;
        }
      }
      if (object) {
        std::sort(members.begin(), members.end(),
                  [](const auto& a, const auto& b) { return a.first < b.first; });
      }
      out.push_back(static_cast<char>(c));
      for (std::size_t k = 0; k < members.size(); ++k) {
        if (k > 0) out += ", ";
        if (object) {
          append_json_string(members[k].first, out);
          out += ": ";
        }
        out += members[k].second;
      }
      out.push_back(static_cast<char>(close));
      return true;
    }
    switch (c) {
      case '"': {
        std::string text;
        if (!string(&text)) return false;
        append_json_string(text, out);
        return true;
      }
      case 't':
        out += "true";
        return literal("true", 4);
      case 'f':
        out += "false";
        return literal("false", 5);
      case 'n':
        out += "null";
        return literal("null", 4);
      default: {
        if (c != '-' && !is_digit(c)) return fail("not JSON (an invalid value)");
        Number n;
        if (!number(n)) return false;
        if (n.integer) {
          char text[24];
          const auto r = std::to_chars(text, text + sizeof text, n.i);
          out.append(text, r.ptr);
        } else {
          append_float_repr(n.d, out);
        }
        return true;
      }
    }
  }

  // The events list at p_ (null: none), into events_.
  bool read_events(int depth) {
    if (*p_ != '[') return fail("events: not a list");
    if (depth + 1 > max_depth_) return fail("JSON nested too deep");
    ++p_;
    space();
    if (p_ < e_ && *p_ == ']') {
      ++p_;
      return true;
    }
    for (std::int64_t index = 0;; ++index) {
      space();
      if (p_ >= e_ || *p_ != '{') return fail("events: an event that is not an object");
      if (!event(index, depth + 1)) return false;
      space();
      if (p_ >= e_) return fail("not JSON (an unterminated array)");
      if (*p_ == ']') {
        ++p_;
        return true;
      }
      if (*p_ != ',') return fail("not JSON (expected ',' or ']')");
      ++p_;
    }
  }

  // A string value or null at p_, into text (false: another value).
  bool text_or_null(TextData& text) {
    if (*p_ == 'n') {
      if (!literal("null", 4)) return false;
      text.null();
      return true;
    }
    if (*p_ != '"') return fail("events: a value of the wrong type");
    scratch_.clear();
    if (!string(&scratch_)) return false;
    text.add(scratch_);
    return true;
  }

  // One event object at p_ (the index-th of its list).
  bool event(std::int64_t index, int depth) {
    if (depth > max_depth_) return fail("JSON nested too deep");
    enum Key { kStep, kRole, kKind, kTool, kInput, kOutput, kOk, kError, kLatency, kKeys };
    static constexpr std::string_view kNames[kKeys] = {
        "step", "role", "kind", "tool", "input", "output", "ok", "error", "latency_s"};
    bool seen[kKeys] = {};
    const std::size_t row = events_.size();
    EventData& ev = events_;
    ++p_;
    space();
    bool done = p_ < e_ && *p_ == '}';
    if (done) ++p_;
    while (!done) {
      space();
      if (p_ >= e_ || *p_ != '"') return fail("not JSON (expected a key)");
      std::string_view key;
      if (!key_text(key)) return false;
      int which = kKeys;
      for (int k = 0; k < kKeys; ++k) {
        if (key == kNames[k]) which = k;
      }
      space();
      if (p_ >= e_ || *p_ != ':') return fail("not JSON (expected ':')");
      ++p_;
      space();
      if (p_ >= e_) return fail("not JSON (a value is missing)");
      if (which != kKeys) {
        if (seen[which]) return fail("a repeated key");
        seen[which] = true;
      }
      const std::uint8_t c = *p_;
      switch (which) {
        case kStep: {
          if (c == 'n') {
            if (!literal("null", 4)) return false;
            ev.step.push_back(0);
            ev.step_valid.push_back(0);
            break;
          }
          if (c != '-' && !is_digit(c)) return fail("events: a value of the wrong type");
          Number n;
          if (!number(n)) return false;
          if (!n.integer || n.i < -2147483648LL || n.i > 2147483647LL) {
            return fail("events: a step outside 32 bits");
          }
          ev.step.push_back(n.i);
          ev.step_valid.push_back(1);
          break;
        }
        case kRole:
          if (!text_or_null(ev.role)) return false;
          break;
        case kTool:
          if (!text_or_null(ev.tool)) return false;
          break;
        case kError:
          if (!text_or_null(ev.error)) return false;
          break;
        case kKind: {
          if (c != '"') return fail("events: a kind that is not one of the event kinds");
          scratch_.clear();
          if (!string(&scratch_)) return false;
          if (std::find(event_kinds_.begin(), event_kinds_.end(), scratch_) ==
              event_kinds_.end()) {
            return fail("events: a kind that is not one of the event kinds");
          }
          ev.kind.add(scratch_);
          break;
        }
        case kInput:
        case kOutput: {
          TextData& text = which == kInput ? ev.input : ev.output;
          if (c == 'n') {
            if (!literal("null", 4)) return false;
            text.null();
          } else if (c == '"') {
            scratch_.clear();
            if (!string(&scratch_)) return false;
            if (which == kOutput) {
              text.add(scratch_);
            } else {
              const int accepted = python_json_accepts(scratch_);
              if (accepted < 0) return fail("events: an input nested too deep to decide");
              if (accepted == 1) {
                text.add(scratch_);
              } else {
                std::string quoted;
                append_json_string(scratch_, quoted);
                text.add(quoted);
              }
            }
          } else {
            std::string json;
            if (!canonical(json, depth)) return false;
            text.add(json);
          }
          break;
        }
        case kOk:
          if (c == 't' && literal("true", 4)) {
            ev.ok.push_back(1);
            ev.ok_valid.push_back(1);
          } else if (c == 'f' && literal("false", 5)) {
            ev.ok.push_back(0);
            ev.ok_valid.push_back(1);
          } else if (c == 'n' && literal("null", 4)) {
            ev.ok.push_back(0);
            ev.ok_valid.push_back(0);
          } else {
            return fail("events: a value of the wrong type");
          }
          break;
        case kLatency: {
          if (c == 'n') {
            if (!literal("null", 4)) return false;
            ev.latency.push_back(0.0);
            ev.latency_valid.push_back(0);
            break;
          }
          if (c != '-' && !is_digit(c)) return fail("events: a value of the wrong type");
          Number n;
          if (!number(n)) return false;
          ev.latency.push_back(n.as_double());
          ev.latency_valid.push_back(1);
          break;
        }
        default:
          if (!value(depth)) return false;
      }
      space();
      if (p_ >= e_) return fail("not JSON (an unterminated object)");
      if (*p_ == '}') {
        ++p_;
        done = true;
      } else if (*p_ != ',') {
        return fail("not JSON (expected ',' or '}')");
      } else {
        ++p_;
      }
    }
    if (!seen[kKind]) return fail("events: an event without a kind");
    if (!seen[kStep]) {
      ev.step.push_back(index);
      ev.step_valid.push_back(1);
    }
    for (auto [k, text] : {std::pair{kRole, &ev.role}, std::pair{kTool, &ev.tool},
                           std::pair{kInput, &ev.input}, std::pair{kOutput, &ev.output},
                           std::pair{kError, &ev.error}}) {
      if (!seen[k]) text->null();
    }
    if (!seen[kOk]) {
      ev.ok.push_back(0);
      ev.ok_valid.push_back(0);
    }
    if (!seen[kLatency]) {
      ev.latency.push_back(0.0);
      ev.latency_valid.push_back(0);
    }
    ev.line.push_back(index_);
    (void)row;
    return true;
  }

  const KeyTree& tree_;
  const std::vector<FieldSpec>& fields_;
  const int max_depth_;
  std::vector<Builder>& out_;
  EventData& events_;
  const std::vector<std::string>& event_kinds_;
  std::int64_t index_ = 0;         // the line being read
  std::size_t events_mark_ = 0;    // events_.size() before it
  std::string scratch_;
  std::vector<std::uint32_t> stamp_;  // per key-tree node: the line that had it last
  // A builder's sizes before a line appended to it (rollback()).
  struct Mark {
    std::uint32_t line = 0;
    std::size_t valid = 0, list_ends = 0, ends = 0, bytes = 0, bools = 0, ints = 0, numbers = 0;
  };
  std::vector<int> leaf_;             // per field: its key-tree node
  std::vector<Mark> marks_;           // per field: its builder's sizes before the line
  std::uint32_t line_ = 0;
  const std::uint8_t* p_ = nullptr;
  const std::uint8_t* e_ = nullptr;
  const char* reason_ = "";
  std::string key_;
  std::vector<std::string> top_keys_;
};

void pack_bits(const std::vector<std::uint8_t>& flags, std::int64_t at,
               std::vector<std::uint8_t>& bits) {
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
  if (kind == FieldKind::kNested || kind == FieldKind::kEvents) return col;
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
    pack_bits(b->valid, at, col.validity);
    at += static_cast<std::int64_t>(b->valid.size());
    for (const std::uint8_t v : b->valid) col.null_count += v == 0;
  }
  const bool strings = kind == FieldKind::kId || kind == FieldKind::kStr ||
                       kind == FieldKind::kStrList;
  const bool bools = kind == FieldKind::kBool || kind == FieldKind::kBoolList;
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
  if (strings) {
    std::size_t total = 0;
    for (const Builder* b : parts) total += b->bytes.size();
    col.bytes.reserve(total);
    col.offsets.reserve(static_cast<std::size_t>(values) + 1);
    col.offsets.push_back(0);
    for (const Builder* b : parts) append_strings(*b, col);
  } else if (bools) {
    col.bytes.assign(static_cast<std::size_t>((values + 7) / 8), '\0');
    std::vector<std::uint8_t> bits(col.bytes.size(), 0);
    std::int64_t k = 0;
    for (const Builder* b : parts) {
      pack_bits(b->bools, k, bits);
      k += static_cast<std::int64_t>(b->bools.size());
    }
    std::memcpy(col.bytes.data(), bits.data(), bits.size());
  } else if (kind == FieldKind::kInt || kind == FieldKind::kInt32 ||
             kind == FieldKind::kIntList) {
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

void EventData::truncate(std::size_t rows) {
  line.resize(rows);
  step.resize(rows);
  step_valid.resize(rows);
  for (TextData* t : {&role, &kind, &tool, &input, &output, &error}) t->truncate(rows);
  ok.resize(rows);
  ok_valid.resize(rows);
  latency.resize(rows);
  latency_valid.resize(rows);
}

namespace {

void append_text(TextData& to, TextData&& from) {
  const std::int64_t base = to.offsets.back();
  for (std::size_t k = 1; k < from.offsets.size(); ++k) to.offsets.push_back(base + from.offsets[k]);
  to.bytes += from.bytes;
  to.valid.insert(to.valid.end(), from.valid.begin(), from.valid.end());
}

template <class T>
void append_all(std::vector<T>& to, const std::vector<T>& from) {
  to.insert(to.end(), from.begin(), from.end());
}

}  // namespace

void EventData::append(EventData&& other) {
  append_all(line, other.line);
  append_all(step, other.step);
  append_all(step_valid, other.step_valid);
  append_text(role, std::move(other.role));
  append_text(kind, std::move(other.kind));
  append_text(tool, std::move(other.tool));
  append_text(input, std::move(other.input));
  append_text(output, std::move(other.output));
  append_text(error, std::move(other.error));
  append_all(ok, other.ok);
  append_all(ok_valid, other.ok_valid);
  append_all(latency, other.latency);
  append_all(latency_valid, other.latency_valid);
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
