//! The generation model: an OpenAI-compatible `POST {BASE_URL}/chat/completions` endpoint asked
//! for structured output (a JSON schema as `response_format`), in two calls per job at most:
//! - **extraction**: the job's new events (with their times) in, facts (topic, text, source
//!   events, and when each became true, if the conversation tells) out;
//! - **consolidation**: those facts and the candidate memories in (only the ones the store's
//!   search found for them), one decision per fact out: add, update a memory (refine it),
//!   supersede a memory (it is no longer true: the fact is added, and the memory kept as
//!   history, its validity closed), or keep (already known).
//!
//! Every answer is checked whole before anything is used: a malformed one (not JSON, not the
//! schema, an unknown topic, memory id or event id, a fact decided twice) fails the call as
//! [`GenerateError::Malformed`], so nothing of it is written.

use std::collections::{HashMap, HashSet};

use metrics::counter;
use prost_types::Timestamp;
use serde::Deserialize;
use serde_json::{json, Value};

use super::{topics::Topic, GenerateError};
use crate::endpoint::{excerpt, Client, Failure};

/// Longest fact accepted, in characters.
pub const MAX_FACT_CHARS: usize = 1000;

/// Most facts taken from one extraction.
pub const MAX_FACTS: usize = 50;

/// One turn of the conversation, as the model reads it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Turn {
    pub event_id: String,
    pub author: String,
    pub text: String,
    /// The event's timestamp, if it has one.
    pub time: Option<Timestamp>,
}

/// A fact extracted from the turns, or given by the caller.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Fact {
    /// Empty for a caller's fact without one.
    pub topic: String,
    pub text: String,
    pub source_event_ids: Vec<String>,
    /// The caller's JSON object text for the memory's metadata; empty for an extracted fact.
    pub custom_metadata: String,
    /// When the fact became true, as the model extracted it or the caller gave it.
    pub valid_from: Option<Timestamp>,
}

/// A generated memory the model may update, delete or keep.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Candidate {
    pub memory_id: String,
    pub text: String,
    /// When it became true, if known.
    pub valid_from: Option<Timestamp>,
}

/// What to do with one fact.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Decision {
    Add {
        text: String,
    },
    /// The fact refines `memory_id`, which stays true: its text becomes `text`.
    Update {
        memory_id: String,
        text: String,
    },
    /// The fact contradicts `memory_id`, which is no longer true: `text` is added, and the
    /// memory's validity closed when the fact became true.
    Supersede {
        memory_id: String,
        text: String,
    },
    Keep,
}

/// The model client. Cheap to clone.
#[derive(Debug, Clone)]
pub struct ChatModel {
    client: Client,
}

const EXTRACT_SYSTEM: &str = "You extract facts worth remembering about the user from a \
conversation. Only facts the conversation states, each one short, self-contained and in the \
third person (\"The user prefers window seats\"). Only the listed topics. Cite the ids of the \
events each fact comes from. valid_from is when the fact became true, as an RFC 3339 time \
(\"2026-03-01T00:00:00Z\"): the time the conversation gives for it, else the time of the \
event that states it; null when neither is known. No fact at all is a valid answer.";

const CONSOLIDATE_SYSTEM: &str = "You keep a user's memory small and true. For each new fact, \
compare it with the existing memories and decide exactly one action: \"add\" (new information: \
text is the fact), \"update\" (it refines memory_id, which stays true: text is the merged \
fact), \"supersede\" (it contradicts memory_id, which was true until the fact became true and \
no longer is, as after a move or a change of mind: text is the new fact; memory_id is kept as \
history) or \"keep\" (memory_id already says it). Use an empty memory_id or text where the \
action needs none.";

/// Parses the `choices[0].message.content` of a chat completion as JSON, counting its tokens.
fn content_json(bytes: &[u8]) -> Result<Value, String> {
    #[derive(Deserialize)]
    struct Completion {
        choices: Vec<Choice>,
        #[serde(default)]
        usage: Option<Usage>,
    }
    #[derive(Deserialize)]
    struct Choice {
        message: Message,
    }
    #[derive(Deserialize)]
    struct Message {
        content: Option<String>,
    }
    #[derive(Deserialize)]
    struct Usage {
        #[serde(default)]
        prompt_tokens: u64,
        #[serde(default)]
        completion_tokens: u64,
    }
    let completion: Completion = serde_json::from_slice(bytes)
        .map_err(|e| format!("{e} in {}", excerpt(&String::from_utf8_lossy(bytes))))?;
    if let Some(usage) = completion.usage {
        counter!("memory_generation_tokens_total", "kind" => "prompt")
            .increment(usage.prompt_tokens);
        counter!("memory_generation_tokens_total", "kind" => "completion")
            .increment(usage.completion_tokens);
    }
    let content = completion
        .choices
        .into_iter()
        .next()
        .and_then(|c| c.message.content)
        .ok_or("the answer has no choices[0].message.content")?;
    serde_json::from_str(&content)
        .map_err(|e| format!("the content is not JSON: {e} in {}", excerpt(&content)))
}

