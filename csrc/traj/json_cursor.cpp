// JSON grammar: RFC 8259 §2-§7, as Python's json module (CPython Modules/_json.c, strict mode)
// reads it; the checks of tumorboard._json.load_json on top.
#include "traj/json_cursor.hpp"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstring>
#include <system_error>
#include <utility>
#include <vector>

#include "traj/json_text.hpp"

namespace tb::traj {

// A value at p_ as tumorboard._json.json_text writes it (json.dumps with ensure_ascii=False
// and sort_keys=True): members of an object sorted by key, a repeated key's last value, ", "
// and ": " between, strings escaped as json.dumps escapes them, floats as repr() writes them.
bool JsonCursor::canonical(std::string& out, int depth) {
  if (p_ >= e_) return fail("not JSON (a value is missing)");
  const std::uint8_t c = *p_;
  if (c == '{' || c == '[') {
    if (depth + 1 > max_depth_) return fail("JSON nested too deep");
    const bool object = c == '{';
    const std::uint8_t close = object ? '}' : ']';
    ++p_;
    space();
    std::vector<std::pair<std::string, std::string>> members;  // (key, text); arrays: no key
    if (p_ < e_ && *p_ == close) {
      ++p_;
    } else {
      for (;;) {
        space();
        std::string key;
        if (object) {
          if (p_ >= e_ || *p_ != '"') return fail("not JSON (expected a key)");
          if (!string(&key)) return false;
          space();
          if (p_ >= e_ || *p_ != ':') return fail("not JSON (expected ':')");
          ++p_;
          space();
        }
        std::string text;
        if (!canonical(text, depth + 1)) return false;
        auto same = object ? std::find_if(members.begin(), members.end(),
                                          [&](const auto& m) { return m.first == key; })
                           : members.end();
        if (same != members.end()) {
          same->second = std::move(text);  // a dict keeps a repeated key's last value
        } else {
          members.emplace_back(std::move(key), std::move(text));
        }
        space();
        if (p_ >= e_) return fail("not JSON (an unterminated container)");
        if (*p_ == close) {
          ++p_;
          break;
        }
        if (*p_ != ',') return fail("not JSON (expected ',')");
        ++p_;
      }
    }
    if (object) {
      std::sort(members.begin(), members.end(),
                [](const auto& a, const auto& b) { return a.first < b.first; });
    }
    out.push_back(static_cast<char>(c));
    for (std::size_t k = 0; k < members.size(); ++k) {
      if (k > 0) out += ", ";
      if (object) {
        append_json_string(members[k].first, out);
        out += ": ";
      }
      out += members[k].second;
    }
    out.push_back(static_cast<char>(close));
    return true;
  }
  switch (c) {
    case '"': {
      std::string text;
      if (!string(&text)) return false;
      append_json_string(text, out);
      return true;
    }
    case 't':
      out += "true";
      return literal("true", 4);
    case 'f':
      out += "false";
      return literal("false", 5);
    case 'n':
      out += "null";
      return literal("null", 4);
    default: {
      if (c != '-' && !is_digit(c)) return fail("not JSON (an invalid value)");
      Number n;
      if (!number(n)) return false;
      if (n.integer) {
        char text[24];
        const auto r = std::to_chars(text, text + sizeof text, n.i);
        out.append(text, r.ptr);
      } else {
        append_float_repr(n.d, out);
      }
      return true;
    }
  }
}

}  // namespace tb::traj
