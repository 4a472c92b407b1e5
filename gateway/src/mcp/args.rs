//! The arguments of each tool and of the prompt: what their JSON schemas say (the doc comments
//! are the descriptions a model reads), checked here before any service is asked.

use std::borrow::Cow;

use adk_proto::memory::v1::{
    MemoryFilter, MemoryKind, MetadataCondition, MetadataConditions, MetadataOperator,
};
use schemars::{json_schema, JsonSchema, Schema, SchemaGenerator};
use serde::{de::DeserializeOwned, Deserialize, Deserializer};

use crate::{
    caller::{Caller, Scope},
    error::GatewayError,
    filters::{self, MemoryFilters},
};

/// Longest text a tool accepts (a memory, a turn, a query): a larger argument is refused
/// before anything is written.
pub const MAX_TEXT_BYTES: usize = 32 << 10;

/// A tool's arguments, whose errors name the offending argument (`filters.after: invalid
/// type: integer `3`, expected a string`) so that a model can correct its call; the schema is
/// the arguments' own.
#[derive(Debug)]
pub struct Named<T>(pub T);

impl<'de, T: DeserializeOwned> Deserialize<'de> for Named<T> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        serde_path_to_error::deserialize(deserializer)
            .map(Named)
            .map_err(|e| {
                let path = e.path().to_string();
                let inner = e.into_inner();
                match path.as_str() {
                    "." => inner,
                    _ => serde::de::Error::custom(format!("{path}: {inner}")),
                }
            })
    }
}

impl<T: JsonSchema> JsonSchema for Named<T> {
    fn schema_name() -> Cow<'static, str> {
        T::schema_name()
    }

    fn inline_schema() -> bool {
        T::inline_schema()
    }

    fn json_schema(generator: &mut SchemaGenerator) -> Schema {
        T::json_schema(generator)
    }
}

/// Whose data a call touches. Both may be left out when the caller's token allows one app
/// (or one user); a token limited to one user always acts for that user.
#[derive(Debug, Default, Deserialize, JsonSchema)]
pub struct ScopeArgs {
    /// The agent app; optional when your token allows only one.
    pub app_name: Option<String>,
    /// The user whose memory or sessions to use; optional when your token acts for one user.
    pub user_id: Option<String>,
}

impl ScopeArgs {
    /// The (app, user) the call is about, as the caller may name it ([`Caller::scope`]).
    pub fn of(&self, caller: &Caller) -> Result<Scope, GatewayError> {
        caller.scope(self.app_name.as_deref(), self.user_id.as_deref())
    }
}

#[derive(Debug, Clone, Copy, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum Mode {
    /// Matching words (BM25).
    Keyword,
    /// Similar meaning (needs an embedding model on the server).
    Semantic,
    /// Both, fused.
    Hybrid,
}

#[derive(Debug, Clone, Copy, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum Kind {
    /// Memories written directly or ingested from conversations.
    Raw,
    /// Facts the server generated from conversations.
    Generated,
}

/// Which memories a search, a listing or a purge keeps; every field left out keeps all.
#[derive(Debug, Default, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Filters {
    /// Only memories by this author (e.g. "user").
    pub author: Option<String>,
    /// Only memories from this time on (RFC 3339, e.g. "2026-01-31T00:00:00Z").
    pub after: Option<String>,
    /// Only memories before this time (RFC 3339).
    pub before: Option<String>,
    /// Only raw or only generated memories (default: both).
    pub kind: Option<Kind>,
    /// Only memories of one of these topics (the "topic" key of their metadata).
    pub topics: Option<Vec<String>>,
    /// Conditions on the memories' metadata keys: a list of groups, each a list of conditions
    /// that must all hold; a memory passes when one group holds. One group is the usual case:
    /// [[{"key": "source", "op": "=", "value": "import"}, {"key": "priority", "op": ">=",
    /// "value": 2}]].
    pub metadata: Option<Vec<Vec<Condition>>>,
}

/// One condition on a metadata key.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Condition {
    /// The metadata key (top level of the memory's metadata object).
    pub key: String,
    /// How the key's value compares with `value`.
    pub op: Op,
    /// What the key's value is compared with: a string, a number, true or false, or a time as
    /// an RFC 3339 string; "<", "<=", ">" and ">=" compare numbers and times. Leave it out for
    /// "exists".
    #[serde(default)]
    #[schemars(schema_with = "condition_value")]
    pub value: Option<serde_json::Value>,
}

/// The schema of a condition's value: a JSON string, number or boolean.
fn condition_value(_: &mut SchemaGenerator) -> Schema {
    json_schema!({"type": ["string", "number", "boolean"]})
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, JsonSchema)]
pub enum Op {
    /// Equal.
    #[serde(rename = "=")]
    Equal,
    /// Not equal (an absent key passes).
    #[serde(rename = "!=")]
    NotEqual,
    /// Less than (numbers and times).
    #[serde(rename = "<")]
    Less,
    /// Less than or equal (numbers and times).
    #[serde(rename = "<=")]
    LessOrEqual,
    /// Greater than (numbers and times).
    #[serde(rename = ">")]
    Greater,
    /// Greater than or equal (numbers and times).
    #[serde(rename = ">=")]
    GreaterOrEqual,
    /// The key is present, whatever its value.
    #[serde(rename = "exists")]
    Exists,
}