impl ChatModel {
    pub fn new(client: Client) -> Self {
        Self { client }
    }

    pub fn base_url(&self) -> &str {
        &self.client.endpoint().base_url
    }

    /// One structured call: the JSON the model answered under the schema `name`.
    async fn call(
        &self,
        system: &str,
        user: String,
        name: &str,
        schema: Value,
    ) -> Result<Value, GenerateError> {
        let body = json!({
            "model": self.client.endpoint().model,
            "temperature": 0,
            "messages": [
                {"role": "system", "content": system},
                {"role": "user", "content": user},
            ],
            "response_format": {
                "type": "json_schema",
                "json_schema": {"name": name, "strict": true, "schema": schema},
            },
        });
        counter!("memory_generation_model_calls_total", "call" => name.to_owned()).increment(1);
        self.client
            .post(&body, content_json)
            .await
            .map_err(|failure| self.error(failure))
    }

    fn error(&self, failure: Failure) -> GenerateError {
        let endpoint = self.base_url().to_owned();
        match failure {
            Failure::Unavailable(reason) => GenerateError::Unavailable { endpoint, reason },
            Failure::Refused(reason) => GenerateError::Refused { endpoint, reason },
            Failure::Malformed(reason) => GenerateError::Malformed { endpoint, reason },
        }
    }

    fn malformed(&self, reason: impl Into<String>) -> GenerateError {
        GenerateError::Malformed {
            endpoint: self.base_url().to_owned(),
            reason: reason.into(),
        }
    }

    /// The facts of `turns` under `topics`.
    pub async fn extract(
        &self,
        turns: &[Turn],
        topics: &[Topic],
    ) -> Result<Vec<Fact>, GenerateError> {
        let labels: Vec<&str> = topics.iter().map(|t| t.label.as_str()).collect();
        let schema = json!({
            "type": "object",
            "additionalProperties": false,
            "required": ["facts"],
            "properties": {"facts": {"type": "array", "items": {
                "type": "object",
                "additionalProperties": false,
                "required": ["topic", "fact", "source_event_ids", "valid_from"],
                "properties": {
                    "topic": {"type": "string", "enum": labels},
                    "fact": {"type": "string"},
                    "source_event_ids": {"type": "array", "items": {"type": "string"}},
                    "valid_from": {"type": ["string", "null"]},
                },
            }}},
        });
        let mut user = String::from("Topics:\n");
        for topic in topics {
            user.push_str(&format!("- {}: {}\n", topic.label, topic.description));
        }
        user.push_str("\nConversation ([event id, time] author: text):\n");
        for turn in turns {
            let time = turn
                .time
                .map_or_else(|| "time unknown".to_owned(), |t| t.to_string());
            user.push_str(&format!(
                "[{}, {time}] {}: {}\n",
                turn.event_id, turn.author, turn.text
            ));
        }
        let answer = self.call(EXTRACT_SYSTEM, user, "facts", schema).await?;
        self.check_facts(answer, turns, &labels)
    }

    fn check_facts(
        &self,
        answer: Value,
        turns: &[Turn],
        labels: &[&str],
    ) -> Result<Vec<Fact>, GenerateError> {
        #[derive(Deserialize)]
        #[serde(deny_unknown_fields)]
        struct Answer {
            facts: Vec<Item>,
        }
        #[derive(Deserialize)]
        #[serde(deny_unknown_fields)]
        struct Item {
            topic: String,
            fact: String,
            source_event_ids: Vec<String>,
            valid_from: Option<String>,
        }
        let answer: Answer = serde_json::from_value(answer)
            .map_err(|e| self.malformed(format!("the facts do not follow the schema: {e}")))?;
        if answer.facts.len() > MAX_FACTS {
            return Err(
                self.malformed(format!("{} facts, at most {MAX_FACTS}", answer.facts.len()))
            );
        }
        let ids: HashSet<&str> = turns.iter().map(|t| t.event_id.as_str()).collect();
        let mut facts = Vec::with_capacity(answer.facts.len());
        for (i, item) in answer.facts.into_iter().enumerate() {
            let text = item.fact.trim();
            if text.is_empty() || text.chars().count() > MAX_FACT_CHARS {
                return Err(self.malformed(format!(
                    "facts[{i}].fact must have 1 to {MAX_FACT_CHARS} characters"
                )));
            }
            if !labels.contains(&item.topic.as_str()) {
                return Err(self.malformed(format!(
                    "facts[{i}].topic {:?} is not one of {}",
                    item.topic,
                    labels.join(", ")
                )));
            }
            if let Some(unknown) = item
                .source_event_ids
                .iter()
                .find(|id| !ids.contains(id.as_str()))
            {
                return Err(self.malformed(format!(
                    "facts[{i}].source_event_ids names {unknown:?}, not an event of the conversation"
                )));
            }
            let valid_from = match item.valid_from.as_deref().map(str::trim) {
                None | Some("") => None,
                Some(time) => Some(time.parse::<Timestamp>().map_err(|_| {
                    self.malformed(format!(
                        "facts[{i}].valid_from {time:?} is not an RFC 3339 time"
                    ))
                })?),
            };
            facts.push(Fact {
                topic: item.topic,
                text: text.to_owned(),
                source_event_ids: item.source_event_ids,
                custom_metadata: String::new(),
                valid_from,
            });
        }
        Ok(facts)
    }

