#include "traj/jsonl.hpp"

#include <array>
#include <charconv>
#include <cstring>
#include <string>

#include "common/parallel.hpp"
#include "traj/blake2b.hpp"
#include "traj/utf8_check.hpp"

namespace tb::traj {

namespace {

inline bool is_blank(std::uint8_t c) {
  return c == ' ' || c == '\t' || c == '\r' || c == 0x0B || c == 0x0C;
}

inline bool is_digit(std::uint8_t c) { return c >= '0' && c <= '9'; }

inline bool is_hex_high(std::uint8_t c) {  // the third character of a surrogate's escape
  return c == '8' || c == '9' || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F');
}

// Whether p[i] (a backslash) starts an escape that can decode to a surrogate (\uD800-\uDFFF):
// a pair is fine, a lone one is not Unicode text; load_json's walk tells them apart.
inline bool surrogate_escape_at(const std::uint8_t* p, std::size_t i, std::size_t n) {
  return i + 3 < n && p[i + 1] == 'u' && (p[i + 2] == 'd' || p[i + 2] == 'D') &&
         is_hex_high(p[i + 3]);
}

// Whether the run of len digits at p[start] is an exponent of three digits or more (e[+]ddd),
// which can be past a double's range; load_json's walk decides.
inline bool long_exponent_at(const std::uint8_t* p, std::size_t start, std::size_t len) {
  if (len < 3 || start < 1) return false;
  const std::uint8_t before = p[start - 1];
  return before == 'e' || before == 'E' ||
         (before == '+' && start >= 2 && (p[start - 2] == 'e' || p[start - 2] == 'E'));
}

inline std::uint64_t load8(const std::uint8_t* p) {
  std::uint64_t w;
  std::memcpy(&w, p, 8);
  return w;
}

// Whether any of the eight bytes of w is c: the has-a-zero-byte test of w ^ (c repeated), which
// is exact for "any" (Hacker's Delight, 6-1).
inline bool has_byte(std::uint64_t w, std::uint8_t c) {
  const std::uint64_t x = w ^ (0x0101010101010101ull * c);
  return ((x - 0x0101010101010101ull) & ~x & 0x8080808080808080ull) != 0;
}

// Strict UTF-8 (utf8_length at every sequence); ASCII eight bytes at a time.
bool utf8_valid(const std::uint8_t* p, std::size_t n) {
  std::size_t i = 0;
  while (i < n) {
    if (i + 8 <= n && (load8(p + i) & 0x8080808080808080ull) == 0) {
      i += 8;
    } else if (p[i] < 0x80) {
      ++i;
    } else {
      const std::size_t len = utf8_length(p + i, n - i);
      if (len == 0) return false;
      i += len;
    }
  }
  return true;
}

}  // namespace

// Byte classes of scan_chunk: 0 for the bytes it passes over (most text).
enum : std::uint8_t { kPlain = 0, kNewline, kOpen, kBackslash, kDigit, kHigh };

const std::array<std::uint8_t, 256>& byte_classes() {
  static const std::array<std::uint8_t, 256> table = [] {
    std::array<std::uint8_t, 256> t{};
    t['\n'] = kNewline;
    t['['] = kOpen;
    t['{'] = kOpen;
    t['\\'] = kBackslash;
    for (int c = '0'; c <= '9'; ++c) t[c] = kDigit;
    for (int c = 0x80; c < 256; ++c) t[c] = kHigh;
    return t;
  }();
  return table;
}

ChunkScan scan_chunk(const std::uint8_t* p, std::size_t n) {
  const auto& cls = byte_classes();
  ChunkScan out;
  std::int64_t brackets = 0;  // on the current line
  std::size_t i = 0;
  auto line_begin = [&] {  // the first byte but blanks of a line must open an object
    while (i < n && is_blank(p[i])) ++i;
    if (i < n && p[i] != '\n' && p[i] != '{') out.every_line_object = false;
  };
  line_begin();
  while (i < n) {
    while (i < n && cls[p[i]] == kPlain) ++i;
    if (i >= n) break;
    switch (cls[p[i]]) {
      case kNewline:
        if (brackets > out.max_brackets) out.max_brackets = brackets;
        brackets = 0;
        ++i;
        line_begin();
        break;
      case kOpen:
        ++brackets;
        ++i;
        break;
      case kBackslash:  // an escape that can decode to a surrogate: \uD800-\uDFFF
        if (surrogate_escape_at(p, i, n)) out.may_break_limits = true;
        ++i;
        break;
      case kDigit: {  // a run of 19 digits (past 64 bits) or an exponent e[+]ddd (past a double)
        const std::size_t start = i;
        while (i < n && is_digit(p[i])) ++i;
        const std::size_t len = i - start;
        if (len >= 19 || long_exponent_at(p, start, len)) out.may_break_limits = true;
        break;
      }
      default: {  // kHigh: a UTF-8 sequence
        const std::size_t len = utf8_length(p + i, n - i);
        if (len == 0) {
          out.utf8 = false;
          ++i;
        } else {
          i += len;
        }
        break;
      }
    }
  }
  if (brackets > out.max_brackets) out.max_brackets = brackets;
  return out;
}

DocumentScan scan_document(const std::uint8_t* p, std::size_t n) {
  DocumentScan out;
  out.utf8 = utf8_valid(p, n);
  std::int64_t depth = 0;
  bool in_string = false;
  std::size_t i = 0;
  while (i < n) {
    if (in_string) {
      // text without a quote or a backslash: eight bytes at a time
      while (i + 8 <= n) {
        const std::uint64_t w = load8(p + i);
        if (has_byte(w, '"') || has_byte(w, '\\')) break;
        i += 8;
      }
      if (i >= n) break;
      if (p[i] == '\\') {
        if (surrogate_escape_at(p, i, n)) out.may_break_limits = true;
        i += 2;  // the backslash and the escaped byte, whatever it is
        continue;
      }
      if (p[i] == '"') in_string = false;
      ++i;
      continue;
    }
    const std::uint8_t c = p[i];
    if (c == '"') {
      in_string = true;
    } else if (c == '[' || c == '{') {
      if (++depth > out.max_depth) out.max_depth = depth;
    } else if (c == ']' || c == '}') {
      --depth;
    } else if (is_digit(c)) {  // a number: an integer part of 19 digits, or an exponent e[+]ddd
      const std::size_t start = i;
      while (i + 1 < n && is_digit(p[i + 1])) ++i;
      const std::size_t len = i - start + 1;
      const bool fraction = start >= 1 && p[start - 1] == '.';  // digits after the point
      if ((len >= 19 && !fraction) || long_exponent_at(p, start, len)) {
        out.may_break_limits = true;
      }
    }
    ++i;
  }
  return out;
}

void line_digests(std::string_view fp, const std::vector<std::string_view>& ids,
                  const std::int64_t* positions, const std::vector<std::string_view>& lines,
                  char* out, int threads) {
  static constexpr char kHex[] = "0123456789abcdef";
  static constexpr char kNul = '\0';
  parallel_blocks(static_cast<std::int64_t>(lines.size()), threads,
                  [&](std::int64_t begin, std::int64_t end) {
                    for (std::int64_t i = begin; i < end; ++i) {
                      Blake2b h(16);
                      h.update(fp.data(), fp.size());
                      h.update(&kNul, 1);
                      h.update(ids[i].data(), ids[i].size());
                      h.update(&kNul, 1);
                      char pos[24];
                      const auto written = std::to_chars(pos, pos + sizeof pos, positions[i]);
                      h.update(pos, static_cast<std::size_t>(written.ptr - pos));
                      h.update(&kNul, 1);
                      h.update(lines[i].data(), lines[i].size());
                      std::uint8_t digest[16];
                      h.final(digest);
                      char* o = out + 32 * i;
                      for (int k = 0; k < 16; ++k) {
                        o[2 * k] = kHex[digest[k] >> 4];
                        o[2 * k + 1] = kHex[digest[k] & 15];
                      }
                    }
                  });
}

}  // namespace tb::traj
