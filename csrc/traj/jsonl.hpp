// The compiled scans of the JSON readers: what tumorboard._json.load_json walks a parsed
// document for (scan_document), and the item digests of the JSON-lines importer's lines. The
// bulk reader of JSON lines is jsonl_columns.hpp.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>
#include <vector>

namespace tb::traj {

// What one scan of a JSON document finds: whether it is strict UTF-8 (as Python's
// bytes.decode("utf-8") accepts it: no overlong forms, no encoded surrogates, nothing past
// U+10FFFF, no truncated sequence), the deepest nesting of arrays and objects outside strings
// (exact for valid JSON), and the test of tumorboard._json.may_break_limits, aware of strings:
// surrogate escapes only inside strings, integer parts of 19 digits and exponents only outside
// them (an id such as "3e000" inside a string is text, not a number; a long fraction cannot
// overflow).
struct DocumentScan {
  bool may_break_limits = false;
  bool utf8 = true;
  std::int64_t max_depth = 0;
};

DocumentScan scan_document(const std::uint8_t* data, std::size_t n);

// The 32 lowercase hex digits of BLAKE2b-128 of fp, NUL, ids[i], NUL, the decimal positions[i],
// NUL, lines[i], for every i, written to out + 32 * i. Runs on up to `threads` threads (0: all
// cores); each digest depends on its own inputs only.
void line_digests(std::string_view fp, const std::vector<std::string_view>& ids,
                  const std::int64_t* positions, const std::vector<std::string_view>& lines,
                  char* out, int threads);

}  // namespace tb::traj
