// The strict JSON grammar of the compiled JSON-lines reader (jsonl_columns.cpp): RFC 8259
// §2-§7 as Python's json module reads it (CPython Modules/_json.c, strict mode), with the checks
// of tumorboard._json.load_json on top (nesting depth, integers within 64 bits, numbers within a
// double's range, no lone surrogate escape, strict UTF-8), and values written back as
// tumorboard._json.json_text writes them (canonical).
#pragma once

#include <charconv>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>
#include <system_error>

#if defined(__SSE2__)
#include <emmintrin.h>
#endif

#include "traj/utf8_check.hpp"

namespace tb::traj {

inline bool is_digit(std::uint8_t c) { return c >= '0' && c <= '9'; }

inline bool is_json_space(std::uint8_t c) {
  return c == ' ' || c == '\t' || c == '\r' || c == '\n';
}

// A number as Python's json module reads it: an int without a fraction or exponent, else a
// float.
struct Number {
  bool integer = true;
  std::int64_t i = 0;
  double d = 0.0;
  double as_double() const { return integer ? static_cast<double>(i) : d; }
};

// A cursor over one JSON text [p_, e_): each method reads one piece at p_ and moves past it, or
// returns false with reason() saying why (the text is then not read any further).
class JsonCursor {
 public:
  explicit JsonCursor(int max_depth) : max_depth_(max_depth) {}
  const char* reason() const { return reason_; }

 protected:
  bool fail(const char* why);
  void space();
  bool literal(const char* word, std::size_t n);
  // Advances p_ to the next byte of a string that is not plain ASCII text: a quote, a
  // backslash, a control character or a byte of a UTF-8 sequence (or to the end).
  void skip_plain();
  // A string at p_ (its opening quote); its text is appended to out unless out is nullptr.
  bool string(std::string* out);
  // A key at p_: a view of its bytes in the line, or of key_ when it has escapes (valid until
  // the next key).
  bool key_text(std::string_view& key);
  bool number(Number& n);
  bool value(int depth);
  // Reads the object at p_ (its '{'), at nesting level depth: for each member, the key (a view
  // valid until the next key is read) with p_ at its value, which on_member(key) reads.
  template <class OnMember>
  bool members(int depth, OnMember&& on_member);
  // Reads the array at p_ (its '['), at nesting level depth: on_element() reads each element.
  template <class OnElement>
  bool elements(int depth, OnElement&& on_element);
  // An object at p_, read for its validity only.
  bool object_any(int depth);
  bool array(int depth);
  // A value at p_ as tumorboard._json.json_text writes it (json.dumps with ensure_ascii=False
  // and sort_keys=True): members of an object sorted by key, a repeated key's last value, ", "
  // and ": " between, strings escaped as json.dumps escapes them, floats as repr() writes them.
  bool canonical(std::string& out, int depth);

  const std::uint8_t* p_ = nullptr;
  const std::uint8_t* e_ = nullptr;
  const int max_depth_;
  const char* reason_ = "";
  std::string key_;  // a key with escapes, decoded (key_text)
};

namespace json_detail {

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

inline void append_utf8(std::string& out, std::uint32_t cp) {
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

}  // namespace json_detail

// The grammar's methods, inline: the field reader calls them for every value of every line.

inline bool JsonCursor::fail(const char* why) {
  reason_ = why;
  return false;
}

inline void JsonCursor::space() {
  while (p_ < e_ && is_json_space(*p_)) ++p_;
}

inline bool JsonCursor::literal(const char* word, std::size_t n) {
  if (static_cast<std::size_t>(e_ - p_) < n || std::memcmp(p_, word, n) != 0) {
    return fail("not JSON (an invalid value)");
  }
  p_ += n;
  return true;
}

// Advances p_ to the next byte of a string that is not plain ASCII text: a quote, a
// backslash, a control character or a byte of a UTF-8 sequence (or to the end).
inline void JsonCursor::skip_plain() {
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
inline bool JsonCursor::string(std::string* out) {
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
        std::int32_t cp = json_detail::hex4(p_);
        if (cp < 0) return fail("not JSON (an invalid \\u escape)");
        p_ += 4;
        if (cp >= 0xDC00 && cp <= 0xDFFF) return fail("a lone surrogate escape");
        if (cp >= 0xD800 && cp <= 0xDBFF) {  // a pair, or a lone surrogate
          const std::int32_t low = e_ - p_ >= 6 && p_[0] == '\\' && p_[1] == 'u' ? json_detail::hex4(p_ + 2)
                                                                                   : -1;
          if (low < 0xDC00 || low > 0xDFFF) return fail("a lone surrogate escape");
          cp = 0x10000 + ((cp - 0xD800) << 10) + (low - 0xDC00);
          p_ += 6;
        }
        if (out != nullptr) json_detail::append_utf8(*out, static_cast<std::uint32_t>(cp));
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
inline bool JsonCursor::key_text(std::string_view& key) {
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

inline bool JsonCursor::number(Number& n) {
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

inline bool JsonCursor::value(int depth) {
  if (p_ >= e_) return fail("not JSON (a value is missing)");
  switch (*p_) {
    case '{':
      return object_any(depth + 1);
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

template <class OnMember>
bool JsonCursor::members(int depth, OnMember&& on_member) {
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
    if (!on_member(key)) return false;
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

template <class OnElement>
bool JsonCursor::elements(int depth, OnElement&& on_element) {
  if (depth > max_depth_) return fail("JSON nested too deep");
  ++p_;
  space();
  if (p_ < e_ && *p_ == ']') {
    ++p_;
    return true;
  }
  for (;;) {
    space();
    if (!on_element()) return false;
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

inline bool JsonCursor::object_any(int depth) {
  return members(depth, [&](std::string_view /*key*/) { return value(depth); });
}

inline bool JsonCursor::array(int depth) {
  return elements(depth, [&] { return value(depth); });
}

}  // namespace tb::traj
