//! What both stores compute the same way, so they rank identically: the terms an entry is
//! indexed under, and the BM25F score of a term in an entry.
//!
//! An entry is indexed under the terms of four fields, each with a weight: its text, its author,
//! the string values of its `custom_metadata`, and its conversational context (the text of the
//! turns next to it in its session, see [`Entry`]'s store docs). A term's frequency in the entry
//! is the weighted sum of its frequencies in the fields, and the entry's length the weighted sum
//! of theirs (BM25F with one length normalisation): "What is Aisha afraid of?" favours Aisha's
//! turns, and "Yes, last Saturday!" is found by the question it answers, at a lower weight than
//! an entry that says it itself. Frequencies and lengths are kept in integer [`UNIT`]s so that
//! every store sums them exactly alike.
//!
//! An entry is also indexed under the [`name_term`]s of its author ("@daniel"), which score
//! nothing: no query term is one, and they add nothing to the entry's length. They tell a search
//! which words of a query name someone whose words the memory holds (see `Memories::search`).

use std::{
    collections::{BTreeMap, HashMap},
    sync::Arc,
};

use adk_proto::session::v1::{part, Content};

use super::Entry;
use crate::analysis::{Analyzer, Language, WriteLanguage};

/// BM25 term-frequency saturation.
pub const K1: f64 = 1.2;
/// BM25 length normalisation. Lower than the textbook 0.75: an entry's length here includes
/// its author, metadata and neighbouring turns, and on the retrieval harness (and on corpora
/// generated from it with other seeds) 0.5 finds more than 0.75, most for short replies.
pub const B: f64 = 0.5;

/// Term frequencies and lengths are counted in these parts of one occurrence in the text.
pub const UNIT: u32 = 2;

/// Field weights, in [`UNIT`]s per occurrence (measured on the retrieval harness: see
/// BENCHMARKS.md, "Memory retrieval quality").
const TEXT: u32 = 2;
const AUTHOR: u32 = 2;
const METADATA: u32 = 2;
const CONTEXT: u32 = 1;

/// An entry's index terms.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Terms {
    /// Each distinct term once, sorted, with its weighted frequency in [`UNIT`]s.
    pub counts: Vec<(String, u32)>,
    /// The weighted number of term occurrences in [`UNIT`]s (BM25's document length); 0 when
    /// the entry has no text.
    pub len: u32,
}

impl Terms {
    /// The terms of `entry`, whose neighbouring turns in its conversation say `context`. All
    /// fields are analysed in the language of the entry's text.
    pub fn of(analyzer: &Analyzer, entry: &Entry, context: &[String]) -> Self {
        Self::analysed(&mut Analysis::new(*analyzer), entry, context)
    }

    /// [`Terms::of`], analysing through `analysis`, which keeps what it analysed for the other
    /// entries of the same write.
    pub fn analysed(analysis: &mut Analysis, entry: &Entry, context: &[String]) -> Self {
        let text = text_of(&entry.content);
        let language = analysis.language_of(&text);
        let mut counts = BTreeMap::<String, u32>::new();
        let mut len = 0u32;
        let mut add = |text: &str, weight: u32| {
            for term in analysis.terms(text, language).iter() {
                match counts.get_mut(term.as_str()) {
                    Some(count) => *count += weight,
                    None => {
                        counts.insert(term.clone(), weight);
                    }
                }
                len = len.saturating_add(weight);
            }
        };
        add(&text, TEXT);
        add(&entry.author, AUTHOR);
        for value in metadata_strings(&entry.custom_metadata) {
            add(&value, METADATA);
        }
        for turn in context {
            add(turn, CONTEXT);
        }
        for term in analysis.terms(&entry.author, language).iter() {
            *counts.entry(name_term(term)).or_default() += AUTHOR;
        }
        Self {
            counts: counts.into_iter().collect(),
            len,
        }
    }
}

/// The share of `query_terms` (a query's, see [`Analyzer::query_terms`]) that `entry`'s own
/// fields (text, author, metadata) hold, analysed in `language`: how much of what a query asks
/// a keyword match covers, where its BM25 score cannot say (a name alone, in a long question,
/// may score best of all entries).
pub fn coverage(
    analyzer: &Analyzer,
    query_terms: &[String],
    language: Option<Language>,
    entry: &Entry,
) -> f64 {
    if query_terms.is_empty() {
        return 0.0;
    }
    let mut held = vec![false; query_terms.len()];
    let mut mark = |term: String| {
        if let Some(i) = query_terms.iter().position(|t| *t == term) {
            held[i] = true;
        }
    };
    analyzer.terms(&text_of(&entry.content), language, &mut mark);
    analyzer.terms(&entry.author, language, &mut mark);
    for value in metadata_strings(&entry.custom_metadata) {
        analyzer.terms(&value, language, &mut mark);
    }
    held.iter().filter(|&&h| h).count() as f64 / query_terms.len() as f64
}