impl Op {
    fn operator(self) -> MetadataOperator {
        match self {
            Op::Equal => MetadataOperator::Equal,
            Op::NotEqual => MetadataOperator::NotEqual,
            Op::Less => MetadataOperator::Less,
            Op::LessOrEqual => MetadataOperator::LessOrEqual,
            Op::Greater => MetadataOperator::Greater,
            Op::GreaterOrEqual => MetadataOperator::GreaterOrEqual,
            Op::Exists => MetadataOperator::Exists,
        }
    }
}

impl Filters {
    /// The filters of `filters` (absent: keep everything), checked; errors name the argument
    /// (`filters.metadata[0][1].value`).
    pub fn checked(filters: Option<&Filters>) -> Result<MemoryFilters, GatewayError> {
        let Some(f) = filters else {
            return Ok(MemoryFilters::default());
        };
        let any_of = f
            .metadata
            .iter()
            .flatten()
            .enumerate()
            .map(|(g, group)| {
                let all_of = group
                    .iter()
                    .enumerate()
                    .map(|(c, condition)| condition.checked(g, c))
                    .collect::<Result<_, _>>()?;
                Ok(MetadataConditions { all_of })
            })
            .collect::<Result<Vec<_>, GatewayError>>()?;
        let filter = MemoryFilter {
            any_of,
            topics: f.topics.clone().unwrap_or_default(),
        };
        Ok(MemoryFilters {
            filter: Some(filter).filter(|f| *f != MemoryFilter::default()),
            kind: kind(f.kind),
            author: f.author.clone().unwrap_or_default(),
            after: filters::time("filters.after", f.after.as_deref())?,
            before: filters::time("filters.before", f.before.as_deref())?,
            ..MemoryFilters::default()
        })
    }
}

impl Condition {
    /// Condition `c` of group `g` as the service takes it.
    fn checked(&self, g: usize, c: usize) -> Result<MetadataCondition, GatewayError> {
        let invalid = |part: &str, why: String| GatewayError::Invalid {
            field: format!("filters.metadata[{g}][{c}].{part}").into(),
            why,
        };
        if self.key.is_empty() {
            return Err(invalid("key", "must not be empty".into()));
        }
        let value = match (self.op, &self.value) {
            (Op::Exists, None) => None,
            (Op::Exists, Some(_)) => {
                return Err(invalid("value", "must be left out with \"exists\"".into()))
            }
            (_, None) => {
                return Err(invalid(
                    "value",
                    "is required unless op is \"exists\"".into(),
                ))
            }
            (_, Some(v)) => Some(runner_client::filter::json_value(v).ok_or_else(|| {
                invalid(
                    "value",
                    format!("{v} is not a string, a finite number, true or false"),
                )
            })?),
        };
        Ok(MetadataCondition {
            key: self.key.clone(),
            operator: self.op.operator().into(),
            value,
        })
    }
}

/// The kind of memories a call names (`None`: both).
pub fn kind(kind: Option<Kind>) -> MemoryKind {
    match kind {
        None => MemoryKind::Unspecified,
        Some(Kind::Raw) => MemoryKind::Raw,
        Some(Kind::Generated) => MemoryKind::Generated,
    }
}

#[derive(Debug, Deserialize, JsonSchema)]
pub struct SearchMemory {
    /// What to look for, in plain words (a question works).
    pub query: String,
    /// How many memories to return, best first: 1 to 100 (default 10).
    pub limit: Option<u32>,
    /// How to rank (default: keyword; when the server has an embedding model, meaning joins in
    /// where keyword matches are weak).
    pub mode: Option<Mode>,
    pub filters: Option<Filters>,
    /// The memories that were valid at this time (RFC 3339), for a question about the past
    /// ("where did Alice live in 2024?"). Default: now.
    pub as_of: Option<String>,
    /// Also the facts that have been superseded by newer ones (default false).
    pub include_superseded: Option<bool>,
    #[serde(flatten)]
    pub scope: ScopeArgs,
}

#[derive(Debug, Deserialize, JsonSchema)]
pub struct AddMemory {
    /// The fact to remember, as a self-contained sentence ("Alice drinks her coffee black").
    pub text: String,
    /// Optional JSON object stored with the memory and returned with it.
    pub metadata: Option<serde_json::Map<String, serde_json::Value>>,
    /// Who said it (default "user").
    pub author: Option<String>,
    #[serde(flatten)]
    pub scope: ScopeArgs,
}

