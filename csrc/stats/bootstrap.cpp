#include "bootstrap.hpp"

#include <algorithm>
#include <memory>
#include <cmath>
#include <cstring>
#include <limits>
#include <stdexcept>
#include <unordered_map>

#include "../common/parallel.hpp"
#include "../common/philox_avx2.hpp"
#include "../common/rng.hpp"
#include "binomial.hpp"
#include "normal.hpp"

namespace tb::stats {
namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

// How one stratum is resampled.
struct StratumPlan {
  std::size_t begin = 0, end = 0;  // unit range
  bool counts = false;             // conditional binomials over distinct rows
  bool unit_weights = true;        // every unit holds one item
  std::vector<double> rows;        // distinct rows (counts path), d x k
  std::vector<double> weight;      // distinct unit weights, d
  std::vector<std::int64_t> mult;  // multiplicity of each distinct row, d
};

inline std::uint64_t bits(double x) {
  std::uint64_t b;
  std::memcpy(&b, &x, sizeof b);
  return b;
}

std::uint64_t hash_row(const double* row, std::size_t k, double w) {
  std::uint64_t h = rng::mix64(bits(w + 0.0));
  for (std::size_t j = 0; j < k; ++j) {
    h = rng::mix64(h ^ bits(row[j] + 0.0));
  }
  return h;
}

// Finds the distinct (row, weight) pairs of a stratum, giving up once more than max_distinct.
// Up to kLinear distinct rows are found by a linear scan (0/1 data: two comparisons per row);
// beyond that a hash index takes over.
bool compress(const Units& u, StratumPlan& p, std::size_t max_distinct) {
  constexpr std::size_t kLinear = 8;
  const std::size_t k = u.k;
  std::unordered_map<std::uint64_t, std::size_t> index;
  auto same = [&](std::size_t j, const double* row, double w) {
    return p.weight[j] == w && std::equal(row, row + k, p.rows.data() + j * k);
  };
  for (std::size_t i = p.begin; i < p.end; ++i) {
    const double* row = u.rows.data() + i * k;
    const double w = u.weight[i];
    const std::size_t d = p.mult.size();
    std::size_t found = d;
    if (d <= kLinear) {
      for (std::size_t j = 0; j < d; ++j) {
        if (same(j, row, w)) {
          found = j;
          break;
        }
      }
    } else {
      if (index.empty()) {
        for (std::size_t j = 0; j < d; ++j) {
          index.emplace(hash_row(p.rows.data() + j * k, k, p.weight[j]), j);
        }
      }
      auto it = index.find(hash_row(row, k, w));
      if (it != index.end()) {
        if (!same(it->second, row, w)) return false;  // a 64-bit hash collision: use indices
        found = it->second;
      }
    }
    if (found < d) {
      ++p.mult[found];
      continue;
    }
    if (d >= max_distinct) return false;
    if (!index.empty()) index.emplace(hash_row(row, k, w), d);
    p.rows.insert(p.rows.end(), row, row + k);
    p.weight.push_back(w);
    p.mult.push_back(1);
  }
  return true;
}

std::vector<StratumPlan> plan_strata(const Units& u, Resampler resampler) {
  const std::size_t n_strata = u.stratum_start.size() - 1;
  std::vector<StratumPlan> plans(n_strata);
  for (std::size_t h = 0; h < n_strata; ++h) {
    StratumPlan& p = plans[h];
    p.begin = u.stratum_start[h];
    p.end = u.stratum_start[h + 1];
    for (std::size_t i = p.begin; i < p.end && p.unit_weights; ++i) {
      p.unit_weights = u.weight[i] == 1.0;
    }
    const std::size_t n = p.end - p.begin;
    if (resampler == Resampler::kIndex) continue;
    // A binomial draw costs about as much as 20 index draws.
    const std::size_t max_distinct = resampler == Resampler::kCounts ? n : n / 20;
    if (max_distinct == 0) continue;
    p.counts = compress(u, p, max_distinct);
    if (!p.counts) {
      p.rows.clear();
      p.weight.clear();
      p.mult.clear();
    }
  }
  return plans;
}

// Index path: draws `count` unit indices uniformly from [0, range) and adds the rows of units
// first[0..range) (and their item weights).
template <class Draws>
void draw_units(std::size_t k, const double* rows, const double* w, bool unit_weights,
                std::int64_t count, Draws& draw, double* sums, double* weight) {
  if (k == 1 && unit_weights) {
    // Four accumulators hide the latency of the additions behind the random loads.
    double a0 = 0, a1 = 0, a2 = 0, a3 = 0;
    std::int64_t t = 0;
    for (; t + 4 <= count; t += 4) {
      a0 += rows[draw.next()];
      a1 += rows[draw.next()];
      a2 += rows[draw.next()];
      a3 += rows[draw.next()];
    }
    for (; t < count; ++t) a0 += rows[draw.next()];
    sums[0] += (a0 + a1) + (a2 + a3);
    *weight += static_cast<double>(count);
    return;
  }
  if (k == 1) {
    double a = 0, wa = 0;
    for (std::int64_t t = 0; t < count; ++t) {
      const std::uint32_t i = draw.next();
      a += rows[i];
      wa += w[i];
    }
    sums[0] += a;
    *weight += wa;
    return;
  }
  for (std::int64_t t = 0; t < count; ++t) {
    const std::uint32_t i = draw.next();
    const double* row = rows + static_cast<std::size_t>(i) * k;
    for (std::size_t col = 0; col < k; ++col) sums[col] += row[col];
    *weight += w[i];
  }
}

// Units per cache block of the blocked index path (16 KiB of one-column rows: L1-resident).
constexpr std::int64_t kBlockUnits = 2048;

// n draws from n units. Large strata are drawn block by block: the number of draws landing in
// each block of units is multinomial (conditional binomials), and draws within a block are
// uniform, which is exactly the distribution of n uniform draws but keeps the random loads
// inside a cache-resident block.
void draw_stratum(const Units& u, const StratumPlan& p, rng::Stream& s, double* sums,
                  double* weight) {
  const std::size_t k = u.k;
  const std::int64_t n = static_cast<std::int64_t>(p.end - p.begin);
  const double* rows = u.rows.data() + p.begin * k;
  const double* w = u.weight.data() + p.begin;
  if (n <= 256) {
    rng::BoundedDraws<16> draw(s, static_cast<std::uint32_t>(n));
    draw_units(k, rows, w, p.unit_weights, n, draw, sums, weight);
    return;
  }
  if (n <= 2 * kBlockUnits) {
    rng::BoundedDraws<32> draw(s, static_cast<std::uint32_t>(n));
    draw_units(k, rows, w, p.unit_weights, n, draw, sums, weight);
    return;
  }
  std::int64_t remaining = n, mass = n;
  for (std::int64_t start = 0; start < n && remaining > 0; start += kBlockUnits) {
    const std::int64_t size = std::min(kBlockUnits, n - start);
    const std::int64_t count =
        size == mass ? remaining
                     : binomial(remaining, static_cast<double>(size) / static_cast<double>(mass), s);
    mass -= size;
    remaining -= count;
    if (count == 0) continue;
    rng::BoundedDraws<32> draw(s, static_cast<std::uint32_t>(size));
    draw_units(k, rows + static_cast<std::size_t>(start) * k, w + start, p.unit_weights, count,
               draw, sums, weight);
  }
}

// Adds one resample of stratum p into sums (k) and *weight, drawing from stream s.
void resample_stratum(const Units& u, const StratumPlan& p, rng::Stream& s, double* sums,
                      double* weight) {
  const std::size_t k = u.k;
  const std::int64_t n = static_cast<std::int64_t>(p.end - p.begin);
  if (n == 0) return;
  if (p.counts) {
    std::int64_t remaining = n, mass = n;
    const std::size_t d = p.mult.size();
    for (std::size_t j = 0; j < d && remaining > 0; ++j) {
      const std::int64_t c = j + 1 == d ? remaining
                                        : binomial(remaining, static_cast<double>(p.mult[j]) /
                                                                  static_cast<double>(mass),
                                                   s);
      mass -= p.mult[j];
      remaining -= c;
      if (c == 0) continue;
      const double cd = static_cast<double>(c);
      const double* row = p.rows.data() + j * k;
      for (std::size_t col = 0; col < k; ++col) sums[col] += cd * row[col];
      *weight += cd * p.weight[j];
    }
    return;
  }
  draw_stratum(u, p, s, sums, weight);
}

void full_sums(const Units& u, std::size_t g, double* sums, double* weight) {
  const std::size_t k = u.k;
  std::fill(sums, sums + k, 0.0);
  *weight = 0.0;
  for (std::size_t i = u.group_begin(g); i < u.group_end(g); ++i) {
    for (std::size_t col = 0; col < k; ++col) sums[col] += u.rows[i * k + col];
    *weight += u.weight[i];
  }
}

// The exponent e of the power of two 2^e nearest above max |t - mean| (0 when that is 0 or not
// finite): deviations divided by 2^e lie in [-1, 1], so their squares and cubes stay in range.
int pow2_exponent_of(double top) {
  if (!(top > 0.0) || !std::isfinite(top)) return 0;
  int e = 0;
  std::frexp(top, &e);
  // Leave ordinary magnitudes alone (bit-identical sums); rescale only near the float limits.
  return (e > 200 || e < -200) ? e : 0;
}

int pow2_exponent(const std::vector<double>& v, double mean) {
  double top = 0.0;
  for (double t : v) top = std::max(top, std::fabs(t - mean));
  return pow2_exponent_of(top);
}

#ifdef TB_HAVE_AVX2_PATH
// A group of one stratum of whole-number unit rows (k = 1, at most 256 units: 16-bit draws),
// packed for the AVX2 index draw: unit i as ((row_i - lo) << 32) | weight_i, so that one
// 64-bit load and add per draw sums both. Every sum of n draws is an exact integer (below
// 2^31 and 2^32 in its halves, below 2^53 in magnitude), so it equals the engine's double sum
// in any order, bit for bit.
//
// Where there are at most 64 units and every (row - lo) and weight fits a byte (a few dozen
// patients, as in MTBBench's runs), `bytes` is set and tv, tw hold them: packed_draws8_bytes
// then looks sixteen candidates up at a time in registers (byte shuffles of 16-entry tables).
struct PackedGroup {
  bool ok = false;
  bool bytes = false;
  bool same_weight = false;  // every unit has weight tw[0] (equal cluster sizes, unit items)
  double lo = 0;
  std::uint32_t n = 0;
  std::vector<std::int64_t> v;
  std::uint8_t tv[64] = {};
  std::uint8_t tw[64] = {};
};

PackedGroup pack_group(const Units& u, const StratumPlan& p) {
  PackedGroup out;
  const std::size_t n = p.end - p.begin;
  if (u.k != 1 || p.counts || n == 0 || n > 256) return out;
  double lo = std::numeric_limits<double>::infinity(), hi = -lo, wmax = 0;
  for (std::size_t i = p.begin; i < p.end; ++i) {
    const double r = u.rows[i], w = u.weight[i];
    if (!std::isfinite(r) || r != std::floor(r) || !std::isfinite(w) || w != std::floor(w) ||
        w < 0) {
      return out;
    }
    lo = std::min(lo, r);
    hi = std::max(hi, r);
    wmax = std::max(wmax, w);
  }
  const double dn = static_cast<double>(n);
  if ((hi - lo) * dn >= 0x1.0p31 || wmax * dn >= 0x1.0p32 ||
      std::max(std::fabs(lo), std::fabs(hi)) * dn >= 0x1.0p53) {
    return out;
  }
  out.v.resize(n);
  for (std::size_t i = p.begin; i < p.end; ++i) {
    out.v[i - p.begin] = (static_cast<std::int64_t>(u.rows[i] - lo) << 32) |
                         static_cast<std::int64_t>(u.weight[i]);
  }
  out.lo = lo;
  out.n = static_cast<std::uint32_t>(n);
  out.ok = true;
  out.bytes = n <= 64 && hi - lo <= 255 && wmax <= 255;
  if (out.bytes) {
    out.same_weight = true;
    for (std::size_t i = p.begin; i < p.end; ++i) {
      out.tv[i - p.begin] = static_cast<std::uint8_t>(u.rows[i] - lo);
      out.tw[i - p.begin] = static_cast<std::uint8_t>(u.weight[i]);
      out.same_weight = out.same_weight && u.weight[i] == u.weight[p.begin];
    }
  }
  return out;
}

// 64 x 64 -> low 64-bit products of four lanes by a constant (AVX2 has 32 x 32 -> 64 only).
__attribute__((target("avx2"))) inline __m256i mul64(__m256i a, std::uint64_t c) {
  const __m256i clo = _mm256_set1_epi64x(static_cast<long long>(c & 0xffffffffu));
  const __m256i chi = _mm256_set1_epi64x(static_cast<long long>(c >> 32));
  const __m256i cross = _mm256_add_epi64(_mm256_mul_epu32(a, chi),
                                         _mm256_mul_epu32(_mm256_srli_epi64(a, 32), clo));
  return _mm256_add_epi64(_mm256_mul_epu32(a, clo), _mm256_slli_epi64(cross, 32));
}

__attribute__((target("avx2"))) inline __m256i rotl64(__m256i x, int k) {
  return _mm256_or_si256(_mm256_slli_epi64(x, k), _mm256_srli_epi64(x, 64 - k));
}

// rng::splitmix64 of four lanes (state advanced in place).
__attribute__((target("avx2"))) inline __m256i splitmix4(__m256i& state) {
  state = _mm256_add_epi64(state, _mm256_set1_epi64x(static_cast<long long>(0x9E3779B97F4A7C15ull)));
  __m256i z = state;
  z = mul64(_mm256_xor_si256(z, _mm256_srli_epi64(z, 30)), 0xBF58476D1CE4E5B9ull);
  z = mul64(_mm256_xor_si256(z, _mm256_srli_epi64(z, 27)), 0x94D049BB133111EBull);
  return _mm256_xor_si256(z, _mm256_srli_epi64(z, 31));
}

// The words of a Philox block of eight lanes as the lanes' SplitMix64 seeds (sm[l]).
__attribute__((target("avx2"))) inline void seeds_of_words(const __m256i r[4],
                                                           std::uint64_t sm[8]) {
  alignas(32) std::uint32_t words[4][8];
  for (int j = 0; j < 4; ++j) _mm256_store_si256(reinterpret_cast<__m256i*>(words[j]), r[j]);
  for (int l = 0; l < 8; ++l) {
    sm[l] = (static_cast<std::uint64_t>(words[0][l]) << 32 | words[1][l]) ^
            (static_cast<std::uint64_t>(words[2][l]) << 32 | words[3][l]);
  }
}

// The Philox counters' middle words of the streams of resamples b .. b + n - 1 of a group.
inline void stream_counters(std::uint64_t group_key, std::uint32_t b, std::uint32_t n,
                            std::uint64_t* ctr) {
  for (std::uint32_t l = 0; l < n; ++l) {
    ctr[l] = (group_key >> 32) | (static_cast<std::uint64_t>(b + l) << 32);
  }
}

// The SplitMix64 seeds of the streams rng::Stream(seed, group_key, b + l, kIndexResample),
// l = 0..7, from one Philox call of eight counters.
__attribute__((target("avx2"))) void stream_seeds8(std::uint64_t seed, std::uint64_t group_key,
                                                   std::uint32_t b, std::uint64_t sm[8]) {
  alignas(32) std::uint64_t ctr[8];
  stream_counters(group_key, b, 8, ctr);
  const auto key = rng::key_from_seed(seed);
  __m256i r[4];
  rng::philox8(static_cast<std::uint32_t>(group_key), ctr,
               static_cast<std::uint32_t>(rng::Domain::kIndexResample), key[0], key[1], r);
  seeds_of_words(r, sm);
}

// stream_seeds8 of resamples b .. b + 15, the two Philox blocks' rounds interleaved (philox16).
__attribute__((target("avx2"))) void stream_seeds16(std::uint64_t seed, std::uint64_t group_key,
                                                    std::uint32_t b, std::uint64_t sm[16]) {
  alignas(32) std::uint64_t ctr[16];
  stream_counters(group_key, b, 16, ctr);
  const auto key = rng::key_from_seed(seed);
  __m256i r[4], q[4];
  rng::philox16(static_cast<std::uint32_t>(group_key), ctr,
                static_cast<std::uint32_t>(rng::Domain::kIndexResample), key[0], key[1], r, q);
  seeds_of_words(r, sm);
  seeds_of_words(q, sm + 8);
}

// One xoshiro256++ step (rng::Stream::next) of four lanes: the output word, state advanced.
__attribute__((target("avx2"))) inline __m256i xoshiro4(__m256i& s0, __m256i& s1, __m256i& s2,
                                                        __m256i& s3) {
  const __m256i word = _mm256_add_epi64(rotl64(_mm256_add_epi64(s0, s3), 23), s0);
  const __m256i sh = _mm256_slli_epi64(s1, 17);
  s2 = _mm256_xor_si256(s2, s0);
  s3 = _mm256_xor_si256(s3, s1);
  s1 = _mm256_xor_si256(s1, s2);
  s0 = _mm256_xor_si256(s0, s3);
  s2 = _mm256_xor_si256(s2, sh);
  s3 = rotl64(s3, 45);
  return word;
}

// The index draws of eight resamples b .. b + 7 of a packed group at once: for each, the
// stream rng::Stream(seed, group_key, b + l, kIndexResample) and the 16-bit candidates of
// rng::BoundedDraws<16>, as draw_stratum takes them, four resamples per vector. sum[l] is the
// packed sum of resample b + l's n draws; redo[l] is set where a candidate was rejected within
// them (the lane then took other draws than its candidates: the scalar path redoes it).
__attribute__((target("avx2"))) void packed_draws8(const PackedGroup& pg,
                                                   const std::uint64_t sm[8],
                                                   std::int64_t sum[8], bool redo[8]) {
  const std::uint32_t n = pg.n;
  const __m256i range = _mm256_set1_epi64x(n);
  const __m256i threshold = _mm256_set1_epi64x((65536u - n) % n);
  const __m256i low16 = _mm256_set1_epi64x(0xffff);
  const std::int64_t* table = pg.v.data();
  for (int h = 0; h < 2; ++h) {
    __m256i state = _mm256_load_si256(reinterpret_cast<const __m256i*>(sm + 4 * h));
    __m256i s0 = splitmix4(state), s1 = splitmix4(state);
    __m256i s2 = splitmix4(state), s3 = splitmix4(state);
    __m256i bad = _mm256_setzero_si256();
    // four scalar loads per candidate beat a 64-bit gather here (a third faster: the table
    // sits in L1, and the sums' add chains are independent)
    std::int64_t acc[4] = {0, 0, 0, 0};
    alignas(32) std::int64_t idx[4];
    for (std::uint32_t t = 0; t < n; t += 4) {
      const __m256i word = xoshiro4(s0, s1, s2, s3);
      const std::uint32_t take = std::min<std::uint32_t>(4, n - t);
      for (std::uint32_t c = 0; c < take; ++c) {
        const __m256i x = _mm256_and_si256(_mm256_srli_epi64(word, static_cast<int>(16 * c)), low16);
        const __m256i m = _mm256_mul_epu32(x, range);
        bad = _mm256_or_si256(bad, _mm256_cmpgt_epi64(threshold, _mm256_and_si256(m, low16)));
        _mm256_store_si256(reinterpret_cast<__m256i*>(idx), _mm256_srli_epi64(m, 16));
        for (int l = 0; l < 4; ++l) acc[l] += table[idx[l]];
      }
    }
    for (int l = 0; l < 4; ++l) sum[4 * h + l] = acc[l];
    alignas(32) std::int64_t flags[4];
    _mm256_store_si256(reinterpret_cast<__m256i*>(flags), bad);
    for (int l = 0; l < 4; ++l) redo[4 * h + l] = flags[l] != 0;
  }
}

// packed_draws8 for a group with byte tables (pg.bytes): the same candidates, taken sixteen
// at a time as 16-bit lanes (lane 4 l + c of a word vector is candidate c of resample l's
// word). Lemire's index is the high half of candidate * n (mulhi), the rejection test is on the
// low half (mullo); the unit's row and weight come from byte shuffles of the 16-entry pieces of
// tv and tw, chosen by index / 16. Each 16-bit lane adds at most 16 bytes (n <= 64), so the
// sums cannot overflow; the four lanes of a resample are added at the end. Same sums as
// packed_draws8, bit for bit.
// With kSameWeight (pg.same_weight) the weights are not looked up: each resample's n draws weigh
// n * tw[0] whichever units they pick.
template <bool kSameWeight>
__attribute__((target("avx2"))) void packed_draws8_bytes(const PackedGroup& pg,
                                                         const std::uint64_t sm[8],
                                                         std::int64_t sum[8], bool redo[8]) {
  const std::uint32_t n = pg.n;
  const int pieces = static_cast<int>((n + 15) / 16);
  __m256i tv[4], tw[4];
  for (int c = 0; c < pieces; ++c) {
    tv[c] = _mm256_broadcastsi128_si256(
        _mm_loadu_si128(reinterpret_cast<const __m128i*>(pg.tv + 16 * c)));
    tw[c] = _mm256_broadcastsi128_si256(
        _mm_loadu_si128(reinterpret_cast<const __m128i*>(pg.tw + 16 * c)));
  }
  const __m256i range = _mm256_set1_epi16(static_cast<short>(n));
  const __m256i threshold = _mm256_set1_epi16(static_cast<short>((65536u - n) % n));
  const __m256i nibble = _mm256_set1_epi16(0x000F);
  const __m256i zero_high = _mm256_set1_epi16(static_cast<short>(0x8000));  // byte 1 -> 0
  const __m256i zero_low = _mm256_set1_epi16(0x0080);                       // byte 0 -> 0
  const __m256i low_byte = _mm256_set1_epi16(0x00FF);
  // the candidates the last word gives (n % 4 of each resample's four, when n % 4 != 0)
  alignas(32) std::uint16_t last[16];
  for (std::uint32_t i = 0; i < 16; ++i) last[i] = (n % 4 == 0 || i % 4 < n % 4) ? 0xFFFF : 0;
  const __m256i keep_last = _mm256_load_si256(reinterpret_cast<const __m256i*>(last));
  for (int h = 0; h < 2; ++h) {
    __m256i state = _mm256_load_si256(reinterpret_cast<const __m256i*>(sm + 4 * h));
    __m256i s0 = splitmix4(state), s1 = splitmix4(state);
    __m256i s2 = splitmix4(state), s3 = splitmix4(state);
    __m256i bad = _mm256_setzero_si256();
    __m256i acc_v = _mm256_setzero_si256(), acc_w = _mm256_setzero_si256();
    for (std::uint32_t t = 0; t < n; t += 4) {
      const __m256i x = xoshiro4(s0, s1, s2, s3);
      const __m256i idx = _mm256_mulhi_epu16(x, range);
      __m256i rejected = _mm256_subs_epu16(threshold, _mm256_mullo_epi16(x, range));
      const __m256i at = _mm256_and_si256(idx, nibble);
      const __m256i ctl_v = _mm256_or_si256(at, zero_high);
      const __m256i ctl_w = _mm256_or_si256(_mm256_slli_epi16(at, 8), zero_low);
      const __m256i piece = _mm256_srli_epi16(idx, 4);
      __m256i unit = _mm256_setzero_si256();  // row - lo in byte 0, weight in byte 1
      for (int c = 0; c < pieces; ++c) {
        const __m256i mine = _mm256_cmpeq_epi16(piece, _mm256_set1_epi16(static_cast<short>(c)));
        const __m256i both =
            kSameWeight ? _mm256_shuffle_epi8(tv[c], ctl_v)
                        : _mm256_or_si256(_mm256_shuffle_epi8(tv[c], ctl_v),
                                          _mm256_shuffle_epi8(tw[c], ctl_w));
        unit = _mm256_or_si256(unit, _mm256_and_si256(both, mine));
      }
      if (t + 4 > n) {
        unit = _mm256_and_si256(unit, keep_last);
        rejected = _mm256_and_si256(rejected, keep_last);
      }
      bad = _mm256_or_si256(bad, rejected);
      acc_v = _mm256_add_epi16(acc_v, _mm256_and_si256(unit, low_byte));
      if (!kSameWeight) acc_w = _mm256_add_epi16(acc_w, _mm256_srli_epi16(unit, 8));
    }
    // each resample's four 16-bit lanes: pairs by madd, then the two halves of its 64 bits
    const __m256i ones = _mm256_set1_epi16(1);
    __m256i v = _mm256_madd_epi16(acc_v, ones), w = _mm256_madd_epi16(acc_w, ones);
    v = _mm256_and_si256(_mm256_add_epi32(v, _mm256_srli_epi64(v, 32)),
                         _mm256_set1_epi64x(0xffffffff));
    w = kSameWeight ? _mm256_set1_epi64x(static_cast<long long>(n) * pg.tw[0])
                    : _mm256_and_si256(_mm256_add_epi32(w, _mm256_srli_epi64(w, 32)),
                                       _mm256_set1_epi64x(0xffffffff));
    alignas(32) std::int64_t out[4];
    _mm256_store_si256(reinterpret_cast<__m256i*>(out),
                       _mm256_or_si256(_mm256_slli_epi64(v, 32), w));
    alignas(32) std::int64_t flags[4];
    _mm256_store_si256(reinterpret_cast<__m256i*>(flags),
                       _mm256_cmpeq_epi64(bad, _mm256_setzero_si256()));
    for (int l = 0; l < 4; ++l) {
      sum[4 * h + l] = out[l];
      redo[4 * h + l] = flags[l] == 0;
    }
  }
}
#endif

}  // namespace

