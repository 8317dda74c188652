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
// The offsets must be non-decreasing and within the data (the caller checks). With `sort`, the
// codes count up in the byte-wise lexicographic order of the strings (a proper prefix first: the
// order of Arrow/polars string sorts and of UTF-8 code points), and `first` is in that order.
std::vector<std::int64_t> factorize_offsets(const std::uint8_t* data,
                                            const std::int64_t* offsets, std::size_t n,
                                            std::int64_t* codes, bool sort);

// One chunk of an Arrow string-view array (Arrow columnar format, "Variable-size Binary View
// Layout"): 16 bytes per string at `views`, an int32 length, then the string itself when it has
// at most 12 bytes, else its first 4 bytes, an int32 buffer index and an int32 offset into
// `buffers`. The caller checks every view against the buffers (check_views).
struct ViewChunk {
  const std::uint8_t* views;
  std::size_t n;
  std::vector<const std::uint8_t*> buffers;
};

// factorize_offsets for the strings of several view chunks, numbered on across them (the chunks
// of one column, coded without joining them first).
std::vector<std::int64_t> factorize_views(const std::vector<ViewChunk>& chunks, bool sort,
                                          std::int64_t* codes);

// Throws std::invalid_argument naming the first view whose length is negative or whose bytes
// lie outside its buffer (sizes[i]: the size of buffers[i] in bytes).
void check_views(const std::uint8_t* views, std::size_t n,
                 const std::vector<std::int64_t>& sizes);

// Integer labels whose range is compact (hi - lo < 4 n + 1024): their distinct values in
// increasing order, found with a presence table over the range (no sort, no hash), into `out`;
// false, `out` untouched, where the range is wider.
bool compact_distinct(const std::int64_t* x, std::size_t n, int threads,
                      std::vector<std::int64_t>& out);

// codes[r] = rank[k] where values[k] == x[r]; `values` are compact_distinct's values of x (m of
// them, increasing), so every x[r] is among them.
void compact_codes(const std::int64_t* x, std::size_t n, const std::int64_t* values,
                   const std::int64_t* rank, std::size_t m, int threads, std::int64_t* codes);

}  // namespace tb::stats
