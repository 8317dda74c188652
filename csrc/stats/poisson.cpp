#include "poisson.hpp"

#include <algorithm>
#include <array>
#include <cmath>
#include <stdexcept>
#include <string>

#include "../common/parallel.hpp"
#include "../common/philox_avx2.hpp"
#include "../common/rng.hpp"

namespace tb::stats {
namespace {

// T[j] = round(2^32 * P(W <= j)), W ~ Poisson(1); the last entry is forced to 2^32.
const std::array<std::uint64_t, 16>& poisson_thresholds() {
  static const std::array<std::uint64_t, 16> table = [] {
    std::array<std::uint64_t, 16> t{};
    double pmf = std::exp(-1.0), cdf = 0.0;
    for (int j = 0; j < 16; ++j) {
      cdf += pmf;
      pmf /= static_cast<double>(j + 1);
      t[j] = std::min<std::uint64_t>(std::llround(std::ldexp(cdf, 32)), std::uint64_t{1} << 32);
    }
    t[15] = std::uint64_t{1} << 32;
    return t;
  }();
  return table;
}

double to_double(int128 v, int scale) { return std::ldexp(static_cast<double>(v), -scale); }

}  // namespace

namespace {

// The count of thresholds at or below x (t is nondecreasing and t[15] = 2^32 > x): the first
// four without a branch (W <= 3 has probability 0.981), the rest by a loop.
inline int poisson1_from_table(std::uint32_t x, const std::array<std::uint64_t, 16>& t) {
  int w = (x >= t[0]) + (x >= t[1]) + (x >= t[2]) + (x >= t[3]);
  if (w == 4) [[unlikely]] {
    while (x >= t[w]) ++w;
  }
  return w;
}

}  // namespace

int poisson1_from_u32(std::uint32_t x) { return poisson1_from_table(x, poisson_thresholds()); }

#ifdef TB_HAVE_AVX2_PATH
// Threshold j as a sign-flipped 32-bit lane (j < 8: every such threshold is below 2^32).
__attribute__((target("avx2"))) inline __m256i flipped_threshold(
    const std::array<std::uint64_t, 16>& table, int j) {
  return _mm256_set1_epi32(static_cast<int>(static_cast<std::uint32_t>(table[j]) ^ 0x80000000u));
}

// poisson1_from_table of the eight words of r: the count of thresholds at or below each word,
// compared eight lanes at a time (x >= t unsigned as !(t > x) on sign-flipped words). The first
// four thresholds always (W <= 3: probability 0.981), the next four where a lane passed them all
// (one call in seven has such a lane), the rest lane by lane (W >= 8: 1e-5 a lane).
__attribute__((target("avx2"))) inline __m256i poisson_from_words8(
    __m256i r, const std::array<std::uint64_t, 16>& table) {
  const __m256i x = _mm256_xor_si256(r, _mm256_set1_epi32(static_cast<int>(0x80000000u)));
  const __m256i four = _mm256_set1_epi32(4);
  __m256i above = _mm256_setzero_si256();  // minus the count of thresholds 0..3 above x
  for (int c = 0; c < 4; ++c) {
    above = _mm256_add_epi32(above, _mm256_cmpgt_epi32(flipped_threshold(table, c), x));
  }
  __m256i w = _mm256_add_epi32(four, above);
  const __m256i at4 = _mm256_cmpeq_epi32(w, four);
  if (_mm256_movemask_epi8(at4) != 0) [[unlikely]] {
    const __m256i eight = _mm256_set1_epi32(8);
    __m256i more = _mm256_setzero_si256();
    for (int c = 4; c < 8; ++c) {
      more = _mm256_add_epi32(more, _mm256_cmpgt_epi32(flipped_threshold(table, c), x));
    }
    w = _mm256_blendv_epi8(w, _mm256_add_epi32(eight, more), at4);
    if (_mm256_movemask_epi8(_mm256_cmpeq_epi32(w, eight)) != 0) [[unlikely]] {
      alignas(32) std::uint32_t words[8];
      alignas(32) std::int32_t ws[8];
      _mm256_store_si256(reinterpret_cast<__m256i*>(words), r);
      _mm256_store_si256(reinterpret_cast<__m256i*>(ws), w);
      for (int l = 0; l < 8; ++l) {
        while (ws[l] >= 8 && words[l] >= table[ws[l]]) ++ws[l];
      }
      w = _mm256_load_si256(reinterpret_cast<const __m256i*>(ws));
    }
  }
  return w;
}

// The Poisson(1) weights of eight keys in the `rows` (<= 4) resamples 4 * quad + j: the
// Philox blocks of eight keys per call; the same values as poisson1_from_table of each lane's
// words. As a vector per row j (w[j]).
__attribute__((target("avx2"))) inline void poisson_weights8_vec(
    const std::uint64_t* keys, std::uint32_t quad, std::size_t rows,
    const rng::Philox4x32::Key& key, const std::array<std::uint64_t, 16>& table, __m256i w[4]) {
  __m256i r[4];
  rng::philox8(quad, keys, static_cast<std::uint32_t>(rng::Domain::kPoisson), key[0], key[1], r);
  for (std::size_t j = 0; j < rows; ++j) w[j] = poisson_from_words8(r[j], table);
}

// Row j of eight weights w as T at dst.
template <typename T>
__attribute__((target("avx2"))) inline void store_weights8(T* dst, __m256i w) {
  if constexpr (sizeof(T) == 4) {
    _mm256_storeu_ps(reinterpret_cast<float*>(dst), _mm256_cvtepi32_ps(w));
  } else {
    _mm256_storeu_pd(reinterpret_cast<double*>(dst), _mm256_cvtepi32_pd(_mm256_castsi256_si128(w)));
    _mm256_storeu_pd(reinterpret_cast<double*>(dst) + 4,
                     _mm256_cvtepi32_pd(_mm256_extracti128_si256(w, 1)));
  }
}

// poisson_weights8_vec, written to ws[j][lane].
__attribute__((target("avx2"))) void poisson_weights8(const std::uint64_t* keys,
                                                      std::uint32_t quad, std::size_t rows,
                                                      const rng::Philox4x32::Key& key,
                                                      const std::array<std::uint64_t, 16>& table,
                                                      std::int32_t ws[4][8]) {
  __m256i w[4];
  poisson_weights8_vec(keys, quad, rows, key, table, w);
  for (std::size_t j = 0; j < rows; ++j) {
    _mm256_store_si256(reinterpret_cast<__m256i*>(ws[j]), w[j]);
  }
}

// Weights of keys[i0, i1) in the rows of resamples 4 * quad .. 4 * quad + rows - 1 (row j at
// row + j * n), eight keys at a time; returns the first key not done (the rest: scalar).
template <typename T>
__attribute__((target("avx2"))) std::size_t weight_rows_avx2(
    const std::uint64_t* keys, std::size_t i0, std::size_t i1, std::size_t n,
    std::uint32_t quad, std::size_t rows, const rng::Philox4x32::Key& key,
    const std::array<std::uint64_t, 16>& table, T* row) {
  std::size_t i = i0;
  const auto domain = static_cast<std::uint32_t>(rng::Domain::kPoisson);
  for (; i + 16 <= i1; i += 16) {
    __m256i a[4], b[4];
    rng::philox16(quad, keys + i, domain, key[0], key[1], a, b);
    for (std::size_t j = 0; j < rows; ++j) {
      store_weights8<T>(row + j * n + i, poisson_from_words8(a[j], table));
      store_weights8<T>(row + j * n + i + 8, poisson_from_words8(b[j], table));
    }
  }
  for (; i + 8 <= i1; i += 8) {
    __m256i w[4];
    poisson_weights8_vec(keys + i, quad, rows, key, table, w);
    for (std::size_t j = 0; j < rows; ++j) store_weights8<T>(row + j * n + i, w[j]);
  }
  return i;
}
#endif

namespace {

// The weights of keys[i0, i1) in the `rows` (<= 4) resamples 4 * quad + j, as T at
// row[j * n + i]: eight or sixteen keys at a time where `simd`, the rest one by one.
template <typename T>
void weight_rows(const std::uint64_t* keys, std::size_t i0, std::size_t i1, std::size_t n,
                 std::uint32_t quad, std::size_t rows, const rng::Philox4x32::Key& key,
                 const std::array<std::uint64_t, 16>& table, bool simd, T* row) {
  std::size_t i = i0;
#ifdef TB_HAVE_AVX2_PATH
  if (simd) i = weight_rows_avx2<T>(keys, i0, i1, n, quad, rows, key, table, row);
#else
  (void)simd;
#endif
  for (; i < i1; ++i) {
    const std::uint64_t ukey = keys[i];
    const auto r = rng::Philox4x32::block(
        {quad, static_cast<std::uint32_t>(ukey), static_cast<std::uint32_t>(ukey >> 32),
         static_cast<std::uint32_t>(rng::Domain::kPoisson)},
        key);
    for (std::size_t j = 0; j < rows; ++j) {
      row[j * n + i] = static_cast<T>(poisson1_from_table(r[j], table));
    }
  }
}

}  // namespace

template <typename T>
void poisson_weight_matrix(const std::uint64_t* keys, std::size_t n, std::size_t n_resamples,
                           std::uint64_t seed, int threads, T* out) {
  // A task fills a tile of the matrix: kQuads blocks of four resamples (rows) by kKeys keys, row
  // segments written front to back. Every weight is its own Philox draw, so the tiling changes
  // no value.
  constexpr std::size_t kQuads = 8, kKeys = 4096;
  const auto key = rng::key_from_seed(seed);
  const auto& table = poisson_thresholds();
  const std::size_t n_quads = (n_resamples + 3) / 4;
  const std::size_t quad_tiles = (n_quads + kQuads - 1) / kQuads;
  const std::size_t key_tiles = (n + kKeys - 1) / kKeys;
  bool simd = false;
#ifdef TB_HAVE_AVX2_PATH
  simd = rng::avx2_available() && !rng::scalar_only();
#endif
  parallel_for(quad_tiles * key_tiles, threads, [&](std::size_t t) {
    const std::size_t i0 = (t % key_tiles) * kKeys, i1 = std::min(n, i0 + kKeys);
    const std::size_t quad0 = (t / key_tiles) * kQuads;
    const std::size_t quad1 = std::min(n_quads, quad0 + kQuads);
    for (std::size_t quad = quad0; quad < quad1; ++quad) {
      const std::size_t q = quad * 4;
      const std::size_t rows = std::min<std::size_t>(4, n_resamples - q);
      weight_rows<T>(keys, i0, i1, n, static_cast<std::uint32_t>(quad), rows, key, table, simd,
                     out + q * n);
    }
  });
}

template void poisson_weight_matrix<float>(const std::uint64_t*, std::size_t, std::size_t,
                                           std::uint64_t, int, float*);
template void poisson_weight_matrix<double>(const std::uint64_t*, std::size_t, std::size_t,
                                            std::uint64_t, int, double*);

namespace {

// Keys per tile of poisson_weighted_sums: the tile's weights of four resamples (4 x 256 values)
// stay in L1 and its padded rows (256 x c) in L2 while every column block reads them.
constexpr std::size_t kSumTile = 256;

// Weights of keys[i0, i1) in resamples 4 * quad + j (j < rows) as T, w[j * kSumTile + i - i0];
// rows j >= rows are zero.
template <typename T>
void tile_weights(const std::uint64_t* keys, std::size_t i0, std::size_t i1, std::uint32_t quad,
                  std::size_t rows, const rng::Philox4x32::Key& key,
                  const std::array<std::uint64_t, 16>& table, bool simd, T* w) {
  const std::size_t len = i1 - i0;
  weight_rows<T>(keys + i0, 0, len, kSumTile, quad, rows, key, table, simd, w);
  for (std::size_t j = rows; j < 4; ++j) std::fill_n(w + j * kSumTile, len, T{0});
}

// a0[v] += sum_u w0[u] * s[u * stride + v], and a1 likewise with w1, for v < width (scalar).
template <typename T>
void madd_rows2(const T* w0, const T* w1, const T* s, std::size_t stride, std::size_t len,
                std::size_t width, T* a0, T* a1) {
  for (std::size_t u = 0; u < len; ++u) {
    const T x0 = w0[u], x1 = w1[u];
    const T* row = s + u * stride;
    for (std::size_t v = 0; v < width; ++v) {
      a0[v] += x0 * row[v];
      a1[v] += x1 * row[v];
    }
  }
}

#ifdef TB_HAVE_AVX2_PATH
// The vector type of T (8 floats or 4 doubles) and its operations.
template <typename T>
struct Vec;
template <>
struct Vec<float> {
  using V = __m256;
  __attribute__((target("avx2,fma"))) static V load(const float* p) { return _mm256_loadu_ps(p); }
  __attribute__((target("avx2,fma"))) static V bcast(const float* p) {
    return _mm256_broadcast_ss(p);
  }
  __attribute__((target("avx2,fma"))) static V fma(V a, V b, V c) {
    return _mm256_fmadd_ps(a, b, c);
  }
  __attribute__((target("avx2,fma"))) static void store(float* p, V x) { _mm256_storeu_ps(p, x); }
  __attribute__((target("avx2,fma"))) static V add(V a, V b) { return _mm256_add_ps(a, b); }
};
template <>
struct Vec<double> {
  using V = __m256d;
  __attribute__((target("avx2,fma"))) static V load(const double* p) {
    return _mm256_loadu_pd(p);
  }
  __attribute__((target("avx2,fma"))) static V bcast(const double* p) {
    return _mm256_broadcast_sd(p);
  }
  __attribute__((target("avx2,fma"))) static V fma(V a, V b, V c) {
    return _mm256_fmadd_pd(a, b, c);
  }
  __attribute__((target("avx2,fma"))) static void store(double* p, V x) {
    _mm256_storeu_pd(p, x);
  }
  __attribute__((target("avx2,fma"))) static V add(V a, V b) { return _mm256_add_pd(a, b); }
};

// madd_rows2 over N vectors (N <= 6), the two rows' accumulators named one by one so that they
// stay in registers across the tile's keys (an array of vectors is kept in memory). Each
// vector of a key's row is loaded once and used for both rows.
template <typename T, int N>
__attribute__((target("avx2,fma"))) void madd_rows2_avx2(const T* w0, const T* w1, const T* s,
                                                          std::size_t stride, std::size_t len,
                                                          T* a0, T* a1) {
  using O = Vec<T>;
  using V = typename O::V;
  constexpr std::size_t L = 32 / sizeof(T);
  V p0{}, p1{}, p2{}, p3{}, p4{}, p5{}, q0{}, q1{}, q2{}, q3{}, q4{}, q5{};
  V p0_odd{}, p1_odd{}, p2_odd{}, q0_odd{}, q1_odd{}, q2_odd{};
#define TB_EACH(F) F(0) F(1) F(2) F(3) F(4) F(5)
#define TB_ODD(F) F(0) F(1) F(2)
#define TB_LOAD(v)                    \
  if constexpr (N > v) {              \
    p##v = O::load(a0 + (v) * L);     \
    q##v = O::load(a1 + (v) * L);     \
  }
#define TB_MADD(v)                           \
  if constexpr (N > v) {                     \
    V y = O::load(row + (v) * L);            \
    asm("" : "+x"(y)); /* one load, two uses */ \
    p##v = O::fma(b0, y, p##v);              \
    q##v = O::fma(b1, y, q##v);              \
  }
#define TB_STORE(v)                   \
  if constexpr (N > v) {              \
    O::store(a0 + (v) * L, p##v);     \
    O::store(a1 + (v) * L, q##v);     \
  }
  TB_EACH(TB_LOAD)
  std::size_t u = 0;
  if constexpr (N <= 3) {
    // few vectors: each accumulator would wait on its own previous product (an FMA's latency
    // is five cycles); odd keys go to a second set (p3..p5, q3..q5), added at the end (exact
    // integer sums: the order of the additions changes nothing)
    for (; u + 2 <= len; u += 2) {
      {
        const V b0 = O::bcast(w0 + u), b1 = O::bcast(w1 + u);
        const T* row = s + u * stride;
        TB_EACH(TB_MADD)
      }
      const V b0 = O::bcast(w0 + u + 1), b1 = O::bcast(w1 + u + 1);
      const T* row = s + (u + 1) * stride;
#define TB_MADD_ODD(v)                                       \
  if constexpr (N > v) {                                     \
    V y = O::load(row + (v) * L);                            \
    asm("" : "+x"(y));                                       \
    p##v##_odd = O::fma(b0, y, p##v##_odd);                  \
    q##v##_odd = O::fma(b1, y, q##v##_odd);                  \
  }
      TB_ODD(TB_MADD_ODD)
#undef TB_MADD_ODD
    }
  }
  for (; u < len; ++u) {
    const V b0 = O::bcast(w0 + u), b1 = O::bcast(w1 + u);
    const T* row = s + u * stride;
    TB_EACH(TB_MADD)
  }
  if constexpr (N <= 3) {
#define TB_JOIN(v)                       \
  if constexpr (N > v) {                 \
    p##v = O::add(p##v, p##v##_odd);     \
    q##v = O::add(q##v, q##v##_odd);     \
  }
    TB_ODD(TB_JOIN)
#undef TB_JOIN
  }
  TB_EACH(TB_STORE)
#undef TB_ODD
#undef TB_STORE
#undef TB_MADD
#undef TB_LOAD
#undef TB_EACH
}

// The four rows of a quad at once over N <= 3 vectors: a key's N vectors are loaded once and
// used for four rows (a quarter of the column reads of two passes of madd_rows2_avx2 over wide
// columns, which then wait on the L2 cache); twelve accumulators, the N vectors and one
// broadcast weight in registers. w = the four rows' weights (row j at w + j * w_stride).
template <typename T, int N>
__attribute__((target("avx2,fma"))) void madd_rows4_avx2(const T* w, std::size_t w_stride,
                                                          const T* s, std::size_t stride,
                                                          std::size_t len, T* a,
                                                          std::size_t a_stride) {
  using O = Vec<T>;
  using V = typename O::V;
  constexpr std::size_t L = 32 / sizeof(T);
  V c00{}, c01{}, c02{}, c10{}, c11{}, c12{}, c20{}, c21{}, c22{}, c30{}, c31{}, c32{};
#define TB_ROWS(F) F(0) F(1) F(2) F(3)
#define TB_LOAD4(j)                                          \
  c##j##0 = O::load(a + (j) * a_stride);                     \
  if constexpr (N > 1) c##j##1 = O::load(a + (j) * a_stride + L);     \
  if constexpr (N > 2) c##j##2 = O::load(a + (j) * a_stride + 2 * L);
#define TB_MADD4(j)                                          \
  {                                                          \
    const V b = O::bcast(w + (j) * w_stride + u);            \
    c##j##0 = O::fma(b, y0, c##j##0);                        \
    if constexpr (N > 1) c##j##1 = O::fma(b, y1, c##j##1);   \
    if constexpr (N > 2) c##j##2 = O::fma(b, y2, c##j##2);   \
  }
#define TB_STORE4(j)                                                   \
  O::store(a + (j) * a_stride, c##j##0);                               \
  if constexpr (N > 1) O::store(a + (j) * a_stride + L, c##j##1);      \
  if constexpr (N > 2) O::store(a + (j) * a_stride + 2 * L, c##j##2);
  TB_ROWS(TB_LOAD4)
  std::size_t u = 0;
  if constexpr (N == 1) {
    // one vector: each accumulator would wait on its own previous product (an FMA's latency
    // is five cycles); odd keys go to c01..c31, added at the end (exact integer sums: the
    // order of the additions changes nothing)
    for (; u + 2 <= len; u += 2) {
      V y0 = O::load(s + u * stride), z0 = O::load(s + (u + 1) * stride);
      asm("" : "+x"(y0), "+x"(z0));
#define TB_MADD4_PAIR(j)                                          \
  c##j##0 = O::fma(O::bcast(w + (j) * w_stride + u), y0, c##j##0); \
  c##j##1 = O::fma(O::bcast(w + (j) * w_stride + u + 1), z0, c##j##1);
      TB_ROWS(TB_MADD4_PAIR)
#undef TB_MADD4_PAIR
    }
  }
  for (; u < len; ++u) {
    const T* row = s + u * stride;
    V y0 = O::load(row), y1{}, y2{};
    if constexpr (N > 1) y1 = O::load(row + L);
    if constexpr (N > 2) y2 = O::load(row + 2 * L);
    asm("" : "+x"(y0), "+x"(y1), "+x"(y2));  // each loaded once, used four times
    TB_ROWS(TB_MADD4)
  }
  if constexpr (N == 1) {
#define TB_JOIN4(j) c##j##0 = O::add(c##j##0, c##j##1);
    TB_ROWS(TB_JOIN4)
#undef TB_JOIN4
  }
  TB_ROWS(TB_STORE4)
#undef TB_STORE4
#undef TB_MADD4
#undef TB_LOAD4
#undef TB_ROWS
}

// madd_rows4_avx2 of 1-3 vectors.
template <typename T>
void madd_rows4_vec(int vectors, const T* w, std::size_t w_stride, const T* s,
                    std::size_t stride, std::size_t len, T* a, std::size_t a_stride) {
  using Kernel = void (*)(const T*, std::size_t, const T*, std::size_t, std::size_t, T*,
                          std::size_t);
  static constexpr Kernel kernels[] = {madd_rows4_avx2<T, 1>, madd_rows4_avx2<T, 2>,
                                       madd_rows4_avx2<T, 3>};
  kernels[std::clamp(vectors, 1, 3) - 1](w, w_stride, s, stride, len, a, a_stride);
}

// madd_rows2_avx2 of 1-6 vectors.
template <typename T>
void madd_rows2_vec(int vectors, const T* w0, const T* w1, const T* s, std::size_t stride,
                    std::size_t len, T* a0, T* a1) {
  using Kernel = void (*)(const T*, const T*, const T*, std::size_t, std::size_t, T*, T*);
  static constexpr Kernel kernels[] = {
      madd_rows2_avx2<T, 1>, madd_rows2_avx2<T, 2>, madd_rows2_avx2<T, 3>,
      madd_rows2_avx2<T, 4>, madd_rows2_avx2<T, 5>, madd_rows2_avx2<T, 6>};
  kernels[std::clamp(vectors, 1, 6) - 1](w0, w1, s, stride, len, a0, a1);
}
#endif

}  // namespace

template <typename T>
void poisson_weighted_sums(const std::uint64_t* keys, std::size_t n, const T* cols, std::size_t c,
                           std::size_t n_resamples, std::uint64_t seed, int threads, T* out) {
  std::fill_n(out, n_resamples * c, T{0});
  if (n == 0 || c == 0 || n_resamples == 0) return;
  constexpr std::size_t lanes = 32 / sizeof(T);
  const std::size_t stride = (c + lanes - 1) / lanes * lanes;  // rows padded to whole vectors
  const auto key = rng::key_from_seed(seed);
  const auto& table = poisson_thresholds();
  bool simd = false;
#ifdef TB_HAVE_AVX2_PATH
  simd = rng::avx2_available() && __builtin_cpu_supports("fma") && !rng::scalar_only();
#endif
  const int n_vec = static_cast<int>(stride / lanes);
  // Wide columns (more than six vectors) go by panels of three vectors, each panel's rows
  // contiguous (panel p: n rows of panel_width(p) values from n * 3 * lanes * p on), so that a
  // pass over a panel reads whole cache lines in order; narrow ones by rows padded to whole
  // vectors (stride values a row).
  const bool wide = simd && n_vec > 6;
  auto panel_width = [&](int p) {
    return static_cast<std::size_t>(std::min(3, n_vec - 3 * p)) * lanes;
  };
  std::vector<T> padded(n * stride, T{0});
  for (std::size_t i = 0; i < n; ++i) {
    if (!wide) {
      std::copy_n(cols + i * c, c, padded.data() + i * stride);
      continue;
    }
    for (int p = 0; 3 * p < n_vec; ++p) {
      const std::size_t v0 = 3 * static_cast<std::size_t>(p) * lanes;
      const std::size_t width = panel_width(p);
      T* dst = padded.data() + n * v0 + i * width;
      for (std::size_t j = 0; j < width && v0 + j < c; ++j) dst[j] = cols[i * c + v0 + j];
    }
  }
  // keys per tile: their padded rows (tile x stride) take at most 256 KiB, in L2 while every
  // quad of the task reads them
  const std::size_t row_bytes = stride * sizeof(T);
  const std::size_t tile =
      std::clamp<std::size_t>((std::size_t{256} << 10) / row_bytes / 16 * 16, 16, kSumTile);
  // a task: `quads` quads of resamples (4 quads rows of out), all keys, its sums in 256 KiB
  // at most (the more quads a task has, the fewer times the columns are read: once per
  // task), and about eight equal tasks per thread, so that no thread waits long at the end
  const std::size_t n_quads = (n_resamples + 3) / 4;
  const auto workers = static_cast<std::size_t>(resolve_threads(threads));
  const std::size_t most = std::max<std::size_t>(1, (std::size_t{256} << 10) / (4 * row_bytes));
  const std::size_t quads =
      std::clamp<std::size_t>((n_quads + 8 * workers - 1) / (8 * workers), 1, most);
  const std::size_t n_tasks = (n_quads + quads - 1) / quads;
  parallel_for(n_tasks, threads, [&](std::size_t t) {
    std::vector<T> acc(4 * quads * stride, T{0});
    std::vector<T> w(4 * kSumTile);
    const std::size_t q0 = t * quads, q1 = std::min(n_quads, q0 + quads);
    for (std::size_t i0 = 0; i0 < n; i0 += tile) {
      const std::size_t i1 = std::min(n, i0 + tile), len = i1 - i0;
      const T* s = padded.data() + i0 * stride;  // (narrow columns)
      for (std::size_t quad = q0; quad < q1; ++quad) {
        const std::size_t rows = std::min<std::size_t>(4, n_resamples - 4 * quad);
        tile_weights<T>(keys, i0, i1, static_cast<std::uint32_t>(quad), rows, key, table, simd,
                        w.data());
        T* a = acc.data() + (quad - q0) * 4 * stride;
#ifdef TB_HAVE_AVX2_PATH
        if (wide) {  // four rows per pass, a panel at a time
          for (int p = 0; 3 * p < n_vec; ++p) {
            const std::size_t v0 = 3 * static_cast<std::size_t>(p) * lanes;
            const std::size_t width = panel_width(p);
            madd_rows4_vec<T>(static_cast<int>(width / lanes), w.data(), kSumTile,
                              padded.data() + n * v0 + i0 * width, width, len, a + v0, stride);
          }
          continue;
        }
#endif
        for (std::size_t j = 0; j < rows; j += 2) {
          const T* w0 = w.data() + j * kSumTile;
          const T* w1 = w.data() + (j + 1) * kSumTile;  // zero where j + 1 == rows
          T* a0 = a + j * stride;
          T* a1 = a + (j + 1) * stride;
#ifdef TB_HAVE_AVX2_PATH
          if (simd) {  // at most six vectors: twelve accumulators
            madd_rows2_vec<T>(n_vec, w0, w1, s, stride, len, a0, a1);
            continue;
          }
#endif
          madd_rows2<T>(w0, w1, s, stride, len, c, a0, a1);
        }
      }
    }
    for (std::size_t quad = q0; quad < q1; ++quad) {
      const std::size_t rows = std::min<std::size_t>(4, n_resamples - 4 * quad);
      for (std::size_t j = 0; j < rows; ++j) {
        std::copy_n(acc.data() + ((quad - q0) * 4 + j) * stride, c, out + (4 * quad + j) * c);
      }
    }
  });
}

template void poisson_weighted_sums<float>(const std::uint64_t*, std::size_t, const float*,
                                           std::size_t, std::size_t, std::uint64_t, int, float*);
template void poisson_weighted_sums<double>(const std::uint64_t*, std::size_t, const double*,
                                            std::size_t, std::size_t, std::uint64_t, int, double*);

std::vector<int> exact_scales(const double* values, std::size_t n, std::size_t k) {
  std::vector<int> scale(k, 0);
  for (std::size_t i = 0; i < n; ++i) {
    for (std::size_t c = 0; c < k; ++c) {
      const double x = values[i * k + c];
      if (x == 0.0 || scale[c] >= kMaxFixedScale) continue;
      int e = 0;
      const double m = std::frexp(std::fabs(x), &e);  // |x| = m 2^e, m in [0.5, 1)
      auto mant = static_cast<std::uint64_t>(std::ldexp(m, 53));
      const int tz = __builtin_ctzll(mant);
      // lowest set bit of |x| is 2^(e - 53 + tz)
      const int need = 53 - e - tz;
      scale[c] = std::max(scale[c], std::min(need, kMaxFixedScale));
    }
  }
  return scale;
}

std::vector<int128> fixed_unit_rows(const Units& u, const double* values,
                                    const std::vector<int>& scale) {
  const std::size_t k = u.k, m = u.n_units();
  std::vector<int128> rows(m * k, 0);
  std::vector<double> bound(k, 0.0);
  for (std::size_t unit = 0; unit < m; ++unit) {
    for (std::size_t p = u.unit_start[unit]; p < u.unit_start[unit + 1]; ++p) {
      const double* v = values + static_cast<std::size_t>(u.order[p]) * k;
      for (std::size_t c = 0; c < k; ++c) {
        const double scaled = std::nearbyint(std::ldexp(v[c], scale[c]));
        if (std::fabs(scaled) >= 0x1.0p100) {
          throw std::invalid_argument(
              "values: magnitude too large for exact Poisson sums (|value| * 2^scale >= 2^100); "
              "rescale the column");
        }
        rows[unit * k + c] += static_cast<int128>(scaled);
        bound[c] += std::fabs(scaled);
      }
    }
  }
  for (std::size_t c = 0; c < k; ++c) {
    // A Poisson(1) weight drawn from 32 bits never exceeds 15.
    if (16.0 * bound[c] >= 0x1.0p125) {
      throw std::invalid_argument("values: column " + std::to_string(c) +
                                  " sums would overflow the exact 128-bit accumulator; rescale");
    }
  }
  return rows;
}

PoissonSums poisson_sums(const Units& u, const std::vector<int128>& fixed_rows,
                         const std::vector<int>& scale, const std::uint64_t* unit_keys,
                         std::uint64_t seed, std::int64_t n_resamples, int threads) {
  const std::size_t G = u.n_groups(), k = u.k, B = static_cast<std::size_t>(n_resamples);
  const std::size_t S = B + 1;
  PoissonSums out;
  out.n_groups = G;
  out.n_resamples = B;
  out.k = k;
  out.scale = scale;
  out.sums.assign(G * S * k, 0);
  out.weight.assign(G * S, 0);
  constexpr std::size_t kBlock = 64;  // resamples per task: a multiple of 4 (one Philox block)
  struct Task {
    std::size_t g, b0, b1;
  };
  std::vector<Task> tasks;
  for (std::size_t g = 0; g < G; ++g) {
    for (std::size_t b0 = 0; b0 < B; b0 += kBlock) tasks.push_back({g, b0, std::min(B, b0 + kBlock)});
  }
  const auto key = rng::key_from_seed(seed);
  const auto& table = poisson_thresholds();
#ifdef TB_HAVE_AVX2_PATH
  const bool simd = rng::avx2_available() && !rng::scalar_only();
  // Groups whose sums fit 64 bits (every weight is at most 15): there the eight-unit path adds
  // in int64, without a branch on zero weights; the sums are the same integers.
  std::vector<char> fits64(G, 0);
  std::vector<std::int64_t> items64(simd ? u.n_units() : 0);
  for (std::size_t unit = 0; unit < items64.size(); ++unit) {
    items64[unit] = static_cast<std::int64_t>(u.weight[unit]);
  }
  for (std::size_t g = 0; g < G && simd; ++g) {
    constexpr int128 kLimit = int128{1} << 58;  // 16 * limit < 2^63
    std::vector<int128> total(k + 1, 0);
    bool ok = true;
    for (std::size_t unit = u.group_begin(g); unit < u.group_end(g) && ok; ++unit) {
      for (std::size_t c = 0; c < k; ++c) {
        const int128 v = fixed_rows[unit * k + c];
        total[c] += v < 0 ? -v : v;
        ok = ok && v < kLimit && -v < kLimit && total[c] < kLimit;
      }
      total[k] += items64[unit];
      ok = ok && total[k] < kLimit;
    }
    fits64[g] = ok ? 1 : 0;
  }
#endif
  parallel_for(tasks.size(), threads, [&](std::size_t t) {
    const Task& task = tasks[t];
    const std::size_t nb = task.b1 - task.b0;
    std::vector<int128> acc(nb * k, 0);
    std::vector<std::int64_t> wacc(nb, 0);
    // adds weight w of unit `unit` in resample q + j (exact integers: any order, same sums)
    auto add = [&](std::size_t unit, std::size_t bb, int w) {
      const int128* row = fixed_rows.data() + unit * k;
      for (std::size_t c = 0; c < k; ++c) acc[bb * k + c] += static_cast<int128>(w) * row[c];
      wacc[bb] += w * static_cast<std::int64_t>(u.weight[unit]);
    };
    std::size_t first = u.group_begin(task.g);
#ifdef TB_HAVE_AVX2_PATH
    if (simd) {
      // eight units' Philox blocks per call (csrc/common/philox_avx2.hpp), the same words
      alignas(32) std::int32_t ws[4][8];
      const bool narrow = fits64[task.g] != 0;
      std::vector<std::int64_t> acc64(narrow ? nb * k : 0, 0);
      for (; first + 8 <= u.group_end(task.g); first += 8) {
        for (std::size_t q = task.b0; q < task.b1; q += 4) {
          const std::size_t rows = std::min<std::size_t>(4, task.b1 - q);
          poisson_weights8(unit_keys + first, static_cast<std::uint32_t>(q / 4), rows, key, table,
                           ws);
          for (std::size_t j = 0; j < rows; ++j) {
            const std::size_t bb = q + j - task.b0;
            if (!narrow) {
              for (int l = 0; l < 8; ++l) {
                if (ws[j][l] != 0) add(first + l, bb, ws[j][l]);
              }
              continue;
            }
            std::int64_t* a = acc64.data() + bb * k;
            std::int64_t wsum = 0;
            for (int l = 0; l < 8; ++l) {
              const std::int64_t w = ws[j][l];
              const int128* row = fixed_rows.data() + (first + l) * k;
              for (std::size_t c = 0; c < k; ++c) a[c] += w * static_cast<std::int64_t>(row[c]);
              wsum += w * items64[first + l];
            }
            wacc[bb] += wsum;
          }
        }
      }
      for (std::size_t i = 0; i < acc64.size(); ++i) acc[i] += acc64[i];
    }
#endif
    for (std::size_t unit = first; unit < u.group_end(task.g); ++unit) {
      const std::uint64_t ukey = unit_keys[unit];
      for (std::size_t q = task.b0; q < task.b1; q += 4) {
        const auto r = rng::Philox4x32::block(
            {static_cast<std::uint32_t>(q / 4), static_cast<std::uint32_t>(ukey),
             static_cast<std::uint32_t>(ukey >> 32),
             static_cast<std::uint32_t>(rng::Domain::kPoisson)},
            key);
        for (std::size_t j = 0; j < 4 && q + j < task.b1; ++j) {
          const int w = poisson1_from_table(r[j], table);
          if (w != 0) add(unit, q + j - task.b0, w);
        }
      }
    }
    for (std::size_t bb = 0; bb < nb; ++bb) {
      const std::size_t slot = task.g * S + task.b0 + bb;
      std::copy(acc.begin() + bb * k, acc.begin() + (bb + 1) * k, out.sums.begin() + slot * k);
      out.weight[slot] = wacc[bb];
    }
  });
  for (std::size_t g = 0; g < G; ++g) {
    const std::size_t slot = g * S + B;
    for (std::size_t unit = u.group_begin(g); unit < u.group_end(g); ++unit) {
      for (std::size_t c = 0; c < k; ++c) out.sums[slot * k + c] += fixed_rows[unit * k + c];
      out.weight[slot] += static_cast<std::int64_t>(u.weight[unit]);
    }
  }
  return out;
}

Distribution poisson_distribution(const PoissonSums& ps, const Statistic& stat, int threads) {
  const std::size_t G = ps.n_groups, B = ps.n_resamples, k = ps.k, S = B + 1;
  Distribution dist;
  dist.n_groups = G;
  dist.n_resamples = B;
  dist.theta.resize(G * B);
  dist.estimate.resize(G);
  dist.acceleration.assign(G, std::numeric_limits<double>::quiet_NaN());
  dist.used_counts.assign(G, 0);
  // each slot's value depends on its own sums only: blocks of slots in parallel, same values
  constexpr std::size_t kBlock = 4096;
  const std::size_t per_group = (S + kBlock - 1) / kBlock;
  parallel_for(G * per_group, threads, [&](std::size_t task) {
    const std::size_t g = task / per_group, b0 = (task % per_group) * kBlock;
    std::vector<double> sums(k);
    for (std::size_t b = b0; b < std::min(S, b0 + kBlock); ++b) {
      const std::size_t slot = g * S + b;
      for (std::size_t c = 0; c < k; ++c) sums[c] = to_double(ps.sums[slot * k + c], ps.scale[c]);
      const double v = stat.evaluate(sums.data(), static_cast<double>(ps.weight[slot]));
      if (b < B) {
        dist.theta[g * B + b] = v;
      } else {
        dist.estimate[g] = v;
      }
    }
  });
  return dist;
}

double poisson_acceleration(const Statistic& stat, const PoissonSums& ps, std::size_t g,
                            const std::vector<int128>& fixed_rows, const Units& u) {
  const std::size_t k = ps.k, S = ps.n_resamples + 1;
  const std::size_t begin = u.group_begin(g), end = u.group_end(g), m = end - begin;
  if (m < 2) return std::numeric_limits<double>::quiet_NaN();
  const std::size_t slot = g * S + ps.n_resamples;
  std::vector<double> theta(m), loo(k);
  for (std::size_t i = 0; i < m; ++i) {
    for (std::size_t c = 0; c < k; ++c) {
      loo[c] = to_double(ps.sums[slot * k + c] - fixed_rows[(begin + i) * k + c], ps.scale[c]);
    }
    theta[i] = stat.evaluate(loo.data(), static_cast<double>(ps.weight[slot]) - u.weight[begin + i]);
  }
  return acceleration_from_jackknife(theta);
}

}  // namespace tb::stats
