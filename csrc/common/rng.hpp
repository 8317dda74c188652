// Counter-based random numbers: Philox4x32-10 (Salmon et al., "Parallel random numbers: as easy as
// 1, 2, 3", SC 2011), a SplitMix64-seeded xoshiro256++ stream (Blackman & Vigna 2018) keyed by a
// Philox block, Lemire's unbiased bounded integers (ACM TOMACS 2019) and a fixed 64-bit hash.
//
// Every random draw in tumorboard is a pure function of (seed, stream key, position), so results do
// not depend on the number of threads or on how the work is split.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <cstring>

namespace tb::rng {

// Domain tags keep the streams of different engines apart even for equal (seed, key) pairs.
enum class Domain : std::uint32_t {
  kIndexResample = 0x1d3c5a01u,
  kCountResample = 0x2e4b6902u,
  kPoisson = 0x3f5a7803u,
};

struct Philox4x32 {
  using Counter = std::array<std::uint32_t, 4>;
  using Key = std::array<std::uint32_t, 2>;

  static inline void mulhilo(std::uint32_t a, std::uint32_t b, std::uint32_t& hi,
                             std::uint32_t& lo) {
    const std::uint64_t p = static_cast<std::uint64_t>(a) * b;
    hi = static_cast<std::uint32_t>(p >> 32);
    lo = static_cast<std::uint32_t>(p);
  }

  // Ten rounds, the constants of the reference implementation (Random123).
  static inline Counter block(Counter c, Key k) {
    constexpr std::uint32_t kM0 = 0xD2511F53u, kM1 = 0xCD9E8D57u;
    constexpr std::uint32_t kW0 = 0x9E3779B9u, kW1 = 0xBB67AE85u;
    for (int round = 0; round < 10; ++round) {
      std::uint32_t hi0, lo0, hi1, lo1;
      mulhilo(kM0, c[0], hi0, lo0);
      mulhilo(kM1, c[2], hi1, lo1);
      c = {hi1 ^ c[1] ^ k[0], lo1, hi0 ^ c[3] ^ k[1], lo0};
      k[0] += kW0;
      k[1] += kW1;
    }
    return c;
  }
};

inline Philox4x32::Key key_from_seed(std::uint64_t seed) {
  return {static_cast<std::uint32_t>(seed), static_cast<std::uint32_t>(seed >> 32)};
}

inline std::uint64_t splitmix64(std::uint64_t& state) {
  std::uint64_t z = (state += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

// Finalizer of SplitMix64 applied to one word: a fixed, platform-independent 64-bit mixer.
inline std::uint64_t mix64(std::uint64_t z) {
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

// A fixed hash of a byte string (FNV-1a 64 over the bytes, then the SplitMix64 finalizer).
// Stable across platforms and releases: Poisson-bootstrap weights keyed by string record keys
// depend on it, so it must never change.
inline std::uint64_t stable_hash(const char* data, std::size_t len) {
  std::uint64_t h = 0xcbf29ce484222325ull;
  for (std::size_t i = 0; i < len; ++i) {
    h ^= static_cast<unsigned char>(data[i]);
    h *= 0x100000001b3ull;
  }
  return mix64(h ^ static_cast<std::uint64_t>(len));
}

// xoshiro256++ whose 256-bit state is one Philox block of (seed; key, position, domain).
class Stream {
 public:
  Stream(std::uint64_t seed, std::uint64_t key, std::uint32_t position, Domain domain) {
    const Philox4x32::Counter ctr = {static_cast<std::uint32_t>(key),
                                     static_cast<std::uint32_t>(key >> 32), position,
                                     static_cast<std::uint32_t>(domain)};
    const auto a = Philox4x32::block(ctr, key_from_seed(seed));
    std::uint64_t sm = (static_cast<std::uint64_t>(a[0]) << 32 | a[1]) ^
                       (static_cast<std::uint64_t>(a[2]) << 32 | a[3]);
    for (auto& w : s_) w = splitmix64(sm);
  }

  inline std::uint64_t next() {
    const std::uint64_t result = rotl(s_[0] + s_[3], 23) + s_[0];
    const std::uint64_t t = s_[1] << 17;
    s_[2] ^= s_[0];
    s_[3] ^= s_[1];
    s_[1] ^= s_[2];
    s_[0] ^= s_[3];
    s_[2] ^= t;
    s_[3] = rotl(s_[3], 45);
    return result;
  }

  // Uniform on [0, 1) with 53 random bits.
  inline double uniform() { return static_cast<double>(next() >> 11) * 0x1.0p-53; }

  // Uniform on (0, 1): never exactly zero (for logarithms).
  inline double uniform_open() {
    return (static_cast<double>(next() >> 11) + 0.5) * 0x1.0p-53;
  }

 private:
  static inline std::uint64_t rotl(std::uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }
  std::array<std::uint64_t, 4> s_{};
};

// Unbiased integers in [0, range) by Lemire's multiply-and-reject (ACM TOMACS 2019), taking
// `Bits`-bit candidates from the stream (64 / Bits per word): Bits = 32 for range < 2^32, and
// Bits = 16 for small ranges (<= 256, rejection below 0.4%) to halve the generator cost.
template <int Bits>
class BoundedDraws {
  static_assert(Bits == 16 || Bits == 32, "16- or 32-bit candidates");
  static constexpr int kPerWord = 64 / Bits;
  static constexpr std::uint64_t kMask = (std::uint64_t{1} << Bits) - 1;

 public:
  BoundedDraws(Stream& stream, std::uint32_t range) : stream_(stream), range_(range) {}

  inline std::uint32_t next() {
    for (;;) {
      const std::uint64_t m = take() * range_;
      const std::uint64_t low = m & kMask;
      // low >= range implies low >= (2^Bits mod range): accept without the division.
      if (low >= range_ || low >= threshold()) return static_cast<std::uint32_t>(m >> Bits);
    }
  }

 private:
  inline std::uint64_t take() {
    if (left_ == 0) {
      buffer_ = stream_.next();
      left_ = kPerWord;
    }
    const std::uint64_t x = buffer_ & kMask;
    buffer_ >>= (Bits % 64);
    --left_;
    return x;
  }
  inline std::uint64_t threshold() {
    if (threshold_ < 0) {
      threshold_ = static_cast<std::int64_t>(((kMask + 1) - range_) % range_);
    }
    return static_cast<std::uint64_t>(threshold_);
  }
  Stream& stream_;
  std::uint64_t range_;
  std::int64_t threshold_ = -1;
  std::uint64_t buffer_ = 0;
  int left_ = 0;
};

}  // namespace tb::rng
