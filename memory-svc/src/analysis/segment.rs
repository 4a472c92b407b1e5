//! Segmentation: cuts text into the words and unspaced runs that analysis turns into terms.
//!
//! Documents and queries go through the same segmentation:
//! - text is lowercased and NFC-normalised, so case and Unicode composition never matter, and
//!   typographic apostrophes are written `'`, so "Priya’s" (as phones type it) is "Priya's"
//!   (whose stem is "priya");
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
pub(super) const MAX_WORD_CHARS: usize = 64;

/// Scripts written without spaces between words.
const UNSPACED: [Script; 4] = [
    Script::Han,
    Script::Hiragana,
    Script::Katakana,
    Script::Hangul,
];

/// A unit of normalised text.
pub(super) enum Piece<'a> {
    /// A word of a spaced script (or a number), cut to [`MAX_WORD_CHARS`].
    Word(&'a str),
    /// A maximal run of adjacent characters of unspaced scripts.
    Run(&'a [char]),
}

/// Feeds the pieces of `text`, in order, to `f`.
pub(super) fn segment(text: &str, mut f: impl FnMut(Piece<'_>)) {
    // Lowercasing first, then composing, gives NFD and NFC input the same result.
    let text: String = text.to_lowercase().nfc().map(apostrophe).collect();
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

/// `'` for the characters that join words as an apostrophe does (UAX #29 `MidNumLet`
/// quotes): the stemmers know only `'`.
fn apostrophe(c: char) -> char {
    match c {
        '\u{2018}' | '\u{2019}' | '\u{FF07}' => '\'',
        c => c,
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