#[derive(Debug, Deserialize, JsonSchema)]
pub struct ListMemories {
    /// Memories per page: 1 to 100 (default 20).
    pub page_size: Option<u32>,
    /// The `next_page_token` of the previous page, to read on (with the same filters).
    pub page_token: Option<String>,
    pub filters: Option<Filters>,
    /// The memories that were valid at this time (RFC 3339), for a question about the past
    /// ("where did Alice live in 2024?"). Default: now.
    pub as_of: Option<String>,
    /// Also the facts that have been superseded by newer ones (default false).
    pub include_superseded: Option<bool>,
    #[serde(flatten)]
    pub scope: ScopeArgs,
}

#[derive(Debug, Deserialize, JsonSchema)]
pub struct PurgeMemories {
    /// Which of the user's memories to delete; at least one filter is required.
    pub filters: Filters,
    /// Delete the memories that match. Default false: a dry run that only counts them and
    /// shows some; call it first and check what would go.
    pub force: Option<bool>,
    #[serde(flatten)]
    pub scope: ScopeArgs,
}

#[derive(Debug, Deserialize, JsonSchema)]
pub struct DeleteMemory {
    /// The memory's id, as search_memory or list_memories show it. It is never added again.
    pub memory_id: String,
    #[serde(flatten)]
    pub scope: ScopeArgs,
}

#[derive(Debug, Deserialize, JsonSchema)]
pub struct GenerateMemories {
    /// Conversation text to extract facts from (give this or session_id).
    pub text: Option<String>,
    /// A stored session to extract facts from (give this or text).
    pub session_id: Option<String>,
    /// Wait for the facts to be written (default true); false returns the queued job.
    pub wait: Option<bool>,
    #[serde(flatten)]
    pub scope: ScopeArgs,
}

#[derive(Debug, Deserialize, JsonSchema)]
pub struct AppendMemoryStream {
    /// The stream: the id of the conversation the turn belongs to.
    pub stream_id: String,
    /// What was said.
    pub text: String,
    /// The turn's id, unique in the stream: a turn sent again with the same id is not added
    /// twice. Default: a new id (every call adds the turn).
    pub event_id: Option<String>,
    /// Who said it: "user" for the person (the default), or the agent's name.
    pub author: Option<String>,
    #[serde(flatten)]
    pub scope: ScopeArgs,
}

#[derive(Debug, Deserialize, JsonSchema)]
pub struct FlushMemoryStream {
    /// The stream, as append_memory_stream named it.
    pub stream_id: String,
    #[serde(flatten)]
    pub scope: ScopeArgs,
}

#[derive(Debug, Deserialize, JsonSchema)]
pub struct ListSessions {
    /// Sessions per page: 1 to 100 (default 20).
    pub page_size: Option<u32>,
    /// The `next_page_token` of the previous page, to read on.
    pub page_token: Option<String>,
    #[serde(flatten)]
    pub scope: ScopeArgs,
}

#[derive(Debug, Deserialize, JsonSchema)]
pub struct GetSession {
    pub session_id: String,
    /// Only the last N events (default 20; 0 for none).
    pub num_recent_events: Option<u32>,
    #[serde(flatten)]
    pub scope: ScopeArgs,
}

#[derive(Debug, Deserialize, JsonSchema)]
pub struct CreateSession {
    /// The new session's id (default: a fresh one).
    pub session_id: Option<String>,
    /// Initial state, a JSON object (`app:` and `user:` keys are shared, `temp:` keys dropped).
    pub state: Option<serde_json::Map<String, serde_json::Value>>,
    #[serde(flatten)]
    pub scope: ScopeArgs,
}

#[derive(Debug, Deserialize, JsonSchema)]
pub struct AppendEvent {
    pub session_id: String,
    /// Who speaks: "user" for the person, or the agent's name.
    pub author: String,
    /// What was said.
    pub text: String,
    #[serde(flatten)]
    pub scope: ScopeArgs,
}

#[derive(Debug, Deserialize, JsonSchema)]
pub struct ListApps {}

#[derive(Debug, Deserialize, JsonSchema)]
pub struct MemoryContext {
    /// The question or task the memories should help with.
    pub question: String,
    /// The agent app (when your token allows several).
    pub app_name: Option<String>,
    /// The user (when your token acts for several).
    pub user_id: Option<String>,
}

/// `text` when it is not empty and within [`MAX_TEXT_BYTES`].
pub fn text<'a>(field: &'static str, text: &'a str) -> Result<&'a str, GatewayError> {
    if text.trim().is_empty() {
        return Err(GatewayError::Invalid {
            field: field.into(),
            why: "must not be empty".into(),
        });
    }
    if text.len() > MAX_TEXT_BYTES {
        return Err(GatewayError::Invalid {
            field: field.into(),
            why: format!(
                "is {} bytes; at most {MAX_TEXT_BYTES} are accepted",
                text.len()
            ),
        });
    }
    Ok(text)
}

/// A page size or limit within 1..=100 (`None`: the service's default).
pub fn count(field: &'static str, value: Option<u32>) -> Result<i32, GatewayError> {
    match value {
        None => Ok(0),
        Some(n @ 1..=100) => Ok(n as i32),
        Some(n) => Err(GatewayError::Invalid {
            field: field.into(),
            why: format!("{n} is outside 1 to 100"),
        }),
    }
}