double acceleration_from_jackknife(const std::vector<double>& theta) {
  const std::size_t m = theta.size();
  if (m < 2) return kNaN;
  double mean = 0;
  for (double t : theta) mean += t;
  const double n = static_cast<double>(m);
  mean /= n;
  // a is scale-free: the deviations are divided by the power of two nearest their largest
  // magnitude first (exact), so d^3 neither overflows for theta near 1e300 nor underflows
  // for theta near 1e-300.
  const int e = pow2_exponent(theta, mean);
  double num = 0, den = 0;
  for (double t : theta) {
    const double d = std::ldexp((n - 1.0) * (mean - t), -e);
    num += d * d * d;
    den += d * d;
  }
  return (num / (n * n * n)) / (6.0 * std::pow(den / (n * n), 1.5));
}

double jackknife_acceleration(const Statistic& stat, const double* total, double total_weight,
                              const double* rows, const double* weight, std::size_t n_units,
                              std::size_t k) {
  std::vector<double> theta(n_units);
  std::vector<double> loo(k);
  for (std::size_t i = 0; i < n_units; ++i) {
    for (std::size_t c = 0; c < k; ++c) loo[c] = total[c] - rows[i * k + c];
    theta[i] = stat.evaluate(loo.data(), total_weight - weight[i]);
  }
  return acceleration_from_jackknife(theta);
}