    /// One decision per fact, in fact order.
    pub async fn consolidate(
        &self,
        facts: &[Fact],
        candidates: &[Candidate],
    ) -> Result<Vec<Decision>, GenerateError> {
        let schema = json!({
            "type": "object",
            "additionalProperties": false,
            "required": ["decisions"],
            "properties": {"decisions": {"type": "array", "items": {
                "type": "object",
                "additionalProperties": false,
                "required": ["fact", "action", "memory_id", "text"],
                "properties": {
                    "fact": {"type": "integer"},
                    "action": {"type": "string", "enum": ["add", "update", "supersede", "keep"]},
                    "memory_id": {"type": "string"},
                    "text": {"type": "string"},
                },
            }}},
        });
        let since = |t: &Option<Timestamp>| t.map(|t| format!(" (since {t})")).unwrap_or_default();
        let mut user = String::from("Existing memories (memory_id: text):\n");
        for c in candidates {
            user.push_str(&format!(
                "{}: {}{}\n",
                c.memory_id,
                c.text,
                since(&c.valid_from)
            ));
        }
        user.push_str("\nNew facts (fact number: text):\n");
        for (i, fact) in facts.iter().enumerate() {
            user.push_str(&format!("{i}: {}{}\n", fact.text, since(&fact.valid_from)));
        }
        let answer = self
            .call(CONSOLIDATE_SYSTEM, user, "decisions", schema)
            .await?;
        self.check_decisions(answer, facts.len(), candidates)
    }

    fn check_decisions(
        &self,
        answer: Value,
        facts: usize,
        candidates: &[Candidate],
    ) -> Result<Vec<Decision>, GenerateError> {
        #[derive(Deserialize)]
        #[serde(deny_unknown_fields)]
        struct Answer {
            decisions: Vec<Item>,
        }
        #[derive(Deserialize)]
        #[serde(deny_unknown_fields)]
        struct Item {
            fact: usize,
            action: String,
            memory_id: String,
            text: String,
        }
        let answer: Answer = serde_json::from_value(answer)
            .map_err(|e| self.malformed(format!("the decisions do not follow the schema: {e}")))?;
        let known: HashSet<&str> = candidates.iter().map(|c| c.memory_id.as_str()).collect();
        let mut decided: HashMap<usize, Decision> = HashMap::new();
        let mut targeted = HashSet::new();
        for (i, item) in answer.decisions.into_iter().enumerate() {
            let at = format!("decisions[{i}]");
            if item.fact >= facts {
                return Err(self.malformed(format!("{at}.fact {} is not a fact number", item.fact)));
            }
            let memory_id = item.memory_id.trim().to_owned();
            let text = item.text.trim().to_owned();
            let target = |action: &str| -> Result<String, GenerateError> {
                if !known.contains(memory_id.as_str()) {
                    return Err(self.malformed(format!(
                        "{at}: {action} names memory_id {memory_id:?}, not an existing memory"
                    )));
                }
                Ok(memory_id.clone())
            };
            let needs_text = |action: &str| -> Result<String, GenerateError> {
                if text.is_empty() || text.chars().count() > MAX_FACT_CHARS {
                    return Err(self.malformed(format!(
                        "{at}: {action} needs a text of 1 to {MAX_FACT_CHARS} characters"
                    )));
                }
                Ok(text.clone())
            };
            let decision = match item.action.as_str() {
                "add" => Decision::Add {
                    text: needs_text("add")?,
                },
                "update" => Decision::Update {
                    memory_id: target("update")?,
                    text: needs_text("update")?,
                },
                "supersede" => Decision::Supersede {
                    memory_id: target("supersede")?,
                    text: needs_text("supersede")?,
                },
                "keep" => Decision::Keep,
                other => {
                    return Err(self.malformed(format!(
                        "{at}.action {other:?} is not add, update, supersede or keep"
                    )))
                }
            };
            if let Decision::Update { memory_id, .. } | Decision::Supersede { memory_id, .. } =
                &decision
            {
                if !targeted.insert(memory_id.clone()) {
                    return Err(
                        self.malformed(format!("{at}: memory {memory_id} is changed twice"))
                    );
                }
            }
            if decided.insert(item.fact, decision).is_some() {
                return Err(self.malformed(format!("{at}: fact {} is decided twice", item.fact)));
            }
        }
        (0..facts)
            .map(|i| {
                decided
                    .remove(&i)
                    .ok_or_else(|| self.malformed(format!("fact {i} has no decision")))
            })
            .collect()
    }
}
