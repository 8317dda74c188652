#include "text/rouge_tokenize.hpp"

#include <algorithm>
#include <array>
#include <atomic>
#include <cstring>

#include "common/parallel.hpp"
#include "text/porter.hpp"
#include "text/unicode_table.hpp"
#include "text/utf8.hpp"

namespace tb::text {

// ------------------------------------------------------------------------------ unicode flags

std::uint8_t char_flags(std::uint32_t cp) {
  if (cp < 0x80) {
    const auto c = static_cast<char>(cp);
    std::uint8_t f = 0;
    if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9')) f |= 1 | 8;
    if (c == '_') f |= 8;
    if (c == ' ' || (cp >= 0x09 && cp <= 0x0D) || (cp >= 0x1C && cp <= 0x1F)) f |= 16;
    return f;
  }
  const auto* first = std::begin(unicode_data::kRanges);
  const auto* last = std::end(unicode_data::kRanges);
  const auto* it = std::upper_bound(
      first, last, cp, [](std::uint32_t v, const unicode_data::Range& r) { return v < r.first; });
  if (it == first) return 0;
  --it;
  return cp <= it->last ? it->flags : 0;
}

const char* unicode_version() { return unicode_data::kVersion; }

// ------------------------------------------------------------------------------ tokenization

namespace {

// Open-addressing string set with arena storage: maps a string to a dense id.
class StringPool {
 public:
  StringPool() : slots_(64, 0) {}

  // Returns the id of s, inserting it when new (then *inserted = true).
  std::uint32_t intern(const char* s, std::uint32_t n, std::uint64_t h, bool* inserted) {
    if ((size() + 1) * 2 > slots_.size()) grow();
    const std::size_t mask = slots_.size() - 1;
    for (std::size_t i = h & mask;; i = (i + 1) & mask) {
      const std::uint32_t slot = slots_[i];
      if (slot == 0) {
        const auto id = static_cast<std::uint32_t>(off_.size());
        off_.push_back(chars_.size());
        len_.push_back(n);
        hash_.push_back(h);
        chars_.append(s, n);
        slots_[i] = id + 1;
        *inserted = true;
        return id;
      }
      const std::uint32_t id = slot - 1;
      if (hash_[id] == h && len_[id] == n && std::memcmp(chars_.data() + off_[id], s, n) == 0) {
        *inserted = false;
        return id;
      }
    }
  }

  std::size_t size() const { return off_.size(); }

 private:
  void grow() {
    std::vector<std::uint32_t> slots(slots_.size() * 2, 0);
    const std::size_t mask = slots.size() - 1;
    for (std::size_t id = 0; id < off_.size(); ++id) {
      std::size_t i = hash_[id] & mask;
      while (slots[i] != 0) i = (i + 1) & mask;
      slots[i] = static_cast<std::uint32_t>(id + 1);
    }
    slots_.swap(slots);
  }

  std::string chars_;
  std::vector<std::size_t> off_;
  std::vector<std::uint32_t> len_;
  std::vector<std::uint64_t> hash_;
  std::vector<std::uint32_t> slots_;
};

// Per-worker state: the arena receiving tokens and a cache of stems by raw token. Tokens that are
// substrings of the input point into it; others (lowercased, stemmed) point into the arena.
class Worker {
 public:
  Worker(TokenizerKind kind, Stemmer stemmer, TokenizedTexts::Arena* arena)
      : kind_(kind),
        stemmer_(stemmer),
        porter_mode_(stemmer == Stemmer::kPorterOriginal ? PorterMode::kOriginal
                                                         : PorterMode::kNltk),
        arena_(arena) {}

  // Appends the tokens of one text; returns how many.
  std::uint32_t run(const Utf8& text) {
    const std::size_t before = arena_->tokens.size();
    line_ = 0;
    switch (kind_) {
      case TokenizerKind::kRouge:
        rouge(text);
        break;
      case TokenizerKind::kUnicode:
        unicode(text);
        break;
      case TokenizerKind::kWhitespace:
        whitespace(text);
        break;
    }
    return static_cast<std::uint32_t>(arena_->tokens.size() - before);
  }

  // The arena no longer grows: turns arena offsets into pointers.
  void finish() {
    for (auto k : arena_->fixups) {
      Token& t = arena_->tokens[k];
      t.data = arena_->chars.data() + reinterpret_cast<std::uintptr_t>(t.data);
    }
    arena_->fixups.clear();
  }

