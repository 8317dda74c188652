// Dense codes of byte records (a numpy string array's fixed-width buffer, or an Arrow string
// array's offsets and bytes), in order of first appearance: the O(n) step behind label coding,
// without sorting the n records. Records are told apart by their bytes (a hash table that
// compares every candidate's bytes), so equal codes mean equal records, always.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace tb::stats {

// Writes the code of each of the n records of `width` bytes at `data` to `codes` and returns the
// index of the first record of each code (codes count up from 0 in order of first appearance).
std::vector<std::int64_t> factorize_fixed(const std::uint8_t* data, std::size_t n,
                                          std::size_t width, std::int64_t* codes);

// The same for n variable-length records: record r is data[offsets[r], offsets[r + 1]).
// The offsets must be non-decreasing and within the data (the caller checks).
std::vector<std::int64_t> factorize_offsets(const std::uint8_t* data,
                                            const std::int64_t* offsets, std::size_t n,
                                            std::int64_t* codes);

// Renumbers codes (from factorize_offsets, with `first`) so that they count up in the byte-wise
// lexicographic order of the strings (a proper prefix first: the order of Arrow/polars string
// sorts and of UTF-8 code points), and puts `first` in that order.
void sort_codes(const std::uint8_t* data, const std::int64_t* offsets, std::size_t n,
                std::int64_t* codes, std::vector<std::int64_t>& first);

}  // namespace tb::stats
