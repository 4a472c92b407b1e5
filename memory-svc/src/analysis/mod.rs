//! Text analysis: turns memory text and search queries into index terms, the same way on both
//! sides, so a query naming a word finds every entry that was indexed under it.
//!
//! - [`segment`] cuts text into words (UAX #29, lowercased, NFC) and runs of unspaced scripts
//!   (Han, Kana, Hangul), which become their characters and bigrams.
//! - Each word is reduced to its Snowball stem in the text's [`Language`] ("injured", "injury"
//!   → "injur"), so forms of one word match. The language is the one detected when detection
//!   is confident (a sentence or more), else the server's default; with no language (the
//!   default set to none, or a script no stemmer covers) words are kept as written. A write
//!   detects it once, over a sample of all the texts it brings ([`WriteLanguage`]): a
//!   conversation is mostly in one language, its short turns ("Yes!", "ok, thanks") are where
//!   detection on their own cannot tell, and detection is most of the CPU a write's analysis
//!   takes (BENCHMARKS.md, "Ingestion: what 3× ADK leaves for the index"). Only a text written
//!   in another script than the write's (Cyrillic in a Latin conversation, CJK) is detected on
//!   its own, a test that costs a count of characters. A query is detected on its own. A server
//!   whose users all write one language may turn detection off ([`Analyzer::fixed`]): every
//!   text is then in the default language.
//! - A query drops its stopwords ("what", "did", "the", "my"): they match almost every entry,
//!   and in a memory of short conversational turns they would otherwise decide the ranking. A
//!   query made only of stopwords keeps them. Documents index every word, so such a query still
//!   finds its entries.
//!
//! Exact word forms are not indexed beside their stems: measured on the retrieval harness
//! (BENCHMARKS.md, "Memory retrieval quality"), adding them with half weight lowered recall@5.

mod language;
mod segment;

use std::ops::Range;

pub use language::{Language, UnknownLanguage};
use segment::Piece;
use unicode_segmentation::UnicodeSegmentation;
use whatlang::Script;

/// Bumped whenever analysis changes what a text is indexed under (or what an entry is: 3 added
/// the name terms of `store::index`); a store indexed by another analysis is re-indexed when
/// it is opened (see [`Analyzer::identity`]).
const VERSION: u32 = 3;

/// How a memory service analyses text: the fixed rules above, the language that text of no
/// confidently detected language is taken to be in, and whether languages are detected at all.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Analyzer {
    default: Option<Language>,
    detect: bool,
}

impl Default for Analyzer {
    /// English for text of no detected language.
    fn default() -> Self {
        Self::new(Some(Language::English))
    }
}

impl Analyzer {
    /// Each text in the language detected in it, or in `default` when detection is not
    /// confident.
    pub fn new(default: Option<Language>) -> Self {
        Self {
            default,
            detect: true,
        }
    }

    /// Every text in `language`, nothing detected (a query may still name its own language).
    pub fn fixed(language: Option<Language>) -> Self {
        Self {
            default: language,
            detect: false,
        }
    }

    /// Names everything that decides the terms of a text: a store records it with its index
    /// and re-indexes when it changes.
    pub fn identity(&self) -> String {
        let default = self.default.map_or("none", Language::code);
        // Stores indexed with no detection keep their identity: what they are indexed under
        // did not change when detection moved from each text to each write.
        let detection = if self.detect {
            ", detected per write"
        } else {
            ", no detection"
        };
        format!("analysis {VERSION}, default language {default}{detection}")
    }

    /// The language of `text` on its own (a query's): detected when detection is on and
    /// confident, else the default.
    pub fn language_of(&self, text: &str) -> Option<Language> {
        if self.detect {
            Language::detect(text).or(self.default)
        } else {
            self.default
        }
    }

