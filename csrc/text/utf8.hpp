// UTF-8 decoding for the text metrics, in one place (RFC 3629, section 3).
//
// Python strings reach the core as UTF-8; lone surrogates are encoded with Python's
// "surrogatepass" error handler, i.e. as the three-byte sequences ED A0 80 .. ED BF BF, and
// decode here like any other code point. The decoder is lenient and never reads past the end: a
// byte that does not start a complete sequence of a lead byte followed by continuation bytes
// decodes as kInvalidCodePoint with length 1, so a scan always advances one byte past it.
// Overlong forms are not rejected (Python's encoder never produces them).
#pragma once

#include <cstddef>
#include <cstdint>

namespace tb::text {

// The code point reported for a byte that does not start a well-formed sequence.
inline constexpr std::uint32_t kInvalidCodePoint = 0xFFFFFFFFu;

// Decodes the code point starting at p[0] of the n > 0 bytes p[0 .. n) into cp and returns its
// length in bytes (1 to 4); malformed input gives cp = kInvalidCodePoint and length 1.
inline std::size_t decode_utf8(const unsigned char* p, std::size_t n, std::uint32_t& cp) {
  const unsigned char b0 = p[0];
  if (b0 < 0x80) {
    cp = b0;
    return 1;
  }
  std::size_t len;
  std::uint32_t v;
  if ((b0 & 0xE0) == 0xC0) {
    len = 2;
    v = b0 & 0x1F;
  } else if ((b0 & 0xF0) == 0xE0) {
    len = 3;
    v = b0 & 0x0F;
  } else if ((b0 & 0xF8) == 0xF0) {
    len = 4;
    v = b0 & 0x07;
  } else {
    cp = kInvalidCodePoint;
    return 1;
  }
  if (len > n) {
    cp = kInvalidCodePoint;
    return 1;
  }
  for (std::size_t k = 1; k < len; ++k) {
    if ((p[k] & 0xC0) != 0x80) {
      cp = kInvalidCodePoint;
      return 1;
    }
    v = (v << 6) | (p[k] & 0x3F);
  }
  cp = v;
  return len;
}

}  // namespace tb::text
