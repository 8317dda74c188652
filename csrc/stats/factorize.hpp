// Dense codes of fixed-width byte records (e.g. a numpy string array's buffer), in order of first
// appearance: the O(n) step behind label coding, without sorting the n records. Records are told
// apart by their bytes (a hash table that compares every candidate's bytes), so equal codes mean
// equal records, always.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace tb::stats {

// Writes the code of each of the n records of `width` bytes at `data` to `codes` and returns the
// index of the first record of each code (codes count up from 0 in order of first appearance).
std::vector<std::int64_t> factorize_fixed(const std::uint8_t* data, std::size_t n,
                                          std::size_t width, std::int64_t* codes);

}  // namespace tb::stats
