#include "text/porter.hpp"

#include <string>
#include <string_view>

namespace tb::text {

namespace {

// nltk.stem.porter.PorterStemmer, step by step. Words are lowercase ASCII [a-z0-9]; the rule
// lists keep NLTK's order because the first rule whose suffix matches ends a step even when its
// condition fails.
class Porter {
 public:
  explicit Porter(PorterMode mode) : nltk_(mode == PorterMode::kNltk) {}

  std::string stem(std::string_view word) const {
    std::string w(word);
    for (char& c : w) {
      if (c >= 'A' && c <= 'Z') c = static_cast<char>(c + 32);
    }
    if (nltk_) {
      if (const char* irregular = irregular_form(w)) return irregular;
      if (w.size() <= 2) return w;
    }
    step1a(w);
    step1b(w);
    step1c(w);
    step2(w);
    step3(w);
    step4(w);
    step5a(w);
    step5b(w);
    return w;
  }

 private:
  bool nltk_;

  static bool is_vowel(char c) { return c == 'a' || c == 'e' || c == 'i' || c == 'o' || c == 'u'; }

  // _is_consonant: 'y' is a consonant at the start of a word or after a vowel.
  static bool cons(std::string_view w, std::size_t i) {
    bool negate = false;
    while (i > 0 && w[i] == 'y') {
      negate = !negate;
      --i;
    }
    return (!is_vowel(w[i])) != negate;
  }

  // Number of vowel->consonant transitions in the c/v sequence (Porter's m).
  static int measure(std::string_view s) {
    int m = 0;
    bool prev_cons = true;
    bool first = true;
    for (std::size_t i = 0; i < s.size(); ++i) {
      bool c;
      if (is_vowel(s[i])) {
        c = false;
      } else if (s[i] == 'y') {
        c = first ? true : !prev_cons;
      } else {
        c = true;
      }
      if (!first && !prev_cons && c) ++m;
      prev_cons = c;
      first = false;
    }
    return m;
  }

  static bool contains_vowel(std::string_view s) {
    bool prev_cons = true;
    for (std::size_t i = 0; i < s.size(); ++i) {
      bool c;
      if (is_vowel(s[i])) {
        c = false;
      } else if (s[i] == 'y') {
        c = i == 0 ? true : !prev_cons;
      } else {
        c = true;
      }
      if (!c) return true;
      prev_cons = c;
    }
    return false;
  }

  static bool ends_double_consonant(std::string_view w) {
    return w.size() >= 2 && w[w.size() - 1] == w[w.size() - 2] && cons(w, w.size() - 1);
  }

  bool ends_cvc(std::string_view w) const {
    const std::size_t n = w.size();
    if (n >= 3 && cons(w, n - 3) && !cons(w, n - 2) && cons(w, n - 1) && w[n - 1] != 'w' &&
        w[n - 1] != 'x' && w[n - 1] != 'y') {
      return true;
    }
    return nltk_ && n == 2 && !cons(w, 0) && cons(w, 1);
  }

  static bool ends_with(std::string_view w, std::string_view suffix) {
    return w.size() >= suffix.size() &&
           w.compare(w.size() - suffix.size(), suffix.size(), suffix) == 0;
  }

  // One entry of _apply_rule_list: returns true when the suffix matched (the step is over),
  // replacing it when cond(stem) holds.
  template <class Cond>
  static bool rule(std::string& w, std::string_view suffix, std::string_view replacement,
                   Cond cond) {
    if (!ends_with(w, suffix)) return false;
    const std::string_view stem(w.data(), w.size() - suffix.size());
    if (cond(stem)) {
      w.resize(stem.size());
      w.append(replacement);
    }
    return true;
  }

  static bool always(std::string_view) { return true; }
  static bool m_gt0(std::string_view s) { return measure(s) > 0; }
  static bool m_gt1(std::string_view s) { return measure(s) > 1; }

  static const char* irregular_form(const std::string& w) {
    static const char* const kForms[][2] = {
        {"sky", "sky"},         {"skies", "sky"},        {"dying", "die"},
        {"lying", "lie"},       {"tying", "tie"},        {"news", "news"},
        {"innings", "inning"},  {"inning", "inning"},    {"outings", "outing"},
        {"outing", "outing"},   {"cannings", "canning"}, {"canning", "canning"},
        {"howe", "howe"},       {"proceed", "proceed"},  {"exceed", "exceed"},
        {"succeed", "succeed"},
    };
    for (const auto& f : kForms) {
      if (w == f[0]) return f[1];
    }
    return nullptr;
  }

  void step1a(std::string& w) const {
    if (nltk_ && w.size() == 4 && ends_with(w, "ies")) {
      w.resize(1);
      w += "ie";
      return;
    }
    rule(w, "sses", "ss", always) || rule(w, "ies", "i", always) || rule(w, "ss", "ss", always) ||
        rule(w, "s", "", always);
  }

