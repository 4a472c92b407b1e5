//! The tokenizer: turns memory text and search queries into index terms.
//!
//! Both sides go through the same segmentation, so whatever a document is indexed under, a query
//! naming the same words looks up:
//! - text is lowercased and NFC-normalised, so case and Unicode composition never matter;
//! - words are UAX#29 words and match whole: `thon` does not find `Python`;
//! - Han, Hiragana, Katakana and Hangul are written without spaces between words (Korean puts
//!   particles right after a word), so a run of them is indexed as its characters and their
//!   bigrams. A query run of one character looks up that character, a longer one its bigrams, so
//!   any substring of indexed text is found, and a document holding the whole substring holds
//!   all of its bigrams and outranks one holding only some.
//! - Latin (or other spaced) words inside such runs are words of their own:
//!   `私はPythonでADKを使っています` is found by `python` and by `adk`.

use unicode_normalization::UnicodeNormalization;
use unicode_script::{Script, UnicodeScript};
use unicode_segmentation::UnicodeSegmentation;

/// Words are cut to this many characters, the same way in documents and queries, so one
/// pathological "word" (a pasted blob) cannot blow up index keys.
const MAX_WORD_CHARS: usize = 64;

/// Scripts written without spaces between words.
const UNSPACED: [Script; 4] = [
    Script::Han,
    Script::Hiragana,
    Script::Katakana,
    Script::Hangul,
];

/// The index terms of a document, one per occurrence (repeats kept, for term frequencies).
pub fn terms(text: &str) -> Vec<String> {
    let mut terms = Vec::new();
    segment(text, |piece| match piece {
        Piece::Word(word) => terms.push(word.to_owned()),
        Piece::Run(run) => {
            terms.extend(run.iter().map(char::to_string));
            terms.extend(run.windows(2).map(String::from_iter));
        }
    });
    terms
}

/// The distinct terms a query looks up, in the order they first occur.
pub fn query_terms(text: &str) -> Vec<String> {
    let mut terms: Vec<String> = Vec::new();
    let mut push = |term: String| {
        if !terms.contains(&term) {
            terms.push(term);
        }
    };
    segment(text, |piece| match piece {
        Piece::Word(word) => push(word.to_owned()),
        Piece::Run([c]) => push(c.to_string()),
        Piece::Run(run) => run.windows(2).map(String::from_iter).for_each(&mut push),
    });
    terms
}

