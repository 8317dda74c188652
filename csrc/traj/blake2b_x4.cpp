#include "traj/blake2b_x4.hpp"

#include <algorithm>
#include <cstring>
#include <utility>

#include "common/philox_avx2.hpp"
#include "traj/blake2b_constants.hpp"

#if defined(TB_HAVE_AVX2_PATH)

namespace tb::traj {

namespace {

using blake2b_constants::kIV;
using blake2b_constants::kSigma;

#define TB_AVX2 __attribute__((target("avx2"), always_inline)) inline

TB_AVX2 __m256i rotr32(__m256i x) { return _mm256_shuffle_epi32(x, _MM_SHUFFLE(2, 3, 0, 1)); }

TB_AVX2 __m256i rotr24(__m256i x) {
  const __m256i idx = _mm256_setr_epi8(3, 4, 5, 6, 7, 0, 1, 2, 11, 12, 13, 14, 15, 8, 9, 10, 3, 4,
                                       5, 6, 7, 0, 1, 2, 11, 12, 13, 14, 15, 8, 9, 10);
  return _mm256_shuffle_epi8(x, idx);
}

TB_AVX2 __m256i rotr16(__m256i x) {
  const __m256i idx = _mm256_setr_epi8(2, 3, 4, 5, 6, 7, 0, 1, 10, 11, 12, 13, 14, 15, 8, 9, 2, 3,
                                       4, 5, 6, 7, 0, 1, 10, 11, 12, 13, 14, 15, 8, 9);
  return _mm256_shuffle_epi8(x, idx);
}

TB_AVX2 __m256i rotr63(__m256i x) {
  return _mm256_or_si256(_mm256_srli_epi64(x, 63), _mm256_add_epi64(x, x));
}

// G of RFC 7693 §3.1 on four lanes.
template <int A, int B, int C, int D>
TB_AVX2 void mix4(__m256i* v, __m256i x, __m256i y) {
  v[A] = _mm256_add_epi64(_mm256_add_epi64(v[A], v[B]), x);
  v[D] = rotr32(_mm256_xor_si256(v[D], v[A]));
  v[C] = _mm256_add_epi64(v[C], v[D]);
  v[B] = rotr24(_mm256_xor_si256(v[B], v[C]));
  v[A] = _mm256_add_epi64(_mm256_add_epi64(v[A], v[B]), y);
  v[D] = rotr16(_mm256_xor_si256(v[D], v[A]));
  v[C] = _mm256_add_epi64(v[C], v[D]);
  v[B] = rotr63(_mm256_xor_si256(v[B], v[C]));
}

template <int R>
TB_AVX2 void round4(__m256i* v, const __m256i* m) {
  constexpr const std::uint8_t* s = kSigma[R];
  mix4<0, 4, 8, 12>(v, m[s[0]], m[s[1]]);
  mix4<1, 5, 9, 13>(v, m[s[2]], m[s[3]]);
  mix4<2, 6, 10, 14>(v, m[s[4]], m[s[5]]);
  mix4<3, 7, 11, 15>(v, m[s[6]], m[s[7]]);
  mix4<0, 5, 10, 15>(v, m[s[8]], m[s[9]]);
  mix4<1, 6, 11, 12>(v, m[s[10]], m[s[11]]);
  mix4<2, 7, 8, 13>(v, m[s[12]], m[s[13]]);
  mix4<3, 4, 9, 14>(v, m[s[14]], m[s[15]]);
}

template <int... R>
TB_AVX2 void rounds4(__m256i* v, const __m256i* m, std::integer_sequence<int, R...> /*rounds*/) {
  (round4<R>(v, m), ...);
}

#undef TB_AVX2

}  // namespace

__attribute__((target("avx2"))) void blake2b_128_x4(const std::string_view* msgs,
                                                     std::uint8_t* out) {
  std::size_t blocks[4];
  std::size_t most = 1;
  for (int j = 0; j < 4; ++j) {
    blocks[j] = std::max<std::size_t>(1, (msgs[j].size() + 127) / 128);
    most = std::max(most, blocks[j]);
  }
  __m256i h[8];
  for (int i = 0; i < 8; ++i) h[i] = _mm256_set1_epi64x(static_cast<long long>(kIV[i]));
  h[0] = _mm256_xor_si256(h[0], _mm256_set1_epi64x(0x01010000LL ^ 16));
  alignas(32) std::uint64_t words[16][4];  // block words, lane by lane
  alignas(32) std::uint64_t counter[4];
  alignas(32) std::uint64_t last[4];
  alignas(32) std::uint64_t active[4];
  for (std::size_t b = 0; b < most; ++b) {
    for (int j = 0; j < 4; ++j) {
      std::uint8_t block[128] = {};  // the last block zero-padded (RFC 7693 §3.3)
      const std::size_t at = 128 * b;
      const std::size_t size = msgs[j].size();
      if (b < blocks[j] && at < size) {
        std::memcpy(block, msgs[j].data() + at, std::min<std::size_t>(128, size - at));
      }
      for (int i = 0; i < 16; ++i) std::memcpy(&words[i][j], block + 8 * i, 8);  // little endian
      counter[j] = std::min<std::size_t>(size, at + 128);
      last[j] = b + 1 == blocks[j] ? ~0ULL : 0;
      active[j] = b < blocks[j] ? ~0ULL : 0;
    }
    __m256i m[16];
    for (int i = 0; i < 16; ++i) m[i] = _mm256_load_si256(reinterpret_cast<const __m256i*>(words[i]));
    __m256i v[16];
    for (int i = 0; i < 8; ++i) {
      v[i] = h[i];
      v[i + 8] = _mm256_set1_epi64x(static_cast<long long>(kIV[i]));
    }
    v[12] = _mm256_xor_si256(v[12], _mm256_load_si256(reinterpret_cast<const __m256i*>(counter)));
    v[14] = _mm256_xor_si256(v[14], _mm256_load_si256(reinterpret_cast<const __m256i*>(last)));
    rounds4(v, m, std::make_integer_sequence<int, 12>{});
    const __m256i keep = _mm256_load_si256(reinterpret_cast<const __m256i*>(active));
    for (int i = 0; i < 8; ++i) {
      const __m256i next = _mm256_xor_si256(h[i], _mm256_xor_si256(v[i], v[i + 8]));
      h[i] = _mm256_blendv_epi8(h[i], next, keep);
    }
  }
  alignas(32) std::uint64_t h0[4];
  alignas(32) std::uint64_t h1[4];
  _mm256_store_si256(reinterpret_cast<__m256i*>(h0), h[0]);
  _mm256_store_si256(reinterpret_cast<__m256i*>(h1), h[1]);
  for (int j = 0; j < 4; ++j) {
    std::memcpy(out + 16 * j, &h0[j], 8);  // little endian words (RFC 7693 §2.4)
    std::memcpy(out + 16 * j + 8, &h1[j], 8);
  }
}

}  // namespace tb::traj

#endif
