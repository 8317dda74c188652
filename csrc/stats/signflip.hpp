// The Monte Carlo sign-flip (randomisation) test's count of patterns at least as extreme as
// the observed sum (Fisher 1935, The Design of Experiments, section 21; stats.sign_flip_test):
// each pattern flips the sign of every unit's sum independently, the signs given as bytes (a
// unit's sum keeps its sign where the byte's top bit is set: numpy's Generator.integers(0, 2,
// dtype=int8) draws exactly that bit of each byte of its 32-bit outputs).
#pragma once

#include <cstddef>
#include <cstdint>

namespace tb::stats {

// The number of patterns r < n_patterns with |sum_u s_ru x_u| >= threshold, where pattern r's
// signs are the top bits of bytes[r * n_units .. (r + 1) * n_units). Every pattern's sum is
// added in one fixed order (units in blocks of eight, blocks in order), whatever `threads`.
std::int64_t sign_flip_hits(const double* x, std::size_t n_units, const std::uint8_t* bytes,
                            std::size_t n_patterns, double threshold, int threads);

}  // namespace tb::stats
