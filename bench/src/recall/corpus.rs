//! The recall corpus on disk: `corpus.jsonl` (what is ingested) and `questions.jsonl` (what is
//! asked), as written by `bench/recall/generate.py`, loaded and checked for consistency.

use std::{
    collections::{HashMap, HashSet},
    path::Path,
};

use serde::Deserialize;

use crate::Result;

/// One line of `corpus.jsonl`.
#[derive(Debug, Clone, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum Record {
    /// A session, ingested by value with AddSessionToMemory.
    Session {
        user: String,
        session_id: String,
        events: Vec<Turn>,
    },
    /// Entries written directly with AddMemory.
    Memories { user: String, memories: Vec<Turn> },
}

/// A turn of a session, or a memory entry.
#[derive(Debug, Clone, Deserialize)]
pub struct Turn {
    pub id: String,
    pub author: String,
    pub text: String,
    /// RFC 3339.
    pub timestamp: String,
    /// JSON object (memory entries only).
    #[serde(default)]
    pub custom_metadata: Option<serde_json::Map<String, serde_json::Value>>,
}

/// One line of `questions.jsonl`.
#[derive(Debug, Clone, Deserialize)]
pub struct Question {
    pub id: String,
    pub user: String,
    pub kind: String,
    pub question: String,
    /// The ids of the turns or entries that answer it.
    pub answers: Vec<String>,
    /// The bank item it was written from (`fact-07`, `note-03`), for [`Split`].
    #[serde(default)]
    pub source: Option<String>,
}

/// Which questions are asked: settings are chosen on `Dev` (the even-numbered bank items) of one
/// generator seed's corpus and reported on `HeldOut` (the odd ones) of another's, so that the
/// reported figures come from neither the conversations nor the question wordings they were
/// chosen on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Split {
    All,
    Dev,
    HeldOut,
}

impl std::str::FromStr for Split {
    type Err = String;

    fn from_str(s: &str) -> std::result::Result<Self, String> {
        match s {
            "all" => Ok(Self::All),
            "dev" => Ok(Self::Dev),
            "held-out" => Ok(Self::HeldOut),
            _ => Err(format!("--split {s:?}: expected all, dev or held-out")),
        }
    }
}

impl Split {
    /// Whether `q` belongs to this split; a question without a numbered source belongs to none
    /// but `All`.
    fn admits(self, q: &Question) -> Result<bool> {
        let item = || -> Result<u64> {
            let source = q.source.as_deref().unwrap_or_default();
            source
                .rsplit_once('-')
                .and_then(|(_, n)| n.parse().ok())
                .ok_or_else(|| {
                    format!("question {}: source {source:?} has no item number", q.id).into()
                })
        };
        Ok(match self {
            Self::All => true,
            Self::Dev => item()? % 2 == 0,
            Self::HeldOut => item()? % 2 == 1,
        })
    }
}

#[derive(Debug, Clone)]
pub struct Corpus {
    pub records: Vec<Record>,
    pub questions: Vec<Question>,
    /// Text of every turn, by id (to show what a search found).
    pub texts: HashMap<String, String>,
}

impl Corpus {
    /// Reads `dir/corpus.jsonl` and `dir/questions.jsonl`. Fails on a malformed line, a duplicate
    /// id, a question without answers, or an answer that is not a turn of the question's user.
    pub fn load(dir: &Path) -> Result<Self> {
        let records: Vec<Record> = read_lines(&dir.join("corpus.jsonl"))?;
        let questions: Vec<Question> = read_lines(&dir.join("questions.jsonl"))?;
        Self::new(records, questions)
    }

