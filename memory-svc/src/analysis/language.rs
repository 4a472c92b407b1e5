//! The languages text analysis knows: each has a Snowball stemmer (`rust-stemmers`), a stopword
//! list (NLTK's, from `stop-words`) and is one `whatlang` can detect.

use std::{collections::HashSet, fmt, str::FromStr, sync::OnceLock};

use rust_stemmers::{Algorithm, Stemmer};
use whatlang::{Detector, Lang, Script};

/// A language with a stemmer and stopwords.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Language {
    Arabic,
    Danish,
    Dutch,
    English,
    Finnish,
    French,
    German,
    Greek,
    Hungarian,
    Italian,
    Norwegian,
    Portuguese,
    Romanian,
    Russian,
    Spanish,
    Swedish,
    Tamil,
    Turkish,
}

use Language::*;

/// Every language, with its ISO 639-1 code, its stemmer and its `whatlang` name.
const ALL: [(Language, &str, Algorithm, Lang); 18] = [
    (Arabic, "ar", Algorithm::Arabic, Lang::Ara),
    (Danish, "da", Algorithm::Danish, Lang::Dan),
    (Dutch, "nl", Algorithm::Dutch, Lang::Nld),
    (English, "en", Algorithm::English, Lang::Eng),
    (Finnish, "fi", Algorithm::Finnish, Lang::Fin),
    (French, "fr", Algorithm::French, Lang::Fra),
    (German, "de", Algorithm::German, Lang::Deu),
    (Greek, "el", Algorithm::Greek, Lang::Ell),
    (Hungarian, "hu", Algorithm::Hungarian, Lang::Hun),
    (Italian, "it", Algorithm::Italian, Lang::Ita),
    (Norwegian, "no", Algorithm::Norwegian, Lang::Nob),
    (Portuguese, "pt", Algorithm::Portuguese, Lang::Por),
    (Romanian, "ro", Algorithm::Romanian, Lang::Ron),
    (Russian, "ru", Algorithm::Russian, Lang::Rus),
    (Spanish, "es", Algorithm::Spanish, Lang::Spa),
    (Swedish, "sv", Algorithm::Swedish, Lang::Swe),
    (Tamil, "ta", Algorithm::Tamil, Lang::Tam),
    (Turkish, "tr", Algorithm::Turkish, Lang::Tur),
];

/// What each language needs at hand, built once.
struct Tables {
    stemmers: Vec<Stemmer>,
    stopwords: Vec<HashSet<&'static str>>,
    detector: Detector,
}

fn tables() -> &'static Tables {
    static TABLES: OnceLock<Tables> = OnceLock::new();
    TABLES.get_or_init(|| Tables {
        stemmers: ALL.iter().map(|&(_, _, a, _)| Stemmer::create(a)).collect(),
        stopwords: ALL
            .iter()
            .map(|&(_, code, _, _)| {
                stop_words::lookup(code)
                    .unwrap_or_default()
                    .iter()
                    .copied()
                    .collect()
            })
            .collect(),
        detector: Detector::with_allowlist(ALL.iter().map(|&(_, _, _, l)| l).collect()),
    })
}

impl Language {
    fn index(self) -> usize {
        self as usize
    }

    /// Its ISO 639-1 code.
    pub fn code(self) -> &'static str {
        ALL[self.index()].1
    }

    /// The language `text` is written in, when detection is confident of it.
    pub fn detect(text: &str) -> Option<Self> {
        let info = tables().detector.detect(text)?;
        if !info.is_reliable() {
            return None;
        }
        ALL.iter()
            .find(|&&(_, _, _, l)| l == info.lang())
            .map(|&(language, ..)| language)
    }

    /// The writing system most of `text`'s letters are in (Latin, Cyrillic, Han…), if it has
    /// letters: a count of characters, far cheaper than detecting its language.
    pub fn script_of(text: &str) -> Option<Script> {
        whatlang::detect_script(text)
    }

    /// The stem of a lowercase word.
    pub fn stem(self, word: &str) -> String {
        tables().stemmers[self.index()].stem(word).into_owned()
    }

    /// Whether a lowercase word is one that carries no meaning on its own ("the", "what").
    pub fn is_stopword(self, word: &str) -> bool {
        tables().stopwords[self.index()].contains(word)
    }
}

impl fmt::Display for Language {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.code())
    }
}

/// A language code that is not one of [`Language`]'s.
#[derive(Debug, thiserror::Error)]
#[error("unknown language {0:?}: expected one of {codes}", codes = codes())]
pub struct UnknownLanguage(pub String);

/// The codes of every language, comma-separated.
fn codes() -> String {
    ALL.iter().map(|l| l.1).collect::<Vec<_>>().join(", ")
}

impl FromStr for Language {
    type Err = UnknownLanguage;

    fn from_str(code: &str) -> Result<Self, Self::Err> {
        ALL.iter()
            .find(|l| l.1.eq_ignore_ascii_case(code))
            .map(|l| l.0)
            .ok_or_else(|| UnknownLanguage(code.to_owned()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_language_has_a_stemmer_stopwords_and_its_own_code() {
        for (i, &(language, code, ..)) in ALL.iter().enumerate() {
            assert_eq!(language.index(), i, "{language:?} is out of place");
            assert_eq!(code.parse::<Language>().ok(), Some(language));
            assert!(
                !tables().stopwords[i].is_empty(),
                "{language:?} has no stopwords"
            );
        }
        assert!("xx".parse::<Language>().is_err());
        assert_eq!("DE".parse::<Language>().ok(), Some(German));
    }

    #[test]
    fn detection_is_used_only_when_confident() {
        assert_eq!(
            Language::detect(
                "Der Hund meines Nachbarn hat gestern den ganzen Nachmittag im Garten gebellt."
            ),
            Some(German)
        );
        assert_eq!(
            Language::detect("Мы вчера весь вечер гуляли по парку и говорили о работе."),
            Some(Russian)
        );
        assert_eq!(Language::detect("ok"), None);
        assert_eq!(Language::detect("山田太郎です"), None);
    }
}