    /// The language of a write that brings `texts` (the texts of its entries), detected once
    /// over a sample of them: up to [`SAMPLE_TEXTS`] texts spread evenly over the write, each
    /// cut to [`SAMPLE_TEXT_BYTES`].
    pub fn write_language<S: AsRef<str>>(&self, texts: &[S]) -> WriteLanguage {
        if !self.detect || texts.is_empty() {
            return WriteLanguage {
                analyzer: *self,
                language: self.default,
                script: None,
            };
        }
        let step = texts.len().div_ceil(SAMPLE_TEXTS);
        let mut sample = String::new();
        for text in texts.iter().step_by(step) {
            let text = text.as_ref();
            let mut end = text.len().min(SAMPLE_TEXT_BYTES);
            while !text.is_char_boundary(end) {
                end -= 1;
            }
            sample.push_str(&text[..end]);
            sample.push('\n');
        }
        WriteLanguage {
            analyzer: *self,
            language: self.language_of(&sample),
            script: Language::script_of(&sample),
        }
    }

    /// The terms `text` is indexed under, one per occurrence, in order, when it is written in
    /// `language`.
    pub fn terms(&self, text: &str, language: Option<Language>, mut f: impl FnMut(String)) {
        segment::segment(text, |piece| match piece {
            Piece::Word(word) => f(term(word, language)),
            Piece::Run(run) => {
                run.iter().for_each(|c| f(c.to_string()));
                run.windows(2).for_each(|pair| f(String::from_iter(pair)));
            }
        });
    }

    /// The distinct terms a query looks up, in the order they first occur. `language` is the
    /// caller's choice; without one, the query's own is picked as for any text.
    pub fn query_terms(&self, text: &str, language: Option<Language>) -> Vec<String> {
        let language = language.or_else(|| self.language_of(text));
        // Each term, and whether it comes from a stopword.
        let mut terms: Vec<(String, bool)> = Vec::new();
        let mut push = |term: String, stop: bool| {
            if !terms.iter().any(|(t, _)| *t == term) {
                terms.push((term, stop));
            }
        };
        segment::segment(text, |piece| match piece {
            Piece::Word(word) => push(
                term(word, language),
                language.is_some_and(|l| l.is_stopword(word)),
            ),
            Piece::Run([c]) => push(c.to_string(), false),
            Piece::Run(run) => run
                .windows(2)
                .for_each(|pair| push(String::from_iter(pair), false)),
        });
        let meaningful = terms.iter().any(|(_, stop)| !stop);
        terms
            .into_iter()
            .filter(|(_, stop)| !meaningful || !stop)
            .map(|(term, _)| term)
            .collect()
    }

    /// The words of `text` written with a capital first letter (those that may be names),
    /// each with its byte range in `text` and its term in `language` (without one, the text's
    /// own, as for [`Analyzer::query_terms`]). Scripts without capitals have none.
    pub fn capitalised_words(
        &self,
        text: &str,
        language: Option<Language>,
    ) -> Vec<(Range<usize>, String)> {
        let language = language.or_else(|| self.language_of(text));
        text.unicode_word_indices()
            .filter(|(_, word)| word.chars().next().is_some_and(char::is_uppercase))
            .filter_map(|(start, word)| {
                // The word's term as a document holding it is indexed under.
                let mut terms = Vec::new();
                segment::segment(word, |piece| {
                    terms.push(match piece {
                        Piece::Word(word) => Some(term(word, language)),
                        Piece::Run(_) => None,
                    })
                });
                match terms.as_mut_slice() {
                    [Some(term)] => Some((start..start + word.len(), std::mem::take(term))),
                    _ => None,
                }
            })
            .collect()
    }
}

/// How many texts of a write its language is detected over, and how much of each: enough for
/// detection to be confident of a conversation's language, and a bounded cost however large
/// the write.
const SAMPLE_TEXTS: usize = 16;
const SAMPLE_TEXT_BYTES: usize = 256;

/// The language of one write's texts (see [`Analyzer::write_language`]), and the script it is
/// written in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WriteLanguage {
    analyzer: Analyzer,
    language: Option<Language>,
    script: Option<Script>,
}

impl WriteLanguage {
    /// The language of `text`, one of the write's texts: the write's, unless `text` is written
    /// in another script, in which case its own as [`Analyzer::language_of`] detects it.
    pub fn of(&self, text: &str) -> Option<Language> {
        if !self.analyzer.detect {
            return self.analyzer.default;
        }
        match Language::script_of(text) {
            Some(script) if Some(script) != self.script => self.analyzer.language_of(text),
            _ => self.language,
        }
    }
}