/// The term an entry is indexed under for each term of its author's name: `term` behind an
/// `@`, which no analysed word holds (UAX #29 words never contain one), so that a name term
/// never meets a word's.
pub fn name_term(term: &str) -> String {
    format!("@{term}")
}

/// Text analysis for one write, remembering each text's language and terms: a turn of a
/// conversation is indexed as itself and as the context of both its neighbours, and an author
/// recurs on every turn, so each is analysed once per write rather than once per use. The
/// write's language is detected once ([`Analysis::detect_over`]); an analysis that was given
/// no texts to detect it over takes each entry's text as a write of its own.
///
/// A store analyses what a write brings before it plans it ([`Analysis::prepare`], see
/// `plan::prepared`). The PostgreSQL store does so before it takes the scope's row lock, so the
/// lock is held for the planning and the storage, not for the text analysis, and writes of one
/// scope analyse side by side instead of one after the other. The sled store, which plans
/// without a lock and commits only if no other write to the scope committed since its load,
/// does so between a first load and its planning: the window a concurrent commit can spoil
/// stays short, and the entries the scope holds unchanged are not analysed. Either way a write
/// planned again reuses what was analysed.
pub struct Analysis {
    analyzer: Analyzer,
    write: Option<WriteLanguage>,
    /// Each entry text's language, in the write's language.
    languages: HashMap<String, Option<Language>>,
    /// Keyed by text first so that a lookup borrows the text instead of copying it.
    terms: HashMap<String, HashMap<Option<Language>, Arc<[String]>>>,
}

impl Analysis {
    pub fn new(analyzer: Analyzer) -> Self {
        Self {
            analyzer,
            write: None,
            languages: HashMap::new(),
            terms: HashMap::new(),
        }
    }

    /// Whether `text` was analysed, for its language or its terms.
    #[cfg(test)]
    pub fn has_analysed(&self, text: &str) -> bool {
        self.languages.contains_key(text) || self.terms.contains_key(text)
    }

    /// Analyses the fields of `entry` and the turns of its `context` as [`Terms::analysed`]
    /// will, so that it then only reads what is kept.
    pub fn prepare(&mut self, entry: &Entry, context: &[&str]) {
        let text = text_of(&entry.content);
        let language = self.language_of(&text);
        self.terms(&text, language);
        self.terms(&entry.author, language);
        for value in metadata_strings(&entry.custom_metadata) {
            self.terms(&value, language);
        }
        for turn in context {
            self.terms(turn, language);
        }
    }

    /// Whether the write's language is known (see [`Analysis::detect_over`]).
    pub fn has_language(&self) -> bool {
        self.write.is_some()
    }

    /// Detects the language of the entries analysed from now on over their `texts` (see
    /// [`Analyzer::write_language`]).
    pub fn detect_over<S: AsRef<str>>(&mut self, texts: &[S]) {
        self.set_language(self.analyzer.write_language(texts));
    }

    /// Analyses the entries from now on as texts of a write in `write`'s language.
    pub fn set_language(&mut self, write: WriteLanguage) {
        if self.write != Some(write) {
            self.write = Some(write);
            self.languages.clear();
        }
    }

    pub fn analyzer(&self) -> Analyzer {
        self.analyzer
    }

    /// The language of an entry whose text is `text`: the write's (see [`WriteLanguage::of`]).
    fn language_of(&mut self, text: &str) -> Option<Language> {
        if let Some(&language) = self.languages.get(text) {
            return language;
        }
        let language = match &self.write {
            Some(write) => write.of(text),
            None => self.analyzer.language_of(text),
        };
        self.languages.insert(text.to_owned(), language);
        language
    }

    /// The terms of `text` written in `language`, one per occurrence, in order (see
    /// [`Analyzer::terms`]).
    fn terms(&mut self, text: &str, language: Option<Language>) -> Arc<[String]> {
        if let Some(terms) = self.terms.get(text).and_then(|by| by.get(&language)) {
            return Arc::clone(terms);
        }
        let mut terms = Vec::new();
        self.analyzer.terms(text, language, |t| terms.push(t));
        let terms: Arc<[String]> = terms.into();
        self.terms
            .entry(text.to_owned())
            .or_default()
            .insert(language, Arc::clone(&terms));
        terms
    }
}

/// The text of all of `content`'s parts (thoughts included), joined with spaces so that words
/// of adjacent parts stay apart.
pub fn text_of(content: &Content) -> String {
    content
        .parts
        .iter()
        .filter_map(|p| match &p.data {
            Some(part::Data::Text(t)) => Some(t.as_str()),
            _ => None,
        })
        .collect::<Vec<_>>()
        .join(" ")
}

