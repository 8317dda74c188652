// Strict UTF-8 as Python's bytes.decode("utf-8") accepts it, for the JSON-lines readers
// (jsonl.cpp, jsonl_columns.cpp): the well-formed byte sequences of the Unicode Standard,
// Table 3-7 (no overlong forms, no encoded surrogates U+D800..U+DFFF, nothing past U+10FFFF).
#pragma once

#include <cstddef>
#include <cstdint>

namespace tb::traj {

// The length of the valid UTF-8 sequence at p[0 .. n), or 0 when it is not valid.
inline std::size_t utf8_length(const std::uint8_t* p, std::size_t n) {
  const std::uint8_t b = p[0];
  auto cont = [&](std::size_t k, std::uint8_t lo, std::uint8_t hi) {
    return k < n && p[k] >= lo && p[k] <= hi;
  };
  if (b < 0x80) return 1;
  if (b >= 0xC2 && b <= 0xDF) return cont(1, 0x80, 0xBF) ? 2 : 0;
  if (b == 0xE0) return cont(1, 0xA0, 0xBF) && cont(2, 0x80, 0xBF) ? 3 : 0;
  if ((b >= 0xE1 && b <= 0xEC) || b == 0xEE || b == 0xEF) {
    return cont(1, 0x80, 0xBF) && cont(2, 0x80, 0xBF) ? 3 : 0;
  }
  if (b == 0xED) return cont(1, 0x80, 0x9F) && cont(2, 0x80, 0xBF) ? 3 : 0;  // no surrogates
  if (b == 0xF0) return cont(1, 0x90, 0xBF) && cont(2, 0x80, 0xBF) && cont(3, 0x80, 0xBF) ? 4 : 0;
  if (b >= 0xF1 && b <= 0xF3) {
    return cont(1, 0x80, 0xBF) && cont(2, 0x80, 0xBF) && cont(3, 0x80, 0xBF) ? 4 : 0;
  }
  if (b == 0xF4) return cont(1, 0x80, 0x8F) && cont(2, 0x80, 0xBF) && cont(3, 0x80, 0xBF) ? 4 : 0;
  return 0;
}

}  // namespace tb::traj
