#include "bleu_tokenize.hpp"

#include <array>
#include <cstdint>
#include <cstring>

#include "text/utf8.hpp"

namespace tb::text {
namespace {

using u8 = unsigned char;

// Character class of sacrebleu's first regex, r'([\{-\~\[-\` -\&\(-\+\:-\@\/])': the ASCII
// ranges { to ~, [ to `, space to &, ( to +, : to @, and '/'. Everything else (letters, digits,
// the apostrophe, ',', '-', '.', non-ASCII) is left alone.
constexpr std::array<bool, 256> make_punct_table() {
  std::array<bool, 256> t{};
  for (int c = '{'; c <= '~'; ++c) t[c] = true;
  for (int c = '['; c <= '`'; ++c) t[c] = true;
  for (int c = ' '; c <= '&'; ++c) t[c] = true;
  for (int c = '('; c <= '+'; ++c) t[c] = true;
  for (int c = ':'; c <= '@'; ++c) t[c] = true;
  t['/'] = true;
  return t;
}
constexpr std::array<bool, 256> kPunct = make_punct_table();

// ASCII members of Python's whitespace set: \t \n \v \f \r, 0x1C-0x1F, space.
constexpr std::array<bool, 256> make_ascii_space_table() {
  std::array<bool, 256> t{};
  for (int c = 0x09; c <= 0x0D; ++c) t[c] = true;
  for (int c = 0x1C; c <= 0x20; ++c) t[c] = true;
  return t;
}
constexpr std::array<bool, 256> kAsciiSpace = make_ascii_space_table();

inline bool is_digit(u8 c) { return c >= '0' && c <= '9'; }
inline bool is_dot_comma(u8 c) { return c == '.' || c == ','; }
inline u8 ascii_lower(u8 c) { return (c >= 'A' && c <= 'Z') ? static_cast<u8>(c + 32) : c; }

// Bytes of the Python-whitespace code point that ends at p[end - 1], or 0.
std::size_t space_before(const u8* p, std::size_t end) {
  if (end == 0) return 0;
  const u8 c = p[end - 1];
  if (c < 0x80) return kAsciiSpace[c] ? 1 : 0;
  if (end >= 2 && p[end - 2] == 0xC2 && (c == 0x85 || c == 0xA0)) return 2;
  if (end >= 3 && python_space_at(p, end - 3, end) == 3) return 3;
  return 0;
}

// Python's str.rstrip() / str.strip() on UTF-8.
std::string_view rstrip(std::string_view s) {
  const auto* p = reinterpret_cast<const u8*>(s.data());
  std::size_t end = s.size();
  for (std::size_t k; (k = space_before(p, end)) != 0;) end -= k;
  return s.substr(0, end);
}

std::string_view lstrip(std::string_view s) {
  const auto* p = reinterpret_cast<const u8*>(s.data());
  std::size_t i = 0;
  for (std::size_t k; i < s.size() && (k = python_space_at(p, i, s.size())) != 0;) i += k;
  return s.substr(i);
}

// Python's str.split(): maximal runs of non-whitespace code points.
void split_whitespace(const char* data, std::size_t n, std::vector<std::string_view>& tokens) {
  const auto* p = reinterpret_cast<const u8*>(data);
  std::size_t i = 0;
  while (i < n) {
    std::size_t k;
    while (i < n && (k = python_space_at(p, i, n)) != 0) i += k;
    if (i >= n) break;
    const std::size_t start = i;
    while (i < n) {
      const u8 c = p[i];
      if (c < 0x80) {
        if (kAsciiSpace[c]) break;
        ++i;
      } else if ((c == 0xC2 || c == 0xE1 || c == 0xE2 || c == 0xE3) && python_space_at(p, i, n)) {
        break;
      } else {
        ++i;
      }
    }
    tokens.emplace_back(data + start, i - start);
  }
}

// Python's `s.replace(pat, rep)` (left-to-right, non-overlapping) on a std::string.
void replace_all(std::string& s, std::string_view pat, std::string_view rep) {
  std::size_t pos = s.find(pat);
  if (pos == std::string::npos) return;
  std::string out;
  out.reserve(s.size());
  std::size_t from = 0;
  while (pos != std::string::npos) {
    out.append(s, from, pos - from);
    out.append(rep);
    from = pos + pat.size();
    pos = s.find(pat, from);
  }
  out.append(s, from, std::string::npos);
  s.swap(out);
}

// The four substitutions of sacrebleu's tokenizer_re.py, each a Python `re.sub`: the scan tries
// a match at each position, and after a match resumes right after it (the replacement is not
// rescanned). Every pattern is two characters long (or one, for the first), and every literal in
// them is ASCII. Working on UTF-8 bytes gives the same output as Python on code points because
//  - ASCII bytes never occur inside a multi-byte sequence, so literal classes ('.', ',', '-',
//    digits, the punctuation class) match exactly where Python matches them;
//  - `[^0-9]` followed by an ASCII literal (rule 2) can only match at the last byte of a
//    multi-byte character, which is where Python's match on that character ends too; the
//    earlier bytes of the character are copied unchanged, as Python copies the character;
//  - an ASCII literal followed by `[^0-9]` (rule 3) consumes only the first byte of a following
//    multi-byte character; its continuation bytes cannot start a match and are copied next,
//    exactly where Python would resume after the character.
// Each pass writes out the transformed bytes and returns their number.

// r'([\{-\~\[-\` -\&\(-\+\:-\@\/])' -> r' \1 '.
std::size_t pass_punct(const u8* in, std::size_t n, u8* out) {
  u8* o = out;
  for (std::size_t i = 0; i < n; ++i) {
    const u8 c = in[i];
    if (kPunct[c]) {
      o[0] = ' ';
      o[1] = c;
      o[2] = ' ';
      o += 3;
    } else {
      *o++ = c;
    }
  }
  return static_cast<std::size_t>(o - out);
}

// r'([^0-9])([\.,])' -> r'\1 \2 '.
std::size_t pass_period_after_nondigit(const u8* in, std::size_t n, u8* out) {
  u8* o = out;
  std::size_t i = 0;
  while (i < n) {
    if (i + 1 < n && is_dot_comma(in[i + 1]) && !is_digit(in[i])) {
      o[0] = in[i];
      o[1] = ' ';
      o[2] = in[i + 1];
      o[3] = ' ';
      o += 4;
      i += 2;
    } else {
      *o++ = in[i++];
    }
  }
  return static_cast<std::size_t>(o - out);
}

// r'([\.,])([^0-9])' -> r' \1 \2'.
std::size_t pass_period_before_nondigit(const u8* in, std::size_t n, u8* out) {
  u8* o = out;
  std::size_t i = 0;
  while (i < n) {
    if (i + 1 < n && is_dot_comma(in[i]) && !is_digit(in[i + 1])) {
      o[0] = ' ';
      o[1] = in[i];
      o[2] = ' ';
      o[3] = in[i + 1];
      o += 4;
      i += 2;
    } else {
      *o++ = in[i++];
    }
  }
  return static_cast<std::size_t>(o - out);
}

// r'([0-9])(-)' -> r'\1 \2 '.
std::size_t pass_dash_after_digit(const u8* in, std::size_t n, u8* out) {
  u8* o = out;
  std::size_t i = 0;
  while (i < n) {
    if (i + 1 < n && in[i + 1] == '-' && is_digit(in[i])) {
      o[0] = in[i];
      o[1] = ' ';
      o[2] = '-';
      o[3] = ' ';
      o += 4;
      i += 2;
    } else {
      *o++ = in[i++];
    }
  }
  return static_cast<std::size_t>(o - out);
}

// Runs the regex passes on `in` (n bytes) and returns the result, which lives in one of the
// scratch buffers (never in `in`'s buffer when that is one of them).
std::string_view regex_passes(const u8* in, std::size_t n, ByteBuffer& a, ByteBuffer& b) {
  bool dot_comma = false, dash = false;
  for (std::size_t i = 0; i < n; ++i) {
    dot_comma |= is_dot_comma(in[i]);
    dash |= in[i] == '-';
  }
  auto* x = reinterpret_cast<u8*>(a.reserve(3 * n));
  std::size_t m = pass_punct(in, n, x);
  if (dot_comma) {
    auto* y = reinterpret_cast<u8*>(b.reserve(2 * m));
    m = pass_period_after_nondigit(x, m, y);
    x = reinterpret_cast<u8*>(a.reserve(2 * m));
    m = pass_period_before_nondigit(y, m, x);
  }
  if (dash) {
    auto* y = reinterpret_cast<u8*>(b.reserve(2 * m));
    m = pass_dash_after_digit(x, m, y);
    x = y;
  }
  return {reinterpret_cast<const char*>(x), m};
}

// Byte classes for the whitespace split of the regex tokenizers: plain bytes, ASCII
// whitespace, bytes some regex rule acts on (the punctuation class, '.', ',', '-'), and lead
// bytes of multi-byte whitespace (0xC2, 0xE1, 0xE2, 0xE3), which need a closer look.
enum : u8 { kPlain = 0, kSpace = 1, kSpecial = 2, kMaybeSpace = 3 };
constexpr std::array<u8, 256> make_class_table() {
  std::array<u8, 256> t{};
  for (int c = 0; c < 256; ++c) {
    if (kPunct[c] || c == '.' || c == ',' || c == '-') t[c] = kSpecial;
  }
  for (int c = 0; c < 256; ++c) {
    if (kAsciiSpace[c]) t[c] = kSpace;
  }
  t[0xC2] = t[0xE1] = t[0xE2] = t[0xE3] = kMaybeSpace;
  return t;
}
constexpr std::array<u8, 256> kClass = make_class_table();

// The regex rules never act across whitespace in a way that depends on what lies beyond it:
// every match involves a special byte and at most one neighbour, any whitespace character
// behaves like ' ' in all four rules (non-digit, not special), rule 2 cannot consume a
// whitespace character as its second element, nor rules 3 and 4 use one as their first. So the
// passes can run on each whitespace-delimited chunk separately, with a ' ' standing in for the
// neighbouring whitespace (and no pad where the zh tokenizer's unpadded line begins or ends),
// and a chunk without special bytes is a single token as it stands.
void chunked_regex_tokens(std::string_view src, bool pad_edges, BleuTokenizerScratch& sc,
                          std::vector<std::string_view>& tokens) {
  // The passes only insert spaces, so the tokens of all chunks together hold at most
  // src.size() bytes: with that much reserved the arena never moves and views into it stay valid.
  std::string& arena = sc.arena;
  arena.clear();
  arena.reserve(src.size());
  const auto* p = reinterpret_cast<const u8*>(src.data());
  const std::size_t n = src.size();
  std::size_t i = 0;
  while (i < n) {
    std::size_t k = 0;
    while (i < n && (kClass[p[i]] == kSpace ||
                     (kClass[p[i]] == kMaybeSpace && (k = python_space_at(p, i, n)) != 0))) {
      i += kClass[p[i]] == kSpace ? 1 : k;
    }
    if (i >= n) break;
    const std::size_t start = i;
    std::size_t specials = 0, last_special = 0;
    while (i < n) {
      const u8 cls = kClass[p[i]];
      if (cls == kPlain) {
        ++i;
      } else if (cls == kSpecial) {
        ++specials;
        last_special = i;
        ++i;
      } else if (cls == kSpace || python_space_at(p, i, n)) {
        break;
      } else {
        ++i;
      }
    }
    const bool pad_left = pad_edges || start > 0, pad_right = pad_edges || i < n;
    if (specials == 0) {
      tokens.emplace_back(src.data() + start, i - start);
      continue;
    }
    // Common case "word." / "word,": a period or comma that ends a chunk (followed by a space)
    // after plain bytes is split off by rule 2 or, after a digit, by rule 3.
    if (specials == 1 && last_special == i - 1 && i - start >= 2 && pad_right &&
        is_dot_comma(p[last_special])) {
      tokens.emplace_back(src.data() + start, i - 1 - start);
      tokens.emplace_back(src.data() + i - 1, 1);
      continue;
    }
    std::string& chunk = sc.chunk;
    chunk.clear();
    if (pad_left) chunk.push_back(' ');
    chunk.append(src.data() + start, i - start);
    if (pad_right) chunk.push_back(' ');
    const std::string_view out =
        regex_passes(reinterpret_cast<const u8*>(chunk.data()), chunk.size(), sc.a, sc.b);
    // The output holds the chunk's bytes and inserted ASCII spaces only.
    for (std::size_t j = 0; j < out.size();) {
      while (j < out.size() && out[j] == ' ') ++j;
      const std::size_t b = j;
      while (j < out.size() && out[j] != ' ') ++j;
      if (j > b) {
        const char* at = arena.data() + arena.size();
        arena.append(out.data() + b, j - b);
        tokens.emplace_back(at, j - b);
      }
    }
  }
}

// Copies s into `work`, lowering ASCII letters if asked.
void copy_lower(std::string_view s, bool lower, std::string& work) {
  work.assign(s.data(), s.size());
  if (lower) {
    for (auto& ch : work) ch = static_cast<char>(ascii_lower(static_cast<u8>(ch)));
  }
}

bool has_upper_ascii(std::string_view s) {
  for (char ch : s) {
    if (ch >= 'A' && ch <= 'Z') return true;
  }
  return false;
}

// The language-independent part of sacrebleu's Tokenizer13a on an already rstripped segment,
// in its order, each step a full str.replace: '<skipped>' removed, '-\n' removed, '\n' -> ' ',
// then (if an '&' is left) &quot; &amp; &lt; &gt; in that order. Returns `s` itself when no step
// applies and no lowering is needed, else a view of sc.work. (The f' {line} ' padding is
// applied by chunked_regex_tokens.)
std::string_view prepare_13a(std::string_view s, bool lower, BleuTokenizerScratch& sc) {
  const bool steps = s.find('\n') != std::string_view::npos ||
                     s.find('<') != std::string_view::npos ||
                     s.find('&') != std::string_view::npos;
  if (!steps && !(lower && has_upper_ascii(s))) return s;
  std::string& w = sc.work;
  copy_lower(s, lower, w);
  if (steps) {
    replace_all(w, "<skipped>", "");
    replace_all(w, "-\n", "");
    for (auto& ch : w) {
      if (ch == '\n') ch = ' ';
    }
    if (w.find('&') != std::string::npos) {
      replace_all(w, "&quot;", "\"");
      replace_all(w, "&amp;", "&");
      replace_all(w, "&lt;", "<");
      replace_all(w, "&gt;", ">");
    }
  }
  return w;
}

// The first part of sacrebleu's TokenizerZh on an already rstripped segment: strip(), then a
// space on each side of every code point in its CJK ranges. (The regex rules follow, on the
// unpadded line, in chunked_regex_tokens.)
std::string_view prepare_zh(std::string_view s, bool lower, BleuTokenizerScratch& sc) {
  s = lstrip(s);
  std::string& w = sc.work;
  w.clear();
  w.reserve(s.size() + s.size() / 2 + 8);
  const auto* p = reinterpret_cast<const u8*>(s.data());
  const std::size_t n = s.size();
  for (std::size_t i = 0; i < n;) {
    const u8 c = p[i];
    if (c < 0x80) {
      w.push_back(static_cast<char>(lower ? ascii_lower(c) : c));
      ++i;
      continue;
    }
    std::uint32_t cp;
    const std::size_t len = decode_utf8(p + i, n - i, cp);
    const bool cjk = len == 3 && is_sacrebleu_chinese(cp);
    if (cjk) w.push_back(' ');
    w.append(s.data() + i, len);
    if (cjk) w.push_back(' ');
    i += len;
  }
  return w;
}

}  // namespace

std::size_t python_space_at(const unsigned char* p, std::size_t i, std::size_t n) {
  const u8 c = p[i];
  if (c < 0x80) return kAsciiSpace[c] ? 1 : 0;
  switch (c) {
    case 0xC2:  // U+0085, U+00A0
      return (i + 1 < n && (p[i + 1] == 0x85 || p[i + 1] == 0xA0)) ? 2 : 0;
    case 0xE1:  // U+1680
      return (i + 2 < n && p[i + 1] == 0x9A && p[i + 2] == 0x80) ? 3 : 0;
    case 0xE2: {  // U+2000-U+200A, U+2028, U+2029, U+202F, U+205F
      if (i + 2 >= n) return 0;
      const u8 b1 = p[i + 1], b2 = p[i + 2];
      if (b1 == 0x80 && (b2 <= 0x8A || b2 == 0xA8 || b2 == 0xA9 || b2 == 0xAF)) return 3;
      return (b1 == 0x81 && b2 == 0x9F) ? 3 : 0;
    }
    case 0xE3:  // U+3000
      return (i + 2 < n && p[i + 1] == 0x80 && p[i + 2] == 0x80) ? 3 : 0;
    default:
      return 0;
  }
}

bool is_sacrebleu_chinese(char32_t cp) {
  // The union of sacrebleu's _UCODE_RANGES as Python evaluates them (see the header).
  static constexpr char32_t kRanges[][2] = {
      {0x2001, 0x2A6D}, {0x2E80, 0x2FDF}, {0x2FF0, 0x303F}, {0x3100, 0x312F}, {0x31A0, 0x31EF},
      {0x3200, 0x4DB5}, {0x4E00, 0x9FBB}, {0xF900, 0xFA2D}, {0xFA30, 0xFA6A}, {0xFA70, 0xFAD9},
      {0xFE10, 0xFE1F}, {0xFE30, 0xFE4F}, {0xFF00, 0xFFEF},
  };
  if (cp < 0x2001 || cp > 0xFFEF) return false;
  for (const auto& r : kRanges) {
    if (cp < r[0]) return false;
    if (cp <= r[1]) return true;
  }
  return false;
}

void bleu_tokenize(std::string_view text, BleuTokenizer tokenizer, bool lowercase_ascii,
                   BleuTokenizerScratch& scratch, std::vector<std::string_view>& tokens) {
  tokens.clear();
  const std::string_view s = rstrip(text);
  switch (tokenizer) {
    case BleuTokenizer::k13a:
      chunked_regex_tokens(prepare_13a(s, lowercase_ascii, scratch), true, scratch, tokens);
      return;
    case BleuTokenizer::kZh:
      chunked_regex_tokens(prepare_zh(s, lowercase_ascii, scratch), false, scratch, tokens);
      return;
    case BleuTokenizer::kNone: {
      if (lowercase_ascii && has_upper_ascii(s)) {
        copy_lower(s, true, scratch.work);
        split_whitespace(scratch.work.data(), scratch.work.size(), tokens);
      } else {
        split_whitespace(s.data(), s.size(), tokens);
      }
      return;
    }
    case BleuTokenizer::kChar: {
      std::string_view t = s;
      if (lowercase_ascii && has_upper_ascii(s)) {
        copy_lower(s, true, scratch.work);
        t = scratch.work;
      }
      const auto* p = reinterpret_cast<const u8*>(t.data());
      for (std::size_t i = 0; i < t.size();) {
        const std::size_t k = python_space_at(p, i, t.size());
        if (k) {
          i += k;
          continue;
        }
        std::uint32_t cp;
        const std::size_t len = decode_utf8(p + i, t.size() - i, cp);
        tokens.emplace_back(t.data() + i, len);
        i += len;
      }
      return;
    }
  }
}

std::string bleu_tokenized_string(std::string_view text, BleuTokenizer tokenizer,
                                  bool lowercase_ascii) {
  BleuTokenizerScratch scratch;
  std::vector<std::string_view> tokens;
  bleu_tokenize(text, tokenizer, lowercase_ascii, scratch, tokens);
  std::string out;
  for (std::size_t i = 0; i < tokens.size(); ++i) {
    if (i) out.push_back(' ');
    out.append(tokens[i].data(), tokens[i].size());
  }
  return out;
}

}  // namespace tb::text
