// Which names occur in a JSON-lines chunk as quoted strings: the test the JSON-lines importer
// (python/tumorboard/traj/importers/_jsonl_read.py) runs before Arrow's JSON reader, for the
// record keys that send a chunk to the line reader and for those no line has (left out of the
// reader's schema).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>
#include <vector>

namespace tb::traj {

// For each name, whether the bytes '"', name, '"' occur anywhere in data[0 .. n) (what Python's
// `b'"' + name + b'"' in data` tells), in one pass over the quote characters.
std::vector<bool> quoted_present(const std::uint8_t* data, std::size_t n,
                                 const std::vector<std::string_view>& names);

}  // namespace tb::traj