Distribution multinomial_bootstrap(const Units& u, const Statistic& stat,
                                   const std::vector<std::uint64_t>& group_keys,
                                   const EngineOptions& opt, bool with_acceleration) {
  const std::size_t G = u.n_groups(), k = u.k;
  const auto B = static_cast<std::size_t>(opt.n_resamples);
  if (group_keys.size() != G) throw std::invalid_argument("group_keys: one key per group");
  if (stat.n_columns() != k) throw std::invalid_argument("statistic/value column mismatch");
  for (std::size_t h = 0; h + 1 < u.stratum_start.size(); ++h) {
    if (u.stratum_start[h + 1] - u.stratum_start[h] >= (std::size_t{1} << 32)) {
      throw std::invalid_argument("a stratum or group holds 2^32 or more units");
    }
  }
  const std::vector<StratumPlan> plans = plan_strata(u, opt.resampler);

  Distribution dist;
  dist.n_groups = G;
  dist.n_resamples = B;
  dist.theta.assign(G * B, kNaN);
  dist.estimate.assign(G, kNaN);
  dist.acceleration.assign(G, kNaN);
  dist.used_counts.assign(G, 0);

  // Tasks: (group, block of resamples), sized to about 2^17 draws each.
  struct Task {
    std::size_t g, b0, b1;
  };
  std::vector<Task> tasks;
  for (std::size_t g = 0; g < G; ++g) {
    std::size_t cost = 1;
    bool all_counts = true;
    for (std::size_t h = u.group_strata[g]; h < u.group_strata[g + 1]; ++h) {
      const StratumPlan& p = plans[h];
      cost += p.counts ? 8 * p.mult.size() : (p.end - p.begin);
      all_counts = all_counts && p.counts;
    }
    dist.used_counts[g] = all_counts ? 1 : 0;
    const std::size_t block = std::clamp<std::size_t>((std::size_t{1} << 17) / cost, 1, B);
    for (std::size_t b0 = 0; b0 < B; b0 += block) tasks.push_back({g, b0, std::min(B, b0 + block)});
  }

#ifdef TB_HAVE_AVX2_PATH
  // groups of one stratum of whole-number rows: eight resamples' draws at a time
  std::vector<PackedGroup> packed(G);
  if (rng::avx2_available() && !rng::scalar_only()) {
    for (std::size_t g = 0; g < G; ++g) {
      if (u.group_strata[g + 1] - u.group_strata[g] == 1) {
        packed[g] = pack_group(u, plans[u.group_strata[g]]);
      }
    }
  }
#endif

  const bool mean = stat.is_mean();
  parallel_for(tasks.size(), opt.threads, [&](std::size_t t) {
    const Task& task = tasks[t];
    std::vector<double> sums(k);
    auto one = [&](std::size_t b) {
      rng::Stream stream(opt.seed, group_keys[task.g], static_cast<std::uint32_t>(b),
                         rng::Domain::kIndexResample);
      std::fill(sums.begin(), sums.end(), 0.0);
      double weight = 0.0;
      for (std::size_t h = u.group_strata[task.g]; h < u.group_strata[task.g + 1]; ++h) {
        resample_stratum(u, plans[h], stream, sums.data(), &weight);
      }
      dist.theta[task.g * B + b] = stat.evaluate(sums.data(), weight);
    };
    std::size_t b = task.b0;
#ifdef TB_HAVE_AVX2_PATH
    const PackedGroup& pg = packed[task.g];
    if (pg.ok) {
      std::int64_t sum[8];
      bool redo[8];
      alignas(32) std::uint64_t sm[16];  // the streams' seeds, sixteen resamples at a time
      for (; b + 8 <= task.b1; b += 8) {
        const std::size_t half = (b - task.b0) % 16;
        if (half == 0) {
          const auto at = static_cast<std::uint32_t>(b);
          if (b + 16 <= task.b1) {
            stream_seeds16(opt.seed, group_keys[task.g], at, sm);
          } else {
            stream_seeds8(opt.seed, group_keys[task.g], at, sm);
          }
        }
        const std::uint64_t* seeds = sm + half;
        if (pg.bytes && pg.same_weight) {
          packed_draws8_bytes<true>(pg, seeds, sum, redo);
        } else if (pg.bytes) {
          packed_draws8_bytes<false>(pg, seeds, sum, redo);
        } else {
          packed_draws8(pg, seeds, sum, redo);
        }
        for (std::size_t l = 0; l < 8; ++l) {
          if (redo[l]) {
            one(b + l);
            continue;
          }
          // the exact sums: rows above lo in the high half, weights in the low half
          const double a = static_cast<double>(sum[l] >> 32) + static_cast<double>(pg.n) * pg.lo;
          const double w = static_cast<double>(sum[l] & 0xffffffff);
          // the mean inline (Mean::evaluate's w > 0 ? a / w : NaN), other statistics called
          dist.theta[task.g * B + b + l] =
              mean ? (w > 0 ? a / w : kNaN) : stat.evaluate(&a, 0.0 + w);
        }
      }
    }
#endif
    for (; b < task.b1; ++b) one(b);
  });

  parallel_for(G, opt.threads, [&](std::size_t g) {
    std::vector<double> sums(k);
    double weight = 0;
    full_sums(u, g, sums.data(), &weight);
    dist.estimate[g] = stat.evaluate(sums.data(), weight);
    if (with_acceleration) {
      const std::size_t b = u.group_begin(g);
      dist.acceleration[g] =
          jackknife_acceleration(stat, sums.data(), weight, u.rows.data() + b * k,
                                 u.weight.data() + b, u.group_end(g) - b, k);
    }
  });
  return dist;
}

