#include "traj/jsonl.hpp"

#include <algorithm>
#include <array>
#include <charconv>
#include <cstring>
#include <string>

#include "common/parallel.hpp"
#include "common/philox_avx2.hpp"
#include "traj/blake2b.hpp"
#include "traj/blake2b_x4.hpp"
#include "traj/utf8_check.hpp"

namespace tb::traj {

namespace {

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

namespace {

// The bytes one item digest is taken of: fp NUL id NUL position NUL line.
void digest_message(std::string_view fp, std::string_view id, std::int64_t position,
                    std::string_view line, std::string& out) {
  char pos[24];
  const auto written = std::to_chars(pos, pos + sizeof pos, position);
  out.clear();
  out.append(fp).push_back('\0');
  out.append(id).push_back('\0');
  out.append(pos, written.ptr).push_back('\0');
  out.append(line);
}

void write_hex(const std::uint8_t* digest, char* o) {
  static constexpr char kHex[] = "0123456789abcdef";
  for (int k = 0; k < 16; ++k) {
    o[2 * k] = kHex[digest[k] >> 4];
    o[2 * k + 1] = kHex[digest[k] & 15];
  }
}

}  // namespace

void line_digests(std::string_view fp, const std::vector<std::string_view>& ids,
                  const std::int64_t* positions, const std::vector<std::string_view>& lines,
                  char* out, int threads) {
#if defined(TB_HAVE_AVX2_PATH)
  const bool wide = rng::avx2_available() && !rng::scalar_only();
#else
  const bool wide = false;
#endif
  const auto n = static_cast<std::int64_t>(lines.size());
  // blocks of whole groups of four, so that a digest never depends on the block boundaries
  parallel_blocks((n + 3) / 4, threads, [&](std::int64_t begin, std::int64_t end) {
    std::string msgs[4];
    std::uint8_t digest[64];
    for (std::int64_t g = begin; g < end; ++g) {
      const std::int64_t first = 4 * g;
      const std::int64_t count = std::min<std::int64_t>(4, n - first);
      for (std::int64_t j = 0; j < count; ++j) {
        digest_message(fp, ids[first + j], positions[first + j], lines[first + j], msgs[j]);
      }
#if defined(TB_HAVE_AVX2_PATH)
      if (wide) {
        std::string_view views[4];
        for (int j = 0; j < 4; ++j) views[j] = msgs[j < count ? j : 0];
        blake2b_128_x4(views, digest);
        for (std::int64_t j = 0; j < count; ++j) write_hex(digest + 16 * j, out + 32 * (first + j));
        continue;
      }
#endif
      for (std::int64_t j = 0; j < count; ++j) {
        Blake2b h(16);
        h.update(msgs[j].data(), msgs[j].size());
        h.final(digest);
        write_hex(digest, out + 32 * (first + j));
      }
    }
  });
}

}  // namespace tb::traj