/// Every string value in a JSON text (nested ones too); none when it is not JSON.
fn metadata_strings(json: &str) -> Vec<String> {
    fn walk(value: serde_json::Value, out: &mut Vec<String>) {
        match value {
            serde_json::Value::String(s) => out.push(s),
            serde_json::Value::Array(items) => items.into_iter().for_each(|v| walk(v, out)),
            serde_json::Value::Object(map) => map.into_iter().for_each(|(_, v)| walk(v, out)),
            _ => {}
        }
    }
    let mut out = Vec::new();
    if !json.is_empty() {
        if let Ok(value) = serde_json::from_str(json) {
            walk(value, &mut out);
        }
    }
    out
}

/// BM25's inverse document frequency of a term found in `df` of `n` entries.
pub fn idf(n: f64, df: f64) -> f64 {
    (1.0 + (n - df + 0.5) / (df + 0.5)).ln()
}

/// A term's contribution to an entry's score: it occurs `tf` [`UNIT`]s in an entry of `len`
/// units, where entries average `avg_len` units.
pub fn score(idf: f64, tf: f64, len: f64, avg_len: f64) -> f64 {
    let tf = tf / f64::from(UNIT);
    let norm = K1 * (1.0 - B + B * len / avg_len);
    idf * tf * (K1 + 1.0) / (tf + norm)
}

#[cfg(test)]
mod tests {
    use adk_proto::session::v1::Part;

    use super::*;

    fn entry(author: &str, text: &str, metadata: &str) -> Entry {
        Entry {
            author: author.into(),
            custom_metadata: metadata.into(),
            content: Content {
                role: Some("user".into()),
                parts: vec![Part {
                    data: Some(part::Data::Text(text.into())),
                    ..Part::default()
                }],
            },
            ..Entry::default()
        }
    }

    fn count(terms: &Terms, term: &str) -> u32 {
        terms
            .counts
            .iter()
            .find(|(t, _)| t == term)
            .map_or(0, |(_, c)| *c)
    }

    #[test]
    fn fields_add_up_with_their_weights() {
        let analyzer = Analyzer::default();
        let e = entry(
            "Aisha",
            "Spiders scare me",
            r#"{"topic": "spiders", "n": 3, "tags": ["fear"]}"#,
        );
        let context = ["Are you scared of spiders, Aisha?".to_owned()];
        let terms = Terms::of(&analyzer, &e, &context);
        assert_eq!(count(&terms, "spider"), TEXT + METADATA + CONTEXT);
        assert_eq!(count(&terms, "aisha"), AUTHOR + CONTEXT);
        assert_eq!(count(&terms, "@aisha"), AUTHOR);
        assert_eq!(count(&terms, "@spider"), 0);
        assert_eq!(count(&terms, "fear"), METADATA);
        assert_eq!(count(&terms, "scare"), TEXT + CONTEXT);
        // 3 words of text, 1 of author, 2 of metadata, 6 of context; the name term adds none.
        assert_eq!(terms.len, 3 * TEXT + AUTHOR + 2 * METADATA + 6 * CONTEXT);
    }

    #[test]
    fn a_text_analysed_once_per_write_indexes_as_if_analysed_anew() {
        let analyzer = Analyzer::default();
        let german = "Der Hund meines Nachbarn hat gestern den ganzen Nachmittag gebellt.";
        let english = "My neighbour's dogs were barking all afternoon yesterday.";
        let mut analysis = Analysis::new(analyzer);
        // The German turn is first analysed in German, as itself; as the context of the
        // English turn it is analysed in English ("hund", "nachbarn" stay whole).
        let turns = [entry("", german, ""), entry("", english, "")];
        let contexts = [vec![english.to_owned()], vec![german.to_owned()]];
        let terms: Vec<Terms> = (turns.iter().zip(&contexts))
            .map(|(turn, context)| {
                let terms = Terms::analysed(&mut analysis, turn, context);
                assert_eq!(terms, Terms::of(&analyzer, turn, context));
                terms
            })
            .collect();
        // German stems "gestern"; English keeps it whole.
        assert_eq!(count(&terms[0], "gestern"), 0);
        assert_eq!(count(&terms[1], "gestern"), CONTEXT);
        assert_eq!(count(&terms[1], "dog"), TEXT);
    }

    #[test]
    fn metadata_that_is_not_json_adds_nothing() {
        let analyzer = Analyzer::default();
        let plain = Terms::of(&analyzer, &entry("", "hello", ""), &[]);
        assert_eq!(
            plain,
            Terms::of(&analyzer, &entry("", "hello", "{oops"), &[])
        );
        assert_eq!(plain.len, TEXT);
    }

    #[test]
    fn a_term_in_the_text_outscores_one_in_the_context() {
        let (idf, avg) = (2.0, 10.0 * f64::from(UNIT));
        let len = 10.0 * f64::from(UNIT);
        let own = score(idf, f64::from(TEXT), len, avg);
        let context = score(idf, f64::from(CONTEXT), len, avg);
        assert!(own > context && context > 0.0);
        assert!(own < idf * (K1 + 1.0));
    }
}
