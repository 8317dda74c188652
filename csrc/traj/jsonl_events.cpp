// The events field of the compiled JSON-lines reader: each event checked and converted as the
// importer's _jsonl_fields._events does (python/tumorboard/traj/importers/), into EventData.
#include <algorithm>
#include <string>
#include <utility>

#include "traj/json_text.hpp"
#include "traj/jsonl_reader.hpp"

namespace tb::traj {

void EventData::truncate(std::size_t rows) {
  line.resize(rows);
  step.resize(rows);
  step_valid.resize(rows);
  for (TextData* t : {&role, &kind, &tool, &input, &output, &error}) t->truncate(rows);
  ok.resize(rows);
  ok_valid.resize(rows);
  latency.resize(rows);
  latency_valid.resize(rows);
}

namespace {

void append_text(TextData& to, TextData&& from) {
  const std::int64_t base = to.offsets.back();
  for (std::size_t k = 1; k < from.offsets.size(); ++k) to.offsets.push_back(base + from.offsets[k]);
  to.bytes += from.bytes;
  to.valid.insert(to.valid.end(), from.valid.begin(), from.valid.end());
}

template <class T>
void append_all(std::vector<T>& to, const std::vector<T>& from) {
  to.insert(to.end(), from.begin(), from.end());
}

}  // namespace

void EventData::append(EventData&& other) {
  append_all(line, other.line);
  append_all(step, other.step);
  append_all(step_valid, other.step_valid);
  append_text(role, std::move(other.role));
  append_text(kind, std::move(other.kind));
  append_text(tool, std::move(other.tool));
  append_text(input, std::move(other.input));
  append_text(output, std::move(other.output));
  append_text(error, std::move(other.error));
  append_all(ok, other.ok);
  append_all(ok_valid, other.ok_valid);
  append_all(latency, other.latency);
  append_all(latency_valid, other.latency_valid);
}

// The events list at p_ (a null one is a null row of read_field), into events_.
bool LineReader::read_events(int depth) {
  if (*p_ != '[') return fail("events: not a list");
  std::int64_t index = 0;
  return elements(depth + 1, [&] {
    if (p_ >= e_ || *p_ != '{') return fail("events: an event that is not an object");
    return event(index++, depth + 1);
  });
}

// A string value or null at p_, into text (false: another value).
bool LineReader::text_or_null(TextData& text) {
  if (*p_ == 'n') {
    if (!literal("null", 4)) return false;
    text.null();
    return true;
  }
  if (*p_ != '"') return fail("events: a value of the wrong type");
  scratch_.clear();
  if (!string(&scratch_)) return false;
  text.add(scratch_);
  return true;
}

// One event object at p_ (the index-th of its list).
bool LineReader::event(std::int64_t index, int depth) {
  enum Key { kStep, kRole, kKind, kTool, kInput, kOutput, kOk, kError, kLatency, kKeys };
  static constexpr std::string_view kNames[kKeys] = {
      "step", "role", "kind", "tool", "input", "output", "ok", "error", "latency_s"};
  bool seen[kKeys] = {};
  EventData& ev = events_;
  const bool read = members(depth, [&](std::string_view key) {
    int which = kKeys;
    for (int k = 0; k < kKeys; ++k) {
      if (key == kNames[k]) which = k;
    }
    if (which != kKeys) {
      if (seen[which]) return fail("a repeated key");
      seen[which] = true;
    }
    const std::uint8_t c = *p_;
    switch (which) {
      case kStep: {
        if (c == 'n') {
          if (!literal("null", 4)) return false;
          ev.step.push_back(0);
          ev.step_valid.push_back(0);
          break;
        }
        if (c != '-' && !is_digit(c)) return fail("events: a value of the wrong type");
        Number n;
        if (!number(n)) return false;
        if (!n.integer || n.i < -2147483648LL || n.i > 2147483647LL) {
          return fail("events: a step outside 32 bits");
        }
        ev.step.push_back(n.i);
        ev.step_valid.push_back(1);
        break;
      }
      case kRole:
        if (!text_or_null(ev.role)) return false;
        break;
      case kTool:
        if (!text_or_null(ev.tool)) return false;
        break;
      case kError:
        if (!text_or_null(ev.error)) return false;
        break;
      case kKind: {
        if (c != '"') return fail("events: a kind that is not one of the event kinds");
        scratch_.clear();
        if (!string(&scratch_)) return false;
        if (std::find(event_kinds_.begin(), event_kinds_.end(), scratch_) ==
            event_kinds_.end()) {
          return fail("events: a kind that is not one of the event kinds");
        }
        ev.kind.add(scratch_);
        break;
      }
      case kInput:
      case kOutput: {
        TextData& text = which == kInput ? ev.input : ev.output;
        if (c == 'n') {
          if (!literal("null", 4)) return false;
          text.null();
        } else if (c == '"') {
          scratch_.clear();
          if (!string(&scratch_)) return false;
          if (which == kOutput) {
            text.add(scratch_);
          } else {
            const int accepted = python_json_accepts(scratch_);
            if (accepted < 0) return fail("events: an input nested too deep to decide");
            if (accepted == 1) {
              text.add(scratch_);
            } else {
              std::string quoted;
              append_json_string(scratch_, quoted);
              text.add(quoted);
            }
          }
        } else {
          std::string json;
          if (!canonical(json, depth)) return false;
          text.add(json);
        }
        break;
      }
      case kOk:
        if (c == 't' && literal("true", 4)) {
          ev.ok.push_back(1);
          ev.ok_valid.push_back(1);
        } else if (c == 'f' && literal("false", 5)) {
          ev.ok.push_back(0);
          ev.ok_valid.push_back(1);
        } else if (c == 'n' && literal("null", 4)) {
          ev.ok.push_back(0);
          ev.ok_valid.push_back(0);
        } else {
          return fail("events: a value of the wrong type");
        }
        break;
      case kLatency: {
        if (c == 'n') {
          if (!literal("null", 4)) return false;
          ev.latency.push_back(0.0);
          ev.latency_valid.push_back(0);
          break;
        }
        if (c != '-' && !is_digit(c)) return fail("events: a value of the wrong type");
        Number n;
        if (!number(n)) return false;
        ev.latency.push_back(n.as_double());
        ev.latency_valid.push_back(1);
        break;
      }
      default:
        if (!value(depth)) return false;
    }
    return true;
  });
  if (!read) return false;
  if (!seen[kKind]) return fail("events: an event without a kind");
  if (!seen[kStep]) {
    ev.step.push_back(index);
    ev.step_valid.push_back(1);
  }
  for (auto [k, text] : {std::pair{kRole, &ev.role}, std::pair{kTool, &ev.tool},
                         std::pair{kInput, &ev.input}, std::pair{kOutput, &ev.output},
                         std::pair{kError, &ev.error}}) {
    if (!seen[k]) text->null();
  }
  if (!seen[kOk]) {
    ev.ok.push_back(0);
    ev.ok_valid.push_back(0);
  }
  if (!seen[kLatency]) {
    ev.latency.push_back(0.0);
    ev.latency_valid.push_back(0);
  }
  ev.line.push_back(index_);
  return true;
}

}  // namespace tb::traj