    pub fn new(records: Vec<Record>, questions: Vec<Question>) -> Result<Self> {
        let mut owner: HashMap<&str, &str> = HashMap::new();
        let mut texts = HashMap::new();
        for record in &records {
            let (user, turns) = match record {
                Record::Session { user, events, .. } => (user, events),
                Record::Memories { user, memories } => (user, memories),
            };
            for turn in turns {
                if owner.insert(&turn.id, user).is_some() {
                    return Err(format!("corpus: turn id {} appears twice", turn.id).into());
                }
                texts.insert(turn.id.clone(), turn.text.clone());
            }
        }
        let mut seen = HashSet::new();
        for q in &questions {
            if !seen.insert(&q.id) {
                return Err(format!("questions: id {} appears twice", q.id).into());
            }
            if q.answers.is_empty() {
                return Err(format!("question {}: no answers", q.id).into());
            }
            for a in &q.answers {
                if owner.get(a.as_str()) != Some(&q.user.as_str()) {
                    return Err(format!(
                        "question {}: answer {a} is not a turn of user {}",
                        q.id, q.user
                    )
                    .into());
                }
            }
        }
        Ok(Self {
            records,
            questions,
            texts,
        })
    }

    /// Keeps only the questions of `split` (every turn is still ingested).
    pub fn keep(&mut self, split: Split) -> Result<()> {
        let mut kept = Vec::with_capacity(self.questions.len());
        for q in self.questions.drain(..) {
            if split.admits(&q)? {
                kept.push(q);
            }
        }
        self.questions = kept;
        Ok(())
    }

    /// Turns ingested (session events and memory entries).
    pub fn turns(&self) -> usize {
        self.texts.len()
    }
}

fn read_lines<T: serde::de::DeserializeOwned>(path: &Path) -> Result<Vec<T>> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| format!("cannot read {}: {e}", path.display()))?;
    text.lines()
        .enumerate()
        .filter(|(_, line)| !line.trim().is_empty())
        .map(|(n, line)| {
            serde_json::from_str(line)
                .map_err(|e| format!("{}:{}: {e}", path.display(), n + 1).into())
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn turn(id: &str) -> Turn {
        Turn {
            id: id.into(),
            author: "A".into(),
            text: "t".into(),
            timestamp: "2026-03-02T18:00:00Z".into(),
            custom_metadata: None,
        }
    }

    fn question(user: &str, answers: &[&str]) -> Question {
        Question {
            id: "q1".into(),
            user: user.into(),
            kind: "single_hop".into(),
            question: "?".into(),
            answers: answers.iter().map(|s| s.to_string()).collect(),
            source: None,
        }
    }

    fn records() -> Vec<Record> {
        vec![
            Record::Session {
                user: "u".into(),
                session_id: "s".into(),
                events: vec![turn("e1"), turn("e2")],
            },
            Record::Memories {
                user: "v".into(),
                memories: vec![turn("n1")],
            },
        ]
    }

    #[test]
    fn answers_must_be_turns_of_the_users_own_memory() {
        assert!(Corpus::new(records(), vec![question("u", &["e1", "e2"])]).is_ok());
        let err = Corpus::new(records(), vec![question("u", &["n1"])]).unwrap_err();
        assert!(
            err.to_string()
                .contains("answer n1 is not a turn of user u"),
            "{err}"
        );
        assert!(Corpus::new(records(), vec![question("u", &["e9"])]).is_err());
        assert!(Corpus::new(records(), vec![question("u", &[])]).is_err());
    }

    #[test]
    fn duplicate_ids_are_refused() {
        let mut r = records();
        r.push(Record::Memories {
            user: "u".into(),
            memories: vec![turn("e1")],
        });
        assert!(Corpus::new(r, vec![]).is_err());
    }

    #[test]
    fn the_checked_in_corpus_is_consistent() {
        let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("recall");
        let corpus = Corpus::load(&dir).unwrap();
        assert!(corpus.turns() > 2000, "{} turns", corpus.turns());
        let kinds: HashSet<&str> = corpus.questions.iter().map(|q| q.kind.as_str()).collect();
        for kind in [
            "single_hop",
            "speaker",
            "when",
            "adjacent",
            "paraphrase",
            "note",
        ] {
            assert!(kinds.contains(kind), "no {kind} question");
        }
    }
}
