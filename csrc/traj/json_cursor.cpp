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
    const bool object = c == '{';
    std::vector<std::pair<std::string, std::string>> items;  // (key, text); arrays: no key
    const bool read =
        object ? members(depth + 1,
                         [&](std::string_view key) {
                           std::string name(key);  // (the view ends with the next key read)
                           std::string text;
                           if (!canonical(text, depth + 1)) return false;
                           const auto same =
                               std::find_if(items.begin(), items.end(),
                                            [&](const auto& m) { return m.first == name; });
                           if (same != items.end()) {
                             same->second = std::move(text);  // a dict keeps a key's last value
                           } else {
                             items.emplace_back(std::move(name), std::move(text));
                           }
                           return true;
                         })
               : elements(depth + 1, [&] {
                   std::string text;
                   if (!canonical(text, depth + 1)) return false;
                   items.emplace_back(std::string(), std::move(text));
                   return true;
                 });
    if (!read) return false;
    if (object) {
      std::sort(items.begin(), items.end(),
                [](const auto& x, const auto& y) { return x.first < y.first; });
    }
    out.push_back(static_cast<char>(c));
    for (std::size_t k = 0; k < items.size(); ++k) {
      if (k > 0) out += ", ";
      if (object) {
        append_json_string(items[k].first, out);
        out += ": ";
      }
      out += items[k].second;
    }
    out.push_back(object ? '}' : ']');
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
