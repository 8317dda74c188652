// The Porter stemmer (M. F. Porter, "An algorithm for suffix stripping", Program 14(3), 1980)
// exactly as NLTK implements it (nltk/stem/porter.py, class PorterStemmer), in NLTK's two modes.
// rouge-score stems ROUGE tokens with NLTK's default mode (rouge_score/tokenize.py).
#pragma once

#include <string>
#include <string_view>

namespace tb::text {

// kNltk is NLTK's PorterStemmer() default mode (NLTK_EXTENSIONS), which rouge-score uses;
// kOriginal is PorterStemmer(mode="ORIGINAL_ALGORITHM").
enum class PorterMode { kNltk, kOriginal };

// Stems one word of ASCII letters and digits exactly as
// nltk.stem.porter.PorterStemmer(mode).stem(word) does (upper-case letters are lowered first).
std::string porter_stem(std::string_view word, PorterMode mode);

}  // namespace tb::text