 private:
  // Emits the token s[0..n) whose bytes live in stable memory (input text or stem cache).
  void emit_stable(const char* s, std::size_t n) {
    if (n == 0) return;
    if (stemmer_ != Stemmer::kNone && n > 3 && ascii_alnum(s, n)) {
      const Token& st = stem_of(s, n, hash_bytes(s, n));
      arena_->tokens.push_back({st.hash, st.data, st.size, line_});
      return;
    }
    arena_->tokens.push_back({hash_bytes(s, n), s, static_cast<std::uint32_t>(n), line_});
  }

  // Emits a token built in cur_ (copied into the arena unless stemmed).
  void emit_built() {
    const std::size_t n = cur_.size();
    if (n == 0) return;
    if (stemmer_ != Stemmer::kNone && n > 3 && ascii_alnum(cur_.data(), n)) {
      emit_stable(cur_.data(), n);  // the stem lives in the cache
    } else {
      auto& a = *arena_;
      a.fixups.push_back(static_cast<std::uint32_t>(a.tokens.size()));
      const auto offset = static_cast<std::uintptr_t>(a.chars.size());
      a.tokens.push_back({hash_bytes(cur_.data(), n), reinterpret_cast<const char*>(offset),
                          static_cast<std::uint32_t>(n), line_});
      a.chars.append(cur_);
    }
    cur_.clear();
  }

  const Token& stem_of(const char* s, std::size_t n, std::uint64_t h) {
    bool inserted = false;
    const std::uint32_t id = raw_.intern(s, static_cast<std::uint32_t>(n), h, &inserted);
    if (inserted) {
      arena_->stems.push_back(porter_stem(std::string_view(s, n), porter_mode_));
      const std::string& st = arena_->stems.back();
      stem_tokens_.push_back({hash_bytes(st.data(), st.size()), st.data(),
                              static_cast<std::uint32_t>(st.size()), 0});
    }
    return stem_tokens_[id];
  }

  static bool ascii_alnum(const char* s, std::size_t n) {
    for (std::size_t i = 0; i < n; ++i) {
      const char c = s[i];
      if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9'))) return false;
    }
    return true;
  }

  // Byte classes of the rouge tokenizer.
  enum : std::uint8_t { kSep = 0, kKeep = 1, kUpper = 2, kLead = 3, kNewline = 4 };

  static const std::uint8_t* rouge_classes() {
    static const auto table = [] {
      std::array<std::uint8_t, 256> t{};
      for (int c = 'a'; c <= 'z'; ++c) t[c] = kKeep;
      for (int c = '0'; c <= '9'; ++c) t[c] = kKeep;
      for (int c = 'A'; c <= 'Z'; ++c) t[c] = kUpper;
      t[0xC4] = kLead;
      t[0xE2] = kLead;
      t['\n'] = kNewline;
      return t;
    }();
    return table.data();
  }

  // Length of the special sequence at p[i] that lowercases to an ASCII letter (0 if none):
  // U+0130 -> "i" + U+0307 (ends the token), U+212A -> "k".
  static std::size_t special(const unsigned char* p, std::size_t i, std::size_t n, char* out) {
    if (p[i] == 0xC4 && i + 1 < n && p[i + 1] == 0xB0) {
      *out = 'i';
      return 2;
    }
    if (p[i] == 0xE2 && i + 2 < n && p[i + 1] == 0x84 && p[i + 2] == 0xAA) {
      *out = 'k';
      return 3;
    }
    return 0;
  }

  void rouge(const Utf8& text) {
    const std::uint8_t* cls = rouge_classes();
    const auto* p = reinterpret_cast<const unsigned char*>(text.data);
    const std::size_t n = text.size;
    std::size_t i = 0;
    while (i < n) {
      const std::uint8_t c = cls[p[i]];
      if (c == kKeep) {
        // Fast path: a run of [a-z0-9] that is a substring of the input.
        const std::size_t start = i;
        while (i < n && cls[p[i]] == kKeep) ++i;
        if (i == n || cls[p[i]] == kSep || cls[p[i]] == kNewline ||
            (cls[p[i]] == kLead && !special_here(p, i, n))) {
          emit_stable(text.data + start, i - start);
          continue;
        }
        cur_.assign(text.data + start, i - start);
        i = slow_token(p, i, n, cls);
      } else if (c == kUpper || (c == kLead && special_here(p, i, n))) {
        cur_.clear();
        i = slow_token(p, i, n, cls);
      } else {
        if (c == kNewline) ++line_;
        ++i;
      }
    }
  }