/// The term of a lowercase word in `language`.
fn term(word: &str, language: Option<Language>) -> String {
    match language {
        Some(language) => language.stem(word),
        None => word.to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::{segment::MAX_WORD_CHARS, *};

    const EN: Option<Language> = Some(Language::English);

    fn terms(text: &str) -> Vec<String> {
        let analyzer = Analyzer::default();
        let mut terms = Vec::new();
        analyzer.terms(text, analyzer.language_of(text), |t| terms.push(t));
        terms
    }

    fn query_terms(text: &str) -> Vec<String> {
        Analyzer::default().query_terms(text, None)
    }

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
    fn forms_of_a_word_share_its_stem() {
        assert!(finds("I injured my knee playing football", "injured"));
        assert!(finds(
            "I injured my knee playing football",
            "When was she injured?"
        ));
        assert!(finds("I cooked dinner for everyone", "cooking"));
        assert!(finds("She adopted two greyhounds", "greyhound adoption"));
        assert!(!finds("I cooked dinner", "cookie"));
        // Irregular forms are different words to a stemmer.
        assert!(!finds("I grew up by the sea", "grow"));
    }

    #[test]
    fn queries_drop_their_stopwords_unless_nothing_else_is_left() {
        assert_eq!(query_terms("What did Priya cook?"), ["priya", "cook"]);
        assert_eq!(query_terms("What is my name?"), ["name"]);
        assert_eq!(query_terms("the who"), ["the", "who"]);
        assert!(finds("The Who played all night", "the who"));
        assert!(terms("What did you do?").contains(&"what".to_owned()));
    }

    #[test]
    fn repeats_are_kept_in_documents_and_dropped_in_queries() {
        assert_eq!(terms("spam spam eggs"), ["spam", "spam", "egg"]);
        assert_eq!(query_terms("Spam spam eggs SPAM"), ["spam", "egg"]);
        assert!(query_terms("  ... !? ").is_empty());
        assert!(terms("").is_empty());
    }

    #[test]
    fn the_language_is_detected_and_its_stemmer_used() {
        let analyzer = Analyzer::default();
        let german =
            "Der Hund meines Nachbarn hat gestern den ganzen Nachmittag im Garten gebellt.";
        assert_eq!(analyzer.language_of(german), Some(Language::German));
        assert!(terms(german).contains(&"nachbarn".to_owned()));
        assert_eq!(
            analyzer.query_terms("Nachbarn", Some(Language::German)),
            ["nachbarn"]
        );
        // Too short to tell: the default language.
        assert_eq!(analyzer.language_of("Ha, no."), Some(Language::English));
        let russian = "Мы вчера весь вечер гуляли по парку и говорили о новой работе.";
        assert_eq!(analyzer.language_of(russian), Some(Language::Russian));
        assert!(finds(russian, "работа"));
        // A query names its language when detection cannot tell.
        let words = analyzer.query_terms("Hunden", Some(Language::German));
        assert_eq!(words, ["hund"]);
        assert_eq!(analyzer.query_terms("Hunden", EN), ["hunden"]);
    }

    #[test]
    fn capitalised_words_are_found_where_they_are_written() {
        let analyzer = Analyzer::default();
        let text = "Why was Daniel’s knee hurt, and what did María say to Jonas?";
        let words = analyzer.capitalised_words(text, None);
        let found: Vec<(&str, &str)> = words
            .iter()
            .map(|(range, term)| (&text[range.clone()], term.as_str()))
            .collect();
        assert_eq!(
            found,
            [
                ("Why", "whi"),
                ("Daniel’s", "daniel"),
                ("María", "maría"),
                ("Jonas", "jona")
            ]
        );
        // Each term is the one a document holding the word is indexed under.
        for (range, term) in &words {
            let mut indexed = Vec::new();
            analyzer.terms(&text[range.clone()], EN, |t| indexed.push(t));
            assert_eq!(indexed, std::slice::from_ref(term));
        }
        assert!(analyzer.capitalised_words("no names here", None).is_empty());
        assert!(analyzer
            .capitalised_words("山田さんはどこ", None)
            .is_empty());
    }

    #[test]
    fn without_a_language_words_are_kept_as_written() {
        let analyzer = Analyzer::new(None);
        assert_eq!(
            analyzer.query_terms("cooking the pasta", None),
            ["cooking", "the", "pasta"]
        );
        assert_ne!(analyzer.identity(), Analyzer::default().identity());
    }

    #[test]
    fn without_detection_every_text_is_in_the_default_language() {
        let walked = "Мы вчера весь вечер гуляли по парку и говорили о работе.";
        let detecting = Analyzer::new(EN);
        let fixed = Analyzer::fixed(EN);
        assert_eq!(detecting.language_of(walked), Some(Language::Russian));
        assert_eq!(fixed.language_of(walked), EN);
        let stems = |analyzer: Analyzer| {
            let mut terms = Vec::new();
            analyzer.terms(walked, analyzer.language_of(walked), |t| terms.push(t));
            terms
        };
        // Russian Snowball takes "гуляли" to its stem; English leaves Cyrillic as written.
        assert!(stems(detecting).contains(&"гуля".to_owned()));
        assert!(stems(fixed).contains(&"гуляли".to_owned()));
        // A query naming its language is still analysed in it.
        let russian = Some(Language::Russian);
        assert_eq!(fixed.query_terms("гулять", russian), ["гуля"]);
        assert_eq!(fixed.query_terms("гуляли", None), ["гуляли"]);
        assert_ne!(fixed.identity(), detecting.identity());
        assert_eq!(
            fixed.identity(),
            "analysis 3, default language en, no detection",
            "stores indexed without detection are not re-indexed"
        );
        let write = fixed.write_language(&[walked]);
        assert_eq!(write.of(walked), EN);
    }

    #[test]
    fn a_write_is_detected_once_and_a_text_in_another_script_on_its_own() {
        let analyzer = Analyzer::default();
        let russian = "Мы вчера весь вечер гуляли по парку и говорили о новой работе.";
        let english = [
            "Yes!",
            "ok, thanks",
            "I finally booked the flights to Lisbon for our anniversary in May.",
            "Great, tell me more",
        ];
        let texts: Vec<&str> = english.iter().copied().chain([russian]).collect();
        let write = analyzer.write_language(&texts);
        assert_eq!(write.of(russian), Some(Language::Russian));
        for text in english {
            assert_eq!(write.of(text), EN, "{text}");
        }
        // A conversation in German: its short turns are German too, which on their own they
        // could not be told to be.
        let german = [
            "Der Hund meines Nachbarn hat gestern den ganzen Nachmittag im Garten gebellt.",
            "Ja, genau!",
            "Und heute wieder",
        ];
        assert_eq!(analyzer.language_of(german[1]), EN);
        let write = analyzer.write_language(&german);
        for text in german {
            assert_eq!(write.of(text), Some(Language::German), "{text}");
        }
        // A write of nothing detects each text on its own.
        let none = analyzer.write_language::<&str>(&[]);
        assert_eq!(none.of(russian), Some(Language::Russian));
        assert_eq!(none.of(german[0]), Some(Language::German));
        assert_eq!(none.of("123"), EN);
        // A write of many texts is detected over a sample of them.
        let many: Vec<String> = (0..10_000).map(|i| format!("{} {i}", german[0])).collect();
        assert_eq!(
            analyzer.write_language(&many).of("ok"),
            Some(Language::German)
        );
    }

    #[test]
    fn other_alphabets_are_ordinary_words() {
        assert_eq!(terms("Привет, МИР"), ["привет", "мир"]);
        // Greek is detected, and stemmed.
        assert_eq!(terms("Καλημέρα ΚΌΣΜΕ"), ["καλημερ", "κοσμ"]);
        assert!(finds("Καλημέρα ΚΌΣΜΕ", "κόσμε"));
        assert!(finds("Der Bär läuft", "BÄR"));
    }

    #[test]
    fn typographic_apostrophes_are_apostrophes() {
        assert_eq!(terms("Priya’s new job"), terms("Priya's new job"));
        assert!(finds("Priya’s new job", "priya"));
        assert!(finds("Priya started a new job", "What is Priya’s job?"));
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