/// A unit of normalised text.
enum Piece<'a> {
    /// A word of a spaced script (or a number), cut to [`MAX_WORD_CHARS`].
    Word(&'a str),
    /// A maximal run of adjacent characters of unspaced scripts.
    Run(&'a [char]),
}

/// Feeds the pieces of `text`, in order, to `f`.
fn segment(text: &str, mut f: impl FnMut(Piece<'_>)) {
    // Lowercasing first, then composing, gives NFD and NFC input the same result.
    let text: String = text.to_lowercase().nfc().collect();
    let mut run = Vec::new();
    let mut rest = text.as_str();
    while let Some(start) = rest.find(is_unspaced) {
        words(&rest[..start], &mut f);
        let tail = &rest[start..];
        let end = tail.find(|c| !is_unspaced(c)).unwrap_or(tail.len());
        run.clear();
        run.extend(tail[..end].chars());
        f(Piece::Run(&run));
        rest = &tail[end..];
    }
    words(rest, &mut f);
}

fn words(text: &str, f: &mut impl FnMut(Piece<'_>)) {
    for word in text.unicode_words() {
        let end = word
            .char_indices()
            .nth(MAX_WORD_CHARS)
            .map_or(word.len(), |(i, _)| i);
        f(Piece::Word(&word[..end]));
    }
}

/// A letter or digit of a script written without spaces. Characters shared between scripts
/// count by their script extensions (the prolonged sound mark `ー` is Hiragana and Katakana),
/// but those shared by all (ASCII digits, punctuation) do not.
fn is_unspaced(c: char) -> bool {
    if !c.is_alphanumeric() {
        return false;
    }
    let scripts = c.script_extension();
    !scripts.is_common()
        && !scripts.is_inherited()
        && UNSPACED.iter().any(|&s| scripts.contains_script(s))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn has(text: &str, term: &str) -> bool {
        terms(text).iter().any(|t| t == term)
    }

    /// What the store does: a document matches when it has every term of the query
    /// (the ranking then prefers documents with more of them).
    fn finds(text: &str, query: &str) -> bool {
        let doc = terms(text);
        let query = query_terms(query);
        !query.is_empty() && query.iter().all(|t| doc.contains(t))
    }

    #[test]
    fn whole_words_only() {
        assert_eq!(
            terms("I like Python, and the ADK toolkit."),
            ["i", "like", "python", "and", "the", "adk", "toolkit"]
        );
        assert!(finds("I like Python", "python"));
        assert!(finds("I like Python", "PYTHON"));
        assert!(!finds("I like Python", "thon"));
        assert!(!finds("the ADK toolkit", "tool"));
    }

    #[test]
    fn repeats_are_kept_in_documents_and_dropped_in_queries() {
        assert_eq!(terms("spam spam eggs"), ["spam", "spam", "eggs"]);
        assert_eq!(query_terms("Spam spam eggs SPAM"), ["spam", "eggs"]);
        assert!(query_terms("  ... !? ").is_empty());
        assert!(terms("").is_empty());
    }

    #[test]
    fn other_alphabets_are_ordinary_words() {
        assert_eq!(terms("Привет, МИР"), ["привет", "мир"]);
        assert_eq!(terms("Καλημέρα ΚΌΣΜΕ"), ["καλημέρα", "κόσμε"]);
        assert!(finds("Der Bär läuft", "BÄR"));
        assert!(!finds("Der Bär läuft", "bar"));
    }

    #[test]
    fn composition_does_not_matter() {
        let nfc = "Café Über";
        let nfd = "Cafe\u{301} U\u{308}ber";
        assert_eq!(terms(nfc), terms(nfd));
        assert!(finds(nfc, "cafe\u{301}"));
        assert!(finds(nfd, "CAFÉ"));
        assert!(
            finds("\u{AC00}", "\u{1100}\u{1161}"),
            "Hangul jamo compose to the syllable"
        );
    }

    #[test]
    fn cjk_runs_are_unigrams_and_bigrams() {
        assert_eq!(
            terms("山田太郎"),
            ["山", "田", "太", "郎", "山田", "田太", "太郎"]
        );
        assert_eq!(query_terms("太郎"), ["太郎"]);
        assert_eq!(query_terms("郎"), ["郎"]);
        assert!(finds("山田太郎です", "太郎"));
        assert!(finds("山田太郎です", "田太郎で"));
        assert!(finds("山田太郎です", "郎"));
        assert!(!finds("山田太郎です", "太田"));
        // Punctuation ends a run: no bigram spans it.
        assert!(!has("山田。太郎", "田太"));
        // The prolonged sound mark belongs to katakana words.
        assert!(finds("コーヒーを飲む", "コーヒー"));
    }

    #[test]
    fn korean_words_are_found_without_their_particles() {
        let text = "저는 파이썬을 좋아합니다";
        assert!(finds(text, "파이썬"));
        assert!(finds(text, "좋아"));
        assert!(!finds(text, "파썬"));
    }

    #[test]
    fn latin_words_inside_unspaced_text_stand_alone() {
        let text = "私はPythonでADKを使っています";
        let t = terms(text);
        assert!(t.contains(&"python".to_owned()) && t.contains(&"adk".to_owned()));
        assert!(finds(text, "Python"));
        assert!(finds(text, "adk"));
        assert!(finds(text, "使って"));
        assert!(!finds(text, "pyth"));
        assert!(finds("ADK를 써요", "adk"));
        assert!(finds("2024年に", "2024"));
    }

    #[test]
    fn long_words_are_cut_the_same_way_on_both_sides() {
        let long = "x".repeat(500);
        assert_eq!(terms(&long), [&long[..MAX_WORD_CHARS]]);
        assert!(finds(&long, &long.to_uppercase()));
    }
}