  static bool special_here(const unsigned char* p, std::size_t i, std::size_t n) {
    char ch;
    return special(p, i, n, &ch) != 0;
  }

  // Continues the token in cur_ from p[i], lowercasing; returns the index after it.
  std::size_t slow_token(const unsigned char* p, std::size_t i, std::size_t n,
                         const std::uint8_t* cls) {
    while (i < n) {
      const std::uint8_t c = cls[p[i]];
      if (c == kKeep) {
        cur_ += static_cast<char>(p[i++]);
      } else if (c == kUpper) {
        cur_ += static_cast<char>(p[i++] + 32);
      } else if (c == kLead) {
        char ch;
        const std::size_t len = special(p, i, n, &ch);
        if (len == 0) break;
        cur_ += ch;
        i += len;
        if (ch == 'i') break;  // U+0307 follows the 'i' and separates
      } else {
        break;
      }
    }
    emit_built();
    return i;
  }

  void unicode(const Utf8& text) {
    enum { kNone, kWord, kSplit } state = kNone;
    const auto* p = reinterpret_cast<const unsigned char*>(text.data);
    const std::size_t n = text.size;
    std::size_t start = 0;
    auto finish = [&](std::size_t end) {
      if (state != kNone) emit_stable(text.data + start, end - start);
      state = kNone;
    };
    for (std::size_t i = 0; i < n;) {
      std::uint32_t cp;
      const std::size_t len = decode_utf8(p + i, n - i, cp);
      const std::uint8_t f = cp == kInvalidCodePoint ? 0 : char_flags(cp);
      if (f & 1) {
        if ((f & 4) || state != kWord) {
          finish(i);
          start = i;
          state = (f & 4) ? kSplit : kWord;
        }
      } else if (f & 2) {
        // A mark extends the current token; one without a token is dropped.
      } else {
        finish(i);
        if (cp == '\n') ++line_;
      }
      i += len;
    }
    finish(n);
  }

  void whitespace(const Utf8& text) {
    const auto* p = reinterpret_cast<const unsigned char*>(text.data);
    const std::size_t n = text.size;
    std::size_t start = 0;
    bool in_token = false;
    for (std::size_t i = 0; i < n;) {
      std::uint32_t cp;
      std::size_t len = 1;
      bool space;
      if (p[i] < 0x80) {
        cp = p[i];
        space = cp == ' ' || (cp >= 0x09 && cp <= 0x0D) || (cp >= 0x1C && cp <= 0x1F);
      } else {
        len = decode_utf8(p + i, n - i, cp);
        space = cp != kInvalidCodePoint && (char_flags(cp) & 16);
      }
      if (space) {
        if (in_token) emit_stable(text.data + start, i - start);
        in_token = false;
        if (cp == '\n') ++line_;
      } else if (!in_token) {
        start = i;
        in_token = true;
      }
      i += len;
    }
    if (in_token) emit_stable(text.data + start, n - start);
  }