Distribution distribution_from_counts(const Units& u, const Statistic& stat,
                                      const double* counts, std::size_t n_resamples,
                                      bool with_acceleration) {
  const std::size_t k = u.k, m = u.n_units();
  Distribution dist;
  dist.n_groups = 1;
  dist.n_resamples = n_resamples;
  dist.theta.resize(n_resamples);
  dist.used_counts.assign(1, 0);
  std::vector<double> sums(k);
  for (std::size_t b = 0; b < n_resamples; ++b) {
    if ((b & 255) == 0) check_cancelled();
    std::fill(sums.begin(), sums.end(), 0.0);
    double weight = 0;
    for (std::size_t i = 0; i < m; ++i) {
      const double c = counts[b * m + i];
      if (c == 0) continue;
      for (std::size_t col = 0; col < k; ++col) sums[col] += c * u.rows[i * k + col];
      weight += c * u.weight[i];
    }
    dist.theta[b] = stat.evaluate(sums.data(), weight);
  }
  double weight = 0;
  full_sums(u, 0, sums.data(), &weight);
  dist.estimate.assign(1, stat.evaluate(sums.data(), weight));
  dist.acceleration.assign(
      1, with_acceleration ? jackknife_acceleration(stat, sums.data(), weight, u.rows.data(),
                                                    u.weight.data(), m, k)
                           : kNaN);
  return dist;
}

