// The compiled reader of the JSON-lines importer (python/tumorboard/traj/importers/): the
// lines of a chunk, and the typed columns of the record fields read from them in one pass.
//
// read_columns parses each line as strict JSON (RFC 8259) with every check that
// tumorboard._json.load_json adds to json.loads, and converts the values of the requested keys
// (and the events of an events field) as the importer's checks (_jsonl_fields._check and
// _events) do. It reads the common case: well-typed object lines. A line it cannot vouch for
// (not an object or not JSON, a value load_json or a check refuses, a repeated requested key,
// a value of a field read as nested JSON) is given up: the Python line reader reads it, decides
// what is refused and names each bad line, so the two readers give the same rows by
// construction.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace tb::traj {

// The non-blank lines of a chunk (split on '\n' only; a line of bytes.strip() blanks, " \t\r\v\f",
// is blank): [starts[i], ends[i]) of each, without its newline, and its index among all lines.
struct LineSpans {
  std::vector<std::int64_t> starts;
  std::vector<std::int64_t> ends;
  std::vector<std::int64_t> index;
};

LineSpans line_spans(const std::uint8_t* data, std::size_t n);

// How a field's value is checked and stored (the kinds of _jsonl_fields._KIND).
enum class FieldKind : std::uint8_t {
  kId,          // a string, or an integer stored as its decimal text
  kStr,         // a string
  kBool,        // true or false
  kInt,         // an integer (64-bit)
  kInt32,       // an integer in [-2^31, 2^31 - 1]
  kNumber,      // a finite number, stored as a double
  kFlag,        // true/false (1.0/0.0) or a number in [0, 1], stored as a double
  kStrList,     // a list of strings
  kIntList,     // a list of integers
  kNumberList,  // a list of finite numbers (doubles)
  kBoolList,    // a list of true/false
  kNested,      // read by the line reader: a line that has the key gives up the chunk
  kEvents,      // a list of event objects, read into EventData (one such field at most)
};

// Whether a kind holds a list per row.
inline bool is_list(FieldKind kind) {
  return kind == FieldKind::kStrList || kind == FieldKind::kIntList ||
         kind == FieldKind::kNumberList || kind == FieldKind::kBoolList;
}

// Where a kind's values (of a list kind: its elements) are in a ColumnData.
enum class ValueLayout : std::uint8_t {
  kStrings,  // offsets into bytes
  kBools,    // bits in bytes
  kInts,     // ints
  kNumbers,  // numbers
  kNone,     // no column (kNested, kEvents)
};

inline ValueLayout value_layout(FieldKind kind) {
  switch (kind) {
    case FieldKind::kId:
    case FieldKind::kStr:
    case FieldKind::kStrList:
      return ValueLayout::kStrings;
    case FieldKind::kBool:
    case FieldKind::kBoolList:
      return ValueLayout::kBools;
    case FieldKind::kInt:
    case FieldKind::kInt32:
    case FieldKind::kIntList:
      return ValueLayout::kInts;
    case FieldKind::kNumber:
    case FieldKind::kFlag:
    case FieldKind::kNumberList:
      return ValueLayout::kNumbers;
    case FieldKind::kNested:
    case FieldKind::kEvents:
      break;
  }
  return ValueLayout::kNone;
}

// A field: the parts of its (dotted) record key and its kind.
struct FieldSpec {
  std::vector<std::string> path;
  FieldKind kind = FieldKind::kStr;
};

// One column in the Arrow columnar layout (validity bitmaps least significant bit first).
// Strings: offsets (n + 1) into bytes. Bool: bits in bytes. kId/kStr/kBool/kInt/kInt32/
// kNumber/kFlag: n values. Lists: list_offsets (n + 1) into the elements, which are laid out
// as the scalar kinds are (strings: offsets + bytes; booleans: bits; integers; doubles).
struct ColumnData {
  FieldKind kind = FieldKind::kStr;
  std::int64_t null_count = 0;
  std::vector<std::uint8_t> validity;
  std::vector<std::int64_t> list_offsets;
  std::vector<std::int64_t> offsets;
  std::string bytes;
  std::vector<std::int64_t> ints;
  std::vector<double> numbers;
};

// A text column in the Arrow layout: validity bytes (one per row), offsets (n + 1), UTF-8.
struct TextData {
  std::vector<std::uint8_t> valid;
  std::vector<std::int64_t> offsets{0};
  std::string bytes;

  void add(std::string_view text) {
    bytes.append(text);
    offsets.push_back(static_cast<std::int64_t>(bytes.size()));
    valid.push_back(1);
  }
  void null() {
    offsets.push_back(static_cast<std::int64_t>(bytes.size()));
    valid.push_back(0);
  }
  void truncate(std::size_t rows) {
    valid.resize(rows);
    offsets.resize(rows + 1);
    bytes.resize(static_cast<std::size_t>(offsets.back()));
  }
};

// The events of a kEvents field, one row per event, in line and list order, as the importer's
// _jsonl_fields._events checks and converts them: step (the list index when absent), role,
// kind (one of the event kinds given), tool, input (text that is JSON as it is, other text
// and any other value as tumorboard._json.json_text writes it), output (text as it is, other
// values as json_text), ok, error and latency_s. Validity bytes are one per row.
struct EventData {
  std::vector<std::int64_t> line;  // the line (index into the spans) of each event
  std::vector<std::int64_t> step;
  std::vector<std::uint8_t> step_valid;
  TextData role, kind, tool, input, output, error;
  std::vector<std::uint8_t> ok;
  std::vector<std::uint8_t> ok_valid;
  std::vector<double> latency;
  std::vector<std::uint8_t> latency_valid;

  std::size_t size() const { return line.size(); }
  void truncate(std::size_t rows);
  void append(EventData&& other);
};

struct ReadColumns {
  bool ok = false;
  std::string reason;       // why the chunk goes to the line reader (ok == false)
  std::int64_t line = -1;   // the line (index into the spans) that decided it, or -1
  std::vector<ColumnData> columns;          // one per field (kNested: none)
  std::vector<std::string> keys_seen;       // see read_columns
  std::vector<std::int64_t> given_up;       // per_line: the lines left to the line reader
  EventData events;                         // the kEvents field's events
};

// Reads the fields of every line [starts[i], ends[i]) of data. max_depth bounds the nesting of
// arrays and objects (the top-level object is level 1). keys_seen lists, in first-seen order,
// the keys of the first `sample` lines, and "key.sub" for the keys of an object value (the
// importer's _keys_seen). With per_line, a line it cannot vouch for does not give up the chunk:
// it gets a null row in every column and its index in given_up (ascending), and the other
// lines are read (keys_seen then misses what such a line has). Runs on up to `threads` threads
// (0: all cores); the result does not depend on the thread count.
ReadColumns read_columns(const std::uint8_t* data, const std::int64_t* starts,
                         const std::int64_t* ends, std::size_t n,
                         const std::vector<FieldSpec>& fields, int max_depth, std::size_t sample,
                         bool per_line, const std::vector<std::string>& event_kinds, int threads);

}  // namespace tb::traj
