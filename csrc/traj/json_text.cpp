#include "traj/json_text.hpp"

#include <charconv>
#include <cstdint>
#include <cstring>
#include <cstdlib>

namespace tb::traj {

void append_json_string(std::string_view s, std::string& out) {
  static constexpr char kHex[] = "0123456789abcdef";
  out.push_back('"');
  std::size_t run = 0;  // start of the characters copied as they are
  for (std::size_t i = 0; i < s.size(); ++i) {
    const auto c = static_cast<unsigned char>(s[i]);
    if (c >= 0x20 && c != '"' && c != '\\') continue;
    out.append(s.data() + run, i - run);
    run = i + 1;
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\b': out += "\\b"; break;
      case '\f': out += "\\f"; break;
      case '\n': out += "\\n"; break;
      case '\r': out += "\\r"; break;
      case '\t': out += "\\t"; break;
      default: {
        const char esc[6] = {'\\', 'u', '0', '0', kHex[c >> 4], kHex[c & 15]};
        out.append(esc, 6);
      }
    }
  }
  out.append(s.data() + run, s.size() - run);
  out.push_back('"');
}

void append_float_repr(double d, std::string& out) {
  // the shortest round-trip digits and the exponent, from the scientific form d.ddde[+-]XX
  char buf[64];
  const auto r = std::to_chars(buf, buf + sizeof buf, d, std::chars_format::scientific);
  std::string_view text(buf, static_cast<std::size_t>(r.ptr - buf));
  if (!text.empty() && text.front() == '-') {
    out.push_back('-');
    text.remove_prefix(1);
  }
  const std::size_t e = text.find('e');
  std::string digits;
  for (const char ch : text.substr(0, e)) {
    if (ch != '.') digits.push_back(ch);
  }
  const int exp10 = std::atoi(std::string(text.substr(e + 1)).c_str());
  while (digits.size() > 1 && digits.back() == '0') digits.pop_back();
  const int decpt = exp10 + 1;  // value = 0.DIGITS x 10^decpt
  const auto n = static_cast<int>(digits.size());
  if (decpt <= -4 || decpt > 16) {
    out.push_back(digits[0]);
    if (n > 1) {
      out.push_back('.');
      out.append(digits, 1, std::string::npos);
    }
    out.push_back('e');
    out.push_back(exp10 < 0 ? '-' : '+');
    const int mag = exp10 < 0 ? -exp10 : exp10;
    if (mag < 10) out.push_back('0');
    out += std::to_string(mag);
  } else if (decpt <= 0) {
    out += "0.";
    out.append(static_cast<std::size_t>(-decpt), '0');
    out += digits;
  } else if (decpt >= n) {
    out += digits;
    out.append(static_cast<std::size_t>(decpt - n), '0');
    out += ".0";
  } else {
    out.append(digits, 0, static_cast<std::size_t>(decpt));
    out.push_back('.');
    out.append(digits, static_cast<std::size_t>(decpt), std::string::npos);
  }
}

namespace {

// json.loads' grammar, permissive where Python is (see python_json_accepts).
class Permissive {
 public:
  Permissive(std::string_view text, int max_depth)
      : p_(reinterpret_cast<const unsigned char*>(text.data())), e_(p_ + text.size()),
        max_depth_(max_depth) {}

  int run() {
    space();
    if (!value(0)) return deep_ ? -1 : 0;
    space();
    return p_ == e_ ? 1 : 0;
  }

 private:
  static bool digit(unsigned char c) { return c >= '0' && c <= '9'; }
  static bool hex(unsigned char c) {
    return digit(c) || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F');
  }

  void space() {
    while (p_ < e_ && (*p_ == ' ' || *p_ == '\t' || *p_ == '\n' || *p_ == '\r')) ++p_;
  }

  bool word(const char* w) {
    const std::size_t n = std::strlen(w);
    if (static_cast<std::size_t>(e_ - p_) < n || std::memcmp(p_, w, n) != 0) return false;
    p_ += n;
    return true;
  }

  bool string() {
    ++p_;
    while (p_ < e_) {
      const unsigned char c = *p_++;
      if (c == '"') return true;
      if (c < 0x20) return false;
      if (c != '\\') continue;
      if (p_ >= e_) return false;
      const unsigned char esc = *p_++;
      if (esc == 'u') {
        if (e_ - p_ < 4 || !hex(p_[0]) || !hex(p_[1]) || !hex(p_[2]) || !hex(p_[3])) return false;
        p_ += 4;
      } else if (std::strchr("\"\\/bfnrt", esc) == nullptr || esc == 0) {
        return false;
      }
    }
    return false;
  }

  bool number() {
    if (*p_ == '-') ++p_;
    if (p_ < e_ && *p_ == 'I') return word("Infinity");
    if (p_ >= e_ || !digit(*p_)) return false;
    if (*p_ == '0') {
      ++p_;
    } else {
      while (p_ < e_ && digit(*p_)) ++p_;
    }
    if (p_ + 1 < e_ && *p_ == '.' && digit(p_[1])) {
      p_ += 2;
      while (p_ < e_ && digit(*p_)) ++p_;
    }
    if (p_ < e_ && (*p_ == 'e' || *p_ == 'E')) {
      const unsigned char* q = p_ + 1;
      if (q < e_ && (*q == '+' || *q == '-')) ++q;
      if (q < e_ && digit(*q)) {  // else the number ends before the 'e' (then extra data)
        while (q < e_ && digit(*q)) ++q;
        p_ = q;
      }
    }
    return true;
  }

  bool container(int depth, unsigned char close, bool object) {
    if (depth + 1 > max_depth_) {
      deep_ = true;
      return false;
    }
    ++p_;
    space();
    if (p_ < e_ && *p_ == close) {
      ++p_;
      return true;
    }
    for (;;) {
      space();
      if (object) {
        if (p_ >= e_ || *p_ != '"' || !string()) return false;
        space();
        if (p_ >= e_ || *p_ != ':') return false;
        ++p_;
        space();
      }
      if (!value(depth + 1)) return false;
      space();
      if (p_ >= e_) return false;
      if (*p_ == close) {
        ++p_;
        return true;
      }
      if (*p_ != ',') return false;
      ++p_;
    }
  }

  bool value(int depth) {
    if (p_ >= e_) return false;
    switch (*p_) {
      case '{': return container(depth, '}', true);
      case '[': return container(depth, ']', false);
      case '"': return string();
      case 't': return word("true");
      case 'f': return word("false");
      case 'n': return word("null");
      case 'N': return word("NaN");
      case 'I': return word("Infinity");
      default: return (*p_ == '-' || digit(*p_)) && number();
    }
  }

  const unsigned char* p_;
  const unsigned char* e_;
  const int max_depth_;
  bool deep_ = false;
};

}  // namespace

int python_json_accepts(std::string_view text, int max_depth) {
  return Permissive(text, max_depth).run();
}

}  // namespace tb::traj
