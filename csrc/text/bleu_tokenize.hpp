// sacrebleu's BLEU tokenizers on UTF-8 text, byte for byte.
//
// sacrebleu (Post 2018, "A Call for Clarity in Reporting BLEU Scores", v2.x) preprocesses every
// segment as `tokenizer(segment.rstrip())` (after an optional `str.lower()`) and then splits the
// result with `str.split()`. This file reproduces that pipeline for the tokenizers
//   "13a"  (mteval-v13a: `<skipped>` removal, "-\n" joining, newline -> space, the four HTML
//           entities, then the four regular expressions of sacrebleu's tokenizer_re.py),
//   "zh"   (spaces around every code point in sacrebleu's CJK ranges, then the same regexes),
//   "char" (every non-whitespace code point is a token),
//   "none" (whitespace split only).
// All patterns are ASCII, so they are applied to the UTF-8 bytes; multi-byte characters behave
// exactly like the single code points Python's `re` sees (argued per rule in bleu_tokenize.cpp).
// Whitespace is Python's `str.isspace()` set (29 code points, including U+0085, U+00A0, U+1680,
// U+2000-U+200A, U+2028, U+2029, U+202F, U+205F, U+3000 and the ASCII separators 0x1C-0x1F).
//
// Lowercasing: only ASCII letters are lowered here; text with non-ASCII characters must already
// have been lowered with Python's `str.lower()` by the caller (the bindings do that), which keeps
// Unicode special cases (final sigma, dotted I, ...) exactly as sacrebleu has them.
#pragma once

#include <cstddef>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace tb::text {

enum class BleuTokenizer : int { kNone = 0, k13a = 1, kZh = 2, kChar = 3 };

// Number of bytes of the Python-whitespace code point starting at p[i] (0 if it is none).
std::size_t python_space_at(const unsigned char* p, std::size_t i, std::size_t n);

// True if code point `cp` is in the ranges sacrebleu's zh tokenizer isolates. Note that
// sacrebleu writes two of its ranges as '\u20000'..'\u2a6d6' and '\u2f800'..'\u2fa1d', which
// Python reads as two-character strings; its string comparison then selects U+2001..U+2A6D and
// U+2F81..U+2FA1 (and no astral-plane character). We reproduce that actual behaviour.
bool is_sacrebleu_chinese(char32_t cp);

// A growable byte buffer that does not zero-fill (the passes write every byte they keep).
class ByteBuffer {
 public:
  char* reserve(std::size_t n) {
    if (n > cap_) {
      cap_ = n < 64 ? 64 : n + n / 2;
      data_.reset(new char[cap_]);
    }
    return data_.get();
  }
  char* data() { return data_.get(); }

 private:
  std::unique_ptr<char[]> data_;
  std::size_t cap_ = 0;
};

// Scratch memory for bleu_tokenize; token views point into it (or into the input text), so a
// scratch must outlive the use of the tokens it produced.
struct BleuTokenizerScratch {
  ByteBuffer a, b;
  std::string work, chunk, arena;
};

// Appends the tokens of `text` to `tokens` (cleared first), exactly as sacrebleu's
// `BLEU._preprocess_segment(text).split()` with the given tokenizer.
void bleu_tokenize(std::string_view text, BleuTokenizer tokenizer, bool lowercase_ascii,
                   BleuTokenizerScratch& scratch, std::vector<std::string_view>& tokens);

// The normalized segment: the tokens joined by single spaces (sacrebleu's tokenizer output).
std::string bleu_tokenized_string(std::string_view text, BleuTokenizer tokenizer,
                                  bool lowercase_ascii);

}  // namespace tb::text