  TokenizerKind kind_;
  Stemmer stemmer_;
  PorterMode porter_mode_;
  TokenizedTexts::Arena* arena_;
  std::string cur_;
  std::uint32_t line_ = 0;
  StringPool raw_;
  std::vector<Token> stem_tokens_;
};

}  // namespace

std::size_t TokenizedTexts::total_tokens() const {
  std::size_t t = 0;
  for (auto c : count_) t += c;
  return t;
}

TokenizedTexts tokenize_texts(const std::vector<Utf8>& texts, TokenizerKind kind,
                              Stemmer stemmer, int threads) {
  const std::size_t n = texts.size();
  TokenizedTexts out;
  out.begin_.assign(n, nullptr);
  out.count_.assign(n, 0);
  if (n == 0) return out;
  std::size_t bytes = 0;
  for (const auto& t : texts) bytes += t.size;
  constexpr std::size_t kBlock = 64;
  const std::size_t n_blocks = (n + kBlock - 1) / kBlock;
  std::size_t workers = std::min<std::size_t>(static_cast<std::size_t>(resolve_threads(threads)),
                                              bytes / (256 * 1024) + 1);
  workers = std::min(workers, n_blocks);
  for (std::size_t w = 0; w < workers; ++w) {
    out.arenas_.push_back(std::make_unique<TokenizedTexts::Arena>());
    out.arenas_.back()->tokens.reserve(bytes / (5 * workers) + 16);
  }
  // Each worker owns an arena and a stem cache and claims blocks of texts dynamically.
  std::vector<std::uint32_t> arena_of(n, 0);
  std::vector<std::size_t> first_token(n, 0);
  std::atomic<std::size_t> next{0};
  parallel_for(workers, static_cast<int>(workers), [&](std::size_t w) {
    auto& arena = *out.arenas_[w];
    Worker worker(kind, stemmer, &arena);
    for (;;) {
      const std::size_t b = next.fetch_add(1, std::memory_order_relaxed);
      if (b >= n_blocks) break;
      const std::size_t end = std::min(n, (b + 1) * kBlock);
      for (std::size_t i = b * kBlock; i < end; ++i) {
        arena_of[i] = static_cast<std::uint32_t>(w);
        first_token[i] = arena.tokens.size();
        out.count_[i] = worker.run(texts[i]);
      }
    }
    worker.finish();
  });
  for (std::size_t i = 0; i < n; ++i) {
    out.begin_[i] = out.arenas_[arena_of[i]]->tokens.data() + first_token[i];
  }
  return out;
}

// --------------------------------------------------------------------------------- SQuAD

namespace {

inline bool is_ascii_punct(std::uint32_t cp) {
  return (cp >= 0x21 && cp <= 0x2F) || (cp >= 0x3A && cp <= 0x40) || (cp >= 0x5B && cp <= 0x60) ||
         (cp >= 0x7B && cp <= 0x7E);
}

}  // namespace

void squad_tokens(const char* data, std::size_t size, std::string& buffer,
                  std::vector<std::string_view>& out) {
  // Pass 1: drop string.punctuation, keep each remaining code point's bytes and flags.
  struct Cp {
    std::uint32_t off, len;
    std::uint8_t flags;
  };
  thread_local std::vector<Cp> cps;
  cps.clear();
  buffer.clear();
  out.clear();
  const auto* p = reinterpret_cast<const unsigned char*>(data);
  for (std::size_t i = 0; i < size;) {
    std::uint32_t cp;
    const std::size_t len = decode_utf8(p + i, size - i, cp);
    if (!is_ascii_punct(cp)) {
      const std::uint8_t f = cp == kInvalidCodePoint ? 0 : char_flags(cp);
      cps.push_back(
          {static_cast<std::uint32_t>(buffer.size()), static_cast<std::uint32_t>(len), f});
      buffer.append(reinterpret_cast<const char*>(p + i), len);
    }
    i += len;
  }
  // Pass 2: maximal runs of word characters equal to a/an/the become whitespace.
  const std::size_t m = cps.size();
  for (std::size_t i = 0; i < m;) {
    if (!(cps[i].flags & 8)) {
      ++i;
      continue;
    }
    std::size_t j = i;
    while (j < m && (cps[j].flags & 8)) ++j;
    const std::size_t bytes = cps[j - 1].off + cps[j - 1].len - cps[i].off;
    const std::string_view word(buffer.data() + cps[i].off, bytes);
    if (word == "a" || word == "an" || word == "the") {
      for (std::size_t k = i; k < j; ++k) cps[k].flags = 16;
    }
    i = j;
  }
  // Pass 3: split on whitespace.
  std::size_t start = 0;
  bool in_token = false;
  for (std::size_t i = 0; i < m; ++i) {
    if (cps[i].flags & 16) {
      if (in_token) out.emplace_back(buffer.data() + cps[start].off, cps[i].off - cps[start].off);
      in_token = false;
    } else if (!in_token) {
      start = i;
      in_token = true;
    }
  }
  if (in_token) out.emplace_back(buffer.data() + cps[start].off, buffer.size() - cps[start].off);
}

void whitespace_split(const char* data, std::size_t size, std::vector<std::string_view>& out) {
  out.clear();
  const auto* p = reinterpret_cast<const unsigned char*>(data);
  std::size_t start = 0;
  bool in_token = false;
  for (std::size_t i = 0; i < size;) {
    std::uint32_t cp;
    const std::size_t len = decode_utf8(p + i, size - i, cp);
    const bool space = cp != kInvalidCodePoint && (char_flags(cp) & 16);
    if (space) {
      if (in_token) out.emplace_back(data + start, i - start);
      in_token = false;
    } else if (!in_token) {
      start = i;
      in_token = true;
    }
    i += len;
  }
  if (in_token) out.emplace_back(data + start, size - start);
}

}  // namespace tb::text