namespace {

// The two order-statistic indices numpy's 'linear' quantile q (in [0, 1]) interpolates
// between, and the weight of the second.
struct Interp {
  std::int64_t lo, hi;
  double gamma;
};

Interp linear_index(std::size_t size, double q) {
  // numpy.quantile, q in [0, 1] (numpy.percentile divides by 100 first): the 'linear' method's
  // virtual index is (n - 1) * q (numpy/lib/_function_base_impl.py, _QuantileMethods['linear'];
  // not the Hyndman-Fan form n*q + (alpha + q*(1 - alpha - beta)) - 1 with alpha = beta = 1 of
  // the other continuous methods, equal in exact arithmetic but not always to the last bit).
  const double n = static_cast<double>(size);
  const double virt = (n - 1.0) * q;
  const double prev = std::floor(virt);
  const auto last = static_cast<std::int64_t>(size) - 1;
  return {std::clamp<std::int64_t>(static_cast<std::int64_t>(prev), 0, last),
          std::clamp<std::int64_t>(static_cast<std::int64_t>(prev) + 1, 0, last), virt - prev};
}

// numpy's _lerp: a + (b - a) t, or b - (b - a)(1 - t) for t >= 0.5.
double lerp(double x, double y, double gamma) {
  const double diff = y - x;
  return gamma >= 0.5 ? y - diff * (1.0 - gamma) : x + diff * gamma;
}

// Order statistics lo and hi (hi = lo or lo + 1) of w, where w holds the values of ranks
// first .. first + w.size() - 1 of the whole array (in any order).
void select_in(double* begin, double* end, std::int64_t first, const Interp& at, double* x,
               double* y) {
  const auto k = static_cast<std::ptrdiff_t>(at.lo - first);
  std::nth_element(begin, begin + k, end);
  *x = begin[k];
  *y = at.hi == at.lo ? *x : *std::min_element(begin + k + 1, end);
}

void select_in(std::vector<double>& w, std::int64_t first, const Interp& at, double* x,
               double* y) {
  select_in(w.data(), w.data() + w.size(), first, at, x, y);
}

// The four order statistics of percentile_pair in one pass over a (a Floyd-Rivest-style
// selection, deterministic): the bounds of a window around each pair of ranks are read from a
// sorted sample of 512 values at a fixed stride, one pass counts the values below each window
// and gathers the values inside it, and the ranks are selected within the windows (about a
// tenth of the array). Returns false, leaving out unset, where a window misses its ranks
// (an unusual sample) or the two windows meet; the caller then selects in the whole array.
bool windowed_pair(const std::vector<double>& a, const Interp& l, const Interp& h, double out[4]) {
  constexpr std::size_t kSample = 512;
  constexpr std::int64_t kMargin = 24;  // sample ranks either side: ~7 standard errors at 2.5%
  const std::size_t n = a.size();
  if (n < 8 * kSample) return false;
  std::vector<double> sample(kSample);
  for (std::size_t i = 0; i < kSample; ++i) sample[i] = a[i * n / kSample];
  std::sort(sample.begin(), sample.end());
  constexpr double kInf = std::numeric_limits<double>::infinity();
  auto bounds = [&](const Interp& at, double* lo, double* hi) {
    const double scale = static_cast<double>(kSample) / static_cast<double>(n);
    const auto i0 = static_cast<std::int64_t>(std::floor(static_cast<double>(at.lo) * scale)) -
                    kMargin;
    const auto i1 = static_cast<std::int64_t>(std::ceil(static_cast<double>(at.hi) * scale)) +
                    kMargin;
    *lo = i0 < 0 ? -kInf : sample[static_cast<std::size_t>(i0)];
    *hi = i1 >= static_cast<std::int64_t>(kSample) ? kInf : sample[static_cast<std::size_t>(i1)];
  };
  double l0, l1, h0, h1;
  bounds(l, &l0, &l1);
  bounds(h, &h0, &h1);
  if (!(l1 < h0)) return false;
  // the windows' values gathered without a branch per value: each is written to both
  // buffers and kept (the count moved on) where it lies in the window (uninitialised buffers
  // of n values each: no fill)
  std::unique_ptr<double[]> buf(new double[2 * n]);
  double* wl = buf.get();
  double* wh = buf.get() + n;
  std::int64_t below_l = 0, below_h = 0;
  std::size_t nl = 0, nh = 0;
  for (const double v : a) {
    below_l += v < l0;
    below_h += v < h0;
    const bool in_l = v >= l0 && v <= l1;
    const bool in_h = !in_l && v >= h0 && v <= h1;
    wl[nl] = v;
    nl += in_l;
    wh[nh] = v;
    nh += in_h;
  }
  const auto sl = static_cast<std::int64_t>(nl), sh = static_cast<std::int64_t>(nh);
  if (below_l > l.lo || l.hi >= below_l + sl || below_h > h.lo || h.hi >= below_h + sh) {
    return false;
  }
  select_in(wl, wl + nl, below_l, l, &out[0], &out[1]);
  select_in(wh, wh + nh, below_h, h, &out[2], &out[3]);
  return true;
}

}  // namespace

