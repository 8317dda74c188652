// Tokenizers behind tumorboard's text metrics (the Porter stemmer is in porter.hpp).
//
// * kRouge reproduces rouge-score's default tokenizer (rouge_score/tokenize.py): Python
//   str.lower(), every run of characters outside [a-z0-9] becomes a separator, and with a stemmer
//   tokens longer than 3 characters are Porter-stemmed. After str.lower() only two non-ASCII code
//   points contain ASCII letters or digits (found by an exhaustive scan of all code points):
//   U+0130 (lowercases to "i" + U+0307, so it yields "i" and ends the token) and U+212A KELVIN SIGN
//   (lowercases to "k").
// * kUnicode expects text that is already NFKC-normalized and lowercased (the Python wrapper does
//   that). Letters and numbers (general categories L*, N*) of scripts written with spaces form
//   words; each letter or number of a script written without spaces (Han, Hiragana, Katakana,
//   Hangul, Bopomofo, Yi, Thai, Lao, Khmer, Myanmar, Tai scripts, Tangut, Nushu, ...) is a token
//   of its own; combining marks (M*) join the token before them (and are dropped without one);
//   everything else separates tokens.
// * kWhitespace is Python's str.split(): tokens are the runs between str.isspace() characters.
//
// Every token records the line it came from (lines are split on "\n", as rouge-score does for
// ROUGE-Lsum) and a 64-bit hash of its bytes. Comparisons of tokens always confirm the bytes, so
// hash collisions never change a result.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <deque>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "text/porter.hpp"

namespace tb::text {

// A UTF-8 view of one input text (owned by the caller).
struct Utf8 {
  const char* data;
  std::size_t size;
};

enum class TokenizerKind { kRouge, kUnicode, kWhitespace };

enum class Stemmer { kNone, kPorterNltk, kPorterOriginal };

namespace detail {
inline std::uint64_t load_le(const char* p, std::size_t n) {
  std::uint64_t v = 0;
  std::memcpy(&v, p, n);
  return v;
}
}  // namespace detail

// Fast 64-bit hash of a byte string (not persisted anywhere; only used to bucket tokens).
inline std::uint64_t hash_bytes(const char* data, std::size_t size) {
  // wyhash-style: 128-bit multiply-fold of 8-byte words, mixing all bits of the result.
  auto mum = [](std::uint64_t a, std::uint64_t b) {
    const unsigned __int128 m = static_cast<unsigned __int128>(a) * b;
    return static_cast<std::uint64_t>(m) ^ static_cast<std::uint64_t>(m >> 64);
  };
  constexpr std::uint64_t k0 = 0xA0761D6478BD642Full, k1 = 0xE7037ED1A0B428DBull,
                          k2 = 0x8EBC6AF09C88C6E3ull;
  std::uint64_t h = k0 ^ size;
  std::size_t i = 0;
  for (; i + 16 <= size; i += 16) {
    h = mum(detail::load_le(data + i, 8) ^ k1, detail::load_le(data + i + 8, 8) ^ h);
  }
  // The last 0..15 bytes as two words, with overlapping fixed-size loads (no memcpy calls).
  const unsigned char* p = reinterpret_cast<const unsigned char*>(data) + i;
  const std::size_t rest = size - i;
  std::uint64_t a = 0, b = 0;
  if (rest > 8) {
    a = detail::load_le(data + i, 8);
    b = detail::load_le(data + size - 8, 8);
  } else if (rest >= 4) {
    a = (detail::load_le(data + i, 4) << 32) | detail::load_le(data + size - 4, 4);
  } else if (rest > 0) {
    a = (static_cast<std::uint64_t>(p[0]) << 16) | (static_cast<std::uint64_t>(p[rest >> 1]) << 8) |
        p[rest - 1];
  }
  return mum(mum(a ^ k1, b ^ h) ^ k2, size ^ k1);
}

// Flags of a code point (see unicode_table.hpp): 1 letter/number, 2 mark, 4 no-space script,
// 8 Python word character, 16 Python whitespace.
std::uint8_t char_flags(std::uint32_t cp);
const char* unicode_version();

struct Token {
  std::uint64_t hash;
  const char* data;
  std::uint32_t size;
  std::uint32_t line;
};

inline bool same_token(const Token& a, const Token& b) {
  return a.hash == b.hash && a.size == b.size &&
         (a.size == 0 || std::char_traits<char>::compare(a.data, b.data, a.size) == 0);
}

// The tokens of a batch of texts. Tokens of text i are tokens(i)[0 .. size(i)).
class TokenizedTexts {
 public:
  // Storage of one tokenizing worker.
  struct Arena {
    std::string chars;               // lowercased copies
    std::deque<std::string> stems;   // stem cache values (never move)
    std::vector<Token> tokens;
    std::vector<std::uint32_t> fixups;  // tokens whose data is still an offset into chars
  };

  std::size_t n_texts() const { return begin_.size(); }
  const Token* tokens(std::size_t i) const { return begin_[i]; }
  std::size_t size(std::size_t i) const { return count_[i]; }
  std::size_t total_tokens() const;

 private:
  friend TokenizedTexts tokenize_texts(const std::vector<Utf8>&, TokenizerKind, Stemmer, int);
  std::vector<std::unique_ptr<Arena>> arenas_;
  std::vector<const Token*> begin_;
  std::vector<std::uint32_t> count_;
};

// Tokenizes all texts on up to `threads` threads (0 = all cores); stems are cached per worker.
TokenizedTexts tokenize_texts(const std::vector<Utf8>& texts, TokenizerKind kind,
                              Stemmer stemmer, int threads);

// SQuAD v1.1/v2.0 normalize_answer on text that is already lowercased (Python str.lower()):
// drops string.punctuation, replaces the words a/an/the (maximal runs of Python regex word
// characters) by a space, and splits on whitespace. The tokens in `out` view `buffer`.
void squad_tokens(const char* data, std::size_t size, std::string& buffer,
                  std::vector<std::string_view>& out);

// Python's str.split(): the runs between str.isspace() characters, as views into the text.
void whitespace_split(const char* data, std::size_t size, std::vector<std::string_view>& out);

}  // namespace tb::text
