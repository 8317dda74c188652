// Philox4x32-10 of eight counters at once with AVX2 (Salmon et al., "Parallel random numbers: as
// easy as 1, 2, 3", SC 2011; the rounds and constants of rng::Philox4x32::block, lane by lane).
// The functions carry their own target attribute, so the core stays portable: callers check
// avx2_available() at run time and keep the scalar path otherwise. Same words, bit for bit.
#pragma once

#include <atomic>
#include <cstdint>

namespace tb::rng {

// Set by the test suite (_core.testing.set_scalar_only) to run the scalar paths on a machine
// with AVX2, so that both are compared; never set otherwise.
inline std::atomic<bool>& scalar_only_flag() {
  static std::atomic<bool> flag{false};
  return flag;
}

inline bool scalar_only() { return scalar_only_flag().load(std::memory_order_relaxed); }

}  // namespace tb::rng

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#include <immintrin.h>
#define TB_HAVE_AVX2_PATH 1

namespace tb::rng {

inline bool avx2_available() {
  static const bool yes = __builtin_cpu_supports("avx2");
  return yes;
}

// The low and the high 32-bit words of four 64-bit keys a and four b, in lane order.
__attribute__((target("avx2"))) inline void key_words8(const std::uint64_t* keys, __m256i* lo,
                                                       __m256i* hi) {
  const __m256i a = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(keys));
  const __m256i b = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(keys + 4));
  const __m256i idx = _mm256_setr_epi32(0, 2, 4, 6, 1, 3, 5, 7);
  const __m256i pa = _mm256_permutevar8x32_epi32(a, idx);
  const __m256i pb = _mm256_permutevar8x32_epi32(b, idx);
  *lo = _mm256_permute2x128_si256(pa, pb, 0x20);
  *hi = _mm256_permute2x128_si256(pa, pb, 0x31);
}

// One Philox4x32 round of eight lanes with round keys ka, kb: 32 x 32 -> 64-bit products of the
// even lanes, then of the odd lanes; hi and lo words back in lane order.
__attribute__((target("avx2"))) inline void philox_round8(__m256i& x0, __m256i& x1, __m256i& x2,
                                                          __m256i& x3, __m256i ka, __m256i kb) {
  const __m256i m0 = _mm256_set1_epi64x(0xD2511F53u), m1 = _mm256_set1_epi64x(0xCD9E8D57u);
  const __m256i e0 = _mm256_mul_epu32(x0, m0);
  const __m256i o0 = _mm256_mul_epu32(_mm256_srli_epi64(x0, 32), m0);
  const __m256i e1 = _mm256_mul_epu32(x2, m1);
  const __m256i o1 = _mm256_mul_epu32(_mm256_srli_epi64(x2, 32), m1);
  const __m256i lo0 = _mm256_blend_epi32(e0, _mm256_slli_epi64(o0, 32), 0xAA);
  const __m256i hi0 = _mm256_blend_epi32(_mm256_srli_epi64(e0, 32), o0, 0xAA);
  const __m256i lo1 = _mm256_blend_epi32(e1, _mm256_slli_epi64(o1, 32), 0xAA);
  const __m256i hi1 = _mm256_blend_epi32(_mm256_srli_epi64(e1, 32), o1, 0xAA);
  x0 = _mm256_xor_si256(_mm256_xor_si256(hi1, x1), ka);
  x1 = lo1;
  x2 = _mm256_xor_si256(_mm256_xor_si256(hi0, x3), kb);
  x3 = lo0;
}

__attribute__((target("avx2"))) inline void store_words(__m256i out[4], __m256i x0, __m256i x1,
                                                        __m256i x2, __m256i x3) {
  out[0] = x0;
  out[1] = x1;
  out[2] = x2;
  out[3] = x3;
}

// out[j] (j = 0..3) holds word j of the Philox4x32-10 block of each lane l = 0..7, whose counter
// is {c0, lo32(keys[l]), hi32(keys[l]), c3} and key (k0, k1).
__attribute__((target("avx2"))) inline void philox8(std::uint32_t c0, const std::uint64_t* keys,
                                                    std::uint32_t c3, std::uint32_t k0,
                                                    std::uint32_t k1, __m256i out[4]) {
  __m256i x1, x2;
  key_words8(keys, &x1, &x2);
  __m256i x0 = _mm256_set1_epi32(static_cast<int>(c0));
  __m256i x3 = _mm256_set1_epi32(static_cast<int>(c3));
  for (int round = 0; round < 10; ++round) {
    philox_round8(x0, x1, x2, x3, _mm256_set1_epi32(static_cast<int>(k0)),
                  _mm256_set1_epi32(static_cast<int>(k1)));
    k0 += 0x9E3779B9u;
    k1 += 0xBB67AE85u;
  }
  store_words(out, x0, x1, x2, x3);
}

// philox8 of keys[0..7] (into a) and keys[8..15] (into b), the two blocks' rounds interleaved:
// each round's multiplies wait on the previous round, so one block alone leaves the vector units
// idle half the time. The same words as two philox8 calls.
__attribute__((target("avx2"))) inline void philox16(std::uint32_t c0, const std::uint64_t* keys,
                                                     std::uint32_t c3, std::uint32_t k0,
                                                     std::uint32_t k1, __m256i a[4],
                                                     __m256i b[4]) {
  __m256i a1, a2, b1, b2;
  key_words8(keys, &a1, &a2);
  key_words8(keys + 8, &b1, &b2);
  __m256i a0 = _mm256_set1_epi32(static_cast<int>(c0)), b0 = a0;
  __m256i a3 = _mm256_set1_epi32(static_cast<int>(c3)), b3 = a3;
#pragma GCC unroll 10
  for (int round = 0; round < 10; ++round) {
    const __m256i ka = _mm256_set1_epi32(static_cast<int>(k0));
    const __m256i kb = _mm256_set1_epi32(static_cast<int>(k1));
    philox_round8(a0, a1, a2, a3, ka, kb);
    philox_round8(b0, b1, b2, b3, ka, kb);
    k0 += 0x9E3779B9u;
    k1 += 0xBB67AE85u;
  }
  store_words(a, a0, a1, a2, a3);
  store_words(b, b0, b1, b2, b3);
}

}  // namespace tb::rng

#endif
