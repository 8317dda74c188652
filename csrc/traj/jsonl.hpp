// The compiled pass of the JSON-lines importer (python/tumorboard/traj/importers/): one scan of a
// chunk of lines for what decides whether Arrow's JSON reader may read it in bulk, and the item
// digests of its lines.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>
#include <vector>

namespace tb::traj {

// What one scan of a chunk of JSON lines finds.
struct ChunkScan {
  // Every line that is not blank starts, after blanks (space, tab, CR, VT, FF), with '{'.
  bool every_line_object = true;
  // The chunk may hold what tumorboard._json.load_json refuses and Arrow passes: an escape that
  // can decode to a lone surrogate (backslash, 'u', d/D, then 8-9 or a-f/A-F), a run of 19
  // digits (an integer past 64 bits) or an exponent of three digits that is not negative (e or
  // E, an optional '+', three digits). The test of tumorboard._json.may_break_limits, exactly.
  bool may_break_limits = false;
  // The bytes are UTF-8 as Python's bytes.decode("utf-8") accepts it (no overlong forms, no
  // encoded surrogates U+D800..U+DFFF, nothing past U+10FFFF, no truncated sequence).
  bool utf8 = true;
  // The most '[' and '{' bytes on one line (a bound of its nesting depth).
  std::int64_t max_brackets = 0;
};

// Scans n bytes of JSON lines once.
ChunkScan scan_chunk(const std::uint8_t* data, std::size_t n);

// What one scan of a JSON document finds: whether it is strict UTF-8 (as scan_chunk), the
// deepest nesting of arrays and objects outside strings (exact for valid JSON), and
// may_break_limits as scan_chunk tests it but aware of strings: surrogate escapes only inside
// strings, integer parts of 19 digits and exponents only outside them (an id such as "3e000"
// inside a string is text, not a number; a long fraction cannot overflow).
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
