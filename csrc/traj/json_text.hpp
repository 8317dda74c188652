// Python's JSON text, reproduced for the compiled JSON-lines reader (jsonl_columns.cpp): what
// tumorboard._json.json_text writes (json.dumps with ensure_ascii=False and sort_keys=True) for
// strings and numbers, and whether Python's json.loads accepts a text (events.input keeps text
// that already is JSON; tumorboard.traj.importers._common.input_text).
#pragma once

#include <string>
#include <string_view>

namespace tb::traj {

// Appends json.dumps(s, ensure_ascii=False) of the UTF-8 text s: a quote, then each character
// as it is except '"' and '\' (escaped with a backslash), \b \f \n \r \t, and the other
// characters below U+0020 as \u00xx with lower-case hex digits (CPython's
// Modules/_json.c, escape_unicode), then a quote.
void append_json_string(std::string_view s, std::string& out);

// Appends repr(d) of a finite double, as json.dumps writes floats (CPython's
// Python/pystrtod.c, format_float_short in 'r' mode): the shortest digits that read back as d;
// fixed notation with ".0" for whole numbers when the decimal point falls within -4 < decpt
// <= 16, else d.ddde+XX with at least two exponent digits.
void append_float_repr(double d, std::string& out);

// Whether json.loads accepts the text (CPython's json module, strict): 1 yes, 0 no, -1 when
// it nests deeper than the limit (Python raises RecursionError there, not a decode error;
// the caller leaves such text to Python). NaN, Infinity and -Infinity are accepted, numbers of
// any size, lone surrogate escapes; control characters in strings are not.
int python_json_accepts(std::string_view text, int max_depth = 256);

}  // namespace tb::traj