  void step1b(std::string& w) const {
    if (nltk_ && ends_with(w, "ied")) {
      const bool four = w.size() == 4;
      w.resize(w.size() - 3);
      w += four ? "ie" : "i";
      return;
    }
    if (ends_with(w, "eed")) {
      if (measure(std::string_view(w.data(), w.size() - 3)) > 0) w.resize(w.size() - 1);
      return;
    }
    std::size_t cut = 0;
    if (ends_with(w, "ed") && contains_vowel(std::string_view(w.data(), w.size() - 2))) {
      cut = 2;
    } else if (ends_with(w, "ing") && contains_vowel(std::string_view(w.data(), w.size() - 3))) {
      cut = 3;
    }
    if (cut == 0) return;
    w.resize(w.size() - cut);
    if (rule(w, "at", "ate", always) || rule(w, "bl", "ble", always) ||
        rule(w, "iz", "ize", always)) {
      return;
    }
    if (ends_double_consonant(w)) {
      const char last = w.back();
      if (last != 'l' && last != 's' && last != 'z') w.pop_back();
      return;
    }
    if (measure(w) == 1 && ends_cvc(w)) w += 'e';
  }

  void step1c(std::string& w) const {
    rule(w, "y", "i", [&](std::string_view stem) {
      if (nltk_) return stem.size() > 1 && cons(stem, stem.size() - 1);
      return contains_vowel(stem);
    });
  }

  void step2(std::string& w) const {
    if (nltk_ && ends_with(w, "alli") && m_gt0(std::string_view(w.data(), w.size() - 4))) {
      w.resize(w.size() - 2);  // alli -> al
      step2(w);
      return;
    }
    if (rule(w, "ational", "ate", m_gt0) || rule(w, "tional", "tion", m_gt0) ||
        rule(w, "enci", "ence", m_gt0) || rule(w, "anci", "ance", m_gt0) ||
        rule(w, "izer", "ize", m_gt0)) {
      return;
    }
    if (nltk_ ? rule(w, "bli", "ble", m_gt0) : rule(w, "abli", "able", m_gt0)) return;
    if (rule(w, "alli", "al", m_gt0) || rule(w, "entli", "ent", m_gt0) ||
        rule(w, "eli", "e", m_gt0) || rule(w, "ousli", "ous", m_gt0) ||
        rule(w, "ization", "ize", m_gt0) || rule(w, "ation", "ate", m_gt0) ||
        rule(w, "ator", "ate", m_gt0) || rule(w, "alism", "al", m_gt0) ||
        rule(w, "iveness", "ive", m_gt0) || rule(w, "fulness", "ful", m_gt0) ||
        rule(w, "ousness", "ous", m_gt0) || rule(w, "aliti", "al", m_gt0) ||
        rule(w, "iviti", "ive", m_gt0) || rule(w, "biliti", "ble", m_gt0)) {
      return;
    }
    if (!nltk_) return;
    if (rule(w, "fulli", "ful", m_gt0)) return;
    // 'logi' -> 'log', testing the measure of the stem with its 'l' (word minus "ogi").
    if (ends_with(w, "logi") && m_gt0(std::string_view(w.data(), w.size() - 3))) {
      w.resize(w.size() - 1);
    }
  }

  static void step3(std::string& w) {
    rule(w, "icate", "ic", m_gt0) || rule(w, "ative", "", m_gt0) || rule(w, "alize", "al", m_gt0) ||
        rule(w, "iciti", "ic", m_gt0) || rule(w, "ical", "ic", m_gt0) ||
        rule(w, "ful", "", m_gt0) || rule(w, "ness", "", m_gt0);
  }

  static void step4(std::string& w) {
    rule(w, "al", "", m_gt1) || rule(w, "ance", "", m_gt1) || rule(w, "ence", "", m_gt1) ||
        rule(w, "er", "", m_gt1) || rule(w, "ic", "", m_gt1) || rule(w, "able", "", m_gt1) ||
        rule(w, "ible", "", m_gt1) || rule(w, "ant", "", m_gt1) || rule(w, "ement", "", m_gt1) ||
        rule(w, "ment", "", m_gt1) || rule(w, "ent", "", m_gt1) ||
        rule(w, "ion", "",
             [](std::string_view s) {
               return measure(s) > 1 && (s.back() == 's' || s.back() == 't');
             }) ||
        rule(w, "ou", "", m_gt1) || rule(w, "ism", "", m_gt1) || rule(w, "ate", "", m_gt1) ||
        rule(w, "iti", "", m_gt1) || rule(w, "ous", "", m_gt1) || rule(w, "ive", "", m_gt1) ||
        rule(w, "ize", "", m_gt1);
  }

  void step5a(std::string& w) const {
    if (!ends_with(w, "e")) return;
    const std::string_view stem(w.data(), w.size() - 1);
    const int m = measure(stem);
    if (m > 1 || (m == 1 && !ends_cvc(stem))) w.pop_back();
  }

  static void step5b(std::string& w) {
    if (ends_with(w, "ll") && measure(std::string_view(w.data(), w.size() - 1)) > 1) w.pop_back();
  }
};

}  // namespace

std::string porter_stem(std::string_view word, PorterMode mode) { return Porter(mode).stem(word); }

}  // namespace tb::text
