// The Monte Carlo sign-flip (randomisation) test's count of patterns at least as extreme as
// the observed sum (Fisher 1935, The Design of Experiments, section 21; stats.sign_flip_test):
// each pattern flips the sign of every unit's sum independently, the signs given as bytes (a
// unit's sum keeps its sign where the byte's top bit is set: numpy's Generator.integers(0, 2,
// dtype=int8) draws exactly that bit of each byte of its 32-bit outputs).
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace tb::stats {

// The number of patterns r < n_patterns with |sum_u s_ru x_u| >= threshold, where pattern r's
// signs are the top bits of bytes[r * n_units .. (r + 1) * n_units). Every pattern's sum is
// added in one fixed order (units in blocks of eight, blocks in order), whatever `threads`.
std::int64_t sign_flip_hits(const double* x, std::size_t n_units, const std::uint8_t* bytes,
                            std::size_t n_patterns, double threshold, int threads);

// numpy's PCG64 (O'Neill 2014, "PCG: a family of simple fast space-efficient statistically good
// algorithms for random number generation", the 128-bit LCG with the XSL-RR output; numpy's
// random/src/pcg64): the state after `steps` outputs, and output k of a state.
struct Pcg64 {
  unsigned __int128 state, inc;
  void advance(unsigned __int128 steps);
  std::uint64_t next();
};

// sign_flip_hits of n_patterns patterns drawn as numpy draws
// Generator.integers(0, 2, size=(m, n_units), dtype=np.int8) from a fresh PCG64 in chunks of
// m = chunk patterns (the last chunk: what is left): each chunk's signs are the top bits of the
// bytes of the generator's next 32-bit outputs (low half of each 64-bit output first), from a
// fresh 32-bit output. The outputs are generated where they are used, the generator jumped
// ahead to each task's first one, so `threads` changes no count.
std::int64_t sign_flip_hits_pcg64(const double* x, std::size_t n_units, Pcg64 start,
                                  std::size_t n_patterns, std::size_t chunk, double threshold,
                                  int threads);

// sign_flip_hits_pcg64 of n_sets sets of unit sums (x: n_sets x n_units, row-major) on the same
// patterns, each against its own threshold: hits[s] is sign_flip_hits_pcg64(x + s * n_units,
// ..., thresholds[s], ...), each set's pattern sums added in the same order, bit for bit. The
// patterns are generated once per block of eight sets, not once per set, and the eight sums of
// a pattern are added side by side (independent chains of additions).
std::vector<std::int64_t> sign_flip_hits_pcg64_many(const double* x, std::size_t n_sets,
                                                    std::size_t n_units,
                                                    const double* thresholds, Pcg64 start,
                                                    std::size_t n_patterns, std::size_t chunk,
                                                    int threads);

}  // namespace tb::stats