void quantile_pair(std::vector<double>& a, double q_low, double q_high, double* low,
                   double* high) {
  const Interp l = linear_index(a.size(), q_low), h = linear_index(a.size(), q_high);
  if (a.empty() || h.lo <= l.hi) {  // overlapping selections: one at a time
    *low = quantile_linear(a, q_low);
    *high = quantile_linear(a, q_high);
    return;
  }
  double o[4];
  if (windowed_pair(a, l, h, o)) {
    *low = lerp(o[0], o[1], l.gamma);
    *high = lerp(o[2], o[3], h.gamma);
    return;
  }
  // Two selections (same values as from the whole array): after nth_element at h.lo, a[:h.lo]
  // holds the values <= a[h.lo] and a[h.lo + 1:] those >= it, so order statistic h.hi is the
  // least of the short tail, and l.lo is selected within a[:h.lo]; then a[l.lo + 1 : h.lo + 1]
  // holds every value between, and order statistic l.hi is its least.
  std::nth_element(a.begin(), a.begin() + h.lo, a.end());
  const double hx = a[h.lo];
  const double hy = h.hi == h.lo ? hx : *std::min_element(a.begin() + h.lo + 1, a.end());
  std::nth_element(a.begin(), a.begin() + l.lo, a.begin() + h.lo);
  const double x = a[l.lo];
  const double y = l.hi == l.lo ? x : *std::min_element(a.begin() + l.lo + 1, a.begin() + h.lo + 1);
  *low = lerp(x, y, l.gamma);
  *high = lerp(hx, hy, h.gamma);
}

