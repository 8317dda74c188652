// BLAKE2b as specified in RFC 7693 §3 (compression function F, mixing function G, the SIGMA
// message schedule) and §2.7 (the parameter block of an unkeyed hash: h[0] ^= 0x01010000 ^ nn).
#include "traj/blake2b.hpp"

#include <cstring>
#include <utility>

#include "traj/blake2b_constants.hpp"

namespace tb::traj {

namespace {

using blake2b_constants::kIV;
using blake2b_constants::kSigma;

inline std::uint64_t rotr(std::uint64_t x, int n) { return (x >> n) | (x << (64 - n)); }

inline std::uint64_t load64(const std::uint8_t* p) {
  std::uint64_t v = 0;
  for (int i = 7; i >= 0; --i) v = (v << 8) | p[i];  // little-endian words (RFC 7693 §2.4)
  return v;  // (compilers turn the loop into one load on little-endian machines)
}

// G of RFC 7693 §3.1 on v[A], v[B], v[C], v[D] with the message words x and y.
template <int A, int B, int C, int D>
inline void mix(std::uint64_t* v, std::uint64_t x, std::uint64_t y) {
  v[A] = v[A] + v[B] + x;
  v[D] = rotr(v[D] ^ v[A], 32);
  v[C] = v[C] + v[D];
  v[B] = rotr(v[B] ^ v[C], 24);
  v[A] = v[A] + v[B] + y;
  v[D] = rotr(v[D] ^ v[A], 16);
  v[C] = v[C] + v[D];
  v[B] = rotr(v[B] ^ v[C], 63);
}

// Round R of F (RFC 7693 §3.2), its message schedule fixed at compile time: every index is a
// constant, so v and m stay in registers across the twelve unrolled rounds.
template <int R>
inline void round(std::uint64_t* v, const std::uint64_t* m) {
  constexpr const std::uint8_t* s = kSigma[R];
  mix<0, 4, 8, 12>(v, m[s[0]], m[s[1]]);
  mix<1, 5, 9, 13>(v, m[s[2]], m[s[3]]);
  mix<2, 6, 10, 14>(v, m[s[4]], m[s[5]]);
  mix<3, 7, 11, 15>(v, m[s[6]], m[s[7]]);
  mix<0, 5, 10, 15>(v, m[s[8]], m[s[9]]);
  mix<1, 6, 11, 12>(v, m[s[10]], m[s[11]]);
  mix<2, 7, 8, 13>(v, m[s[12]], m[s[13]]);
  mix<3, 4, 9, 14>(v, m[s[14]], m[s[15]]);
}

template <int... R>
inline void rounds(std::uint64_t* v, const std::uint64_t* m,
                   std::integer_sequence<int, R...> /*rounds*/) {
  (round<R>(v, m), ...);
}

}  // namespace

Blake2b::Blake2b(std::size_t out_len) : t_{0, 0}, fill_(0), out_len_(out_len) {
  for (int i = 0; i < 8; ++i) h_[i] = kIV[i];
  h_[0] ^= 0x01010000ULL ^ static_cast<std::uint64_t>(out_len);
  std::memset(buf_, 0, sizeof buf_);
}

void Blake2b::compress(bool last) {
  std::uint64_t v[16];
  std::uint64_t m[16];
  for (int i = 0; i < 16; ++i) m[i] = load64(buf_ + 8 * i);
  for (int i = 0; i < 8; ++i) {
    v[i] = h_[i];
    v[i + 8] = kIV[i];
  }
  v[12] ^= t_[0];
  v[13] ^= t_[1];
  if (last) v[14] = ~v[14];
  rounds(v, m, std::make_integer_sequence<int, 12>{});
  for (int i = 0; i < 8; ++i) h_[i] ^= v[i] ^ v[i + 8];
}

void Blake2b::update(const void* data, std::size_t n) {
  const auto* p = static_cast<const std::uint8_t*>(data);
  while (n > 0) {
    if (fill_ == sizeof buf_) {  // a full block is compressed only once more input follows
      t_[0] += sizeof buf_;
      if (t_[0] < sizeof buf_) ++t_[1];
      compress(false);
      fill_ = 0;
    }
    const std::size_t take = n < sizeof buf_ - fill_ ? n : sizeof buf_ - fill_;
    std::memcpy(buf_ + fill_, p, take);
    fill_ += take;
    p += take;
    n -= take;
  }
}

void Blake2b::final(std::uint8_t* out) {
  t_[0] += fill_;
  if (t_[0] < fill_) ++t_[1];
  std::memset(buf_ + fill_, 0, sizeof buf_ - fill_);
  compress(true);
  for (std::size_t i = 0; i < out_len_; ++i) {
    out[i] = static_cast<std::uint8_t>(h_[i / 8] >> (8 * (i % 8)));
  }
}

}  // namespace tb::traj