void percentile_pair(std::vector<double>& a, double q_low, double q_high, double* low,
                     double* high) {
  quantile_pair(a, q_low / 100.0, q_high / 100.0, low, high);
}

double quantile_linear(std::vector<double>& a, double q) {
  const Interp at = linear_index(a.size(), q);
  double x = 0, y = 0;
  select_in(a, 0, at, &x, &y);  // selection instead of a sort: O(B)
  return lerp(x, y, at.gamma);
}

Summary summarize(const Distribution& dist, const std::vector<std::size_t>& units_per_group,
                  Method method, double level, int threads) {
  const std::size_t G = dist.n_groups, B = dist.n_resamples;
  Summary s;
  s.boot_mean.assign(G, kNaN);
  s.se.assign(G, kNaN);
  s.ci_low.assign(G, kNaN);
  s.ci_high.assign(G, kNaN);
  s.n_valid.assign(G, 0);
  s.degenerate.assign(G, 0);
  const double alpha = (1.0 - level) / 2.0;
  parallel_for(G, threads, [&](std::size_t g) {
    // one pass: the valid values, their sum in order, the first least and the greatest
    std::vector<double> v(B);
    std::size_t m = 0;
    double mean = 0, mn = 0, mx = 0;
    for (std::size_t b = 0; b < B; ++b) {
      const double t = dist.theta[g * B + b];
      if (std::isnan(t)) continue;
      if (m == 0) {
        mn = mx = t;
      } else {
        if (t < mn) mn = t;  // strict: the first of equal least values (its sign of zero)
        if (t > mx) mx = t;
      }
      mean += t;
      v[m++] = t;
    }
    v.resize(m);
    s.n_valid[g] = static_cast<std::int64_t>(m);
    const double est = dist.estimate[g];
    if (units_per_group[g] < 2 || m == 0 || mn == mx) {
      s.degenerate[g] = 1;
      s.boot_mean[g] = m == 0 ? est : mn;
      s.se[g] = 0.0;
      s.ci_low[g] = s.ci_high[g] = est;
      return;
    }
    const double nv = static_cast<double>(m);
    mean /= nv;
    // Squares of deviations near 1e-300 underflow (a spread would read as se = 0) and near
    // 1e300 overflow: square them divided by a power of two (exact) and scale the root back.
    // (Rounded subtraction is monotone: max |t - mean| is at the least or the greatest t.)
    const int e = pow2_exponent_of(std::max(std::fabs(mn - mean), std::fabs(mx - mean)));
    double ss = 0;
    for (double t : v) {
      const double d = e == 0 ? t - mean : std::ldexp(t - mean, -e);  // ldexp(x, 0) == x
      ss += d * d;
    }
    s.boot_mean[g] = mean;
    s.se[g] = std::ldexp(std::sqrt(ss / (nv - 1.0)), e);
    double q_lo = alpha, q_hi = 1.0 - alpha;
    if (method == Method::kBca) {
      std::size_t below = 0, at_or_below = 0;
      for (double t : v) {
        below += t < est;
        at_or_below += t <= est;
      }
      const double z0 = ndtri(static_cast<double>(below + at_or_below) / (2.0 * nv));
      const double a = dist.acceleration[g];
      const double z_alpha = ndtri(alpha);
      const double num1 = z0 + z_alpha;
      const double num2 = z0 - z_alpha;
      q_lo = ndtr(z0 + num1 / (1.0 - a * num1));
      q_hi = ndtr(z0 + num2 / (1.0 - a * num2));
      if (std::isnan(q_lo) || std::isnan(q_hi)) return;  // undefined BCa: CI stays NaN
    }
    double lo = 0, hi = 0;
    percentile_pair(v, q_lo * 100.0, q_hi * 100.0, &lo, &hi);
    if (method == Method::kBasic) {
      s.ci_low[g] = 2.0 * est - hi;
      s.ci_high[g] = 2.0 * est - lo;
    } else {
      s.ci_low[g] = lo;
      s.ci_high[g] = hi;
    }
  });
  return s;
}

}  // namespace tb::stats
