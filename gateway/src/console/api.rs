//! The JSON API the page reads: apps, users, sessions, a session's state and events, memory,
//! health. Handlers only translate between HTTP and [`super::backend`]; entities are rendered
//! by [`runner_client::json`].

use std::{collections::BTreeMap, sync::Arc};

use adk_proto::{
    memory::v1::{delete_memory_request::Target, PurgeMemoriesRequest, SearchMemoryRequest},
    session::v1::Session,
};
use axum::{
    extract::{Path, Query, State},
    http::HeaderMap,
    Json,
};
use serde::{Deserialize, Serialize};
use serde_json::{json, Map, Value};

use runner_client::json;

use crate::filters::{self, MemoryFilters};

use super::{
    backend::{self, EVENTS_PAGE},
    error::ConsoleError,
    logins::{check_write, Caller},
    Console,
};

/// Rows per page of the users and sessions tables.
const ROWS_PAGE: usize = 50;

/// Sessions read to build the users and sessions tables: the most recently updated ones.
const MAX_SESSIONS_READ: usize = 20_000;

/// Memories per page of the memory list.
const MEMORIES_PAGE: i32 = 50;

/// Memories counted for a user's figure.
const MAX_MEMORIES_COUNTED: usize = 10_000;

type ApiResult = Result<Json<Value>, ConsoleError>;

/// `GET /api/health`: both services' health and the console's own figures.
pub async fn health(State(console): State<Arc<Console>>) -> Json<Value> {
    let services = backend::health(&console.backend).await;
    Json(json!({
        "services": services,
        "live_views": console.live.open(),
        "uptime_secs": console.started.elapsed().as_secs(),
    }))
}

/// `GET /api/apps`: the apps this token may see (session-svc's ListApps).
pub async fn apps(caller: Caller) -> ApiResult {
    Ok(Json(json!({ "apps": caller.calls().apps().await? })))
}

#[derive(Deserialize)]
pub struct TableQuery {
    /// Only this user's sessions.
    user: Option<String>,
    /// Only ids (user ids in the users table) starting with this.
    #[serde(default)]
    prefix: String,
    /// 1-based.
    page: Option<usize>,
}

/// The app's sessions (of one user if asked), newest first, and whether the list was cut.
async fn sessions_newest_first(
    caller: &Caller,
    app: &str,
    user: Option<&str>,
) -> Result<(Vec<Session>, bool), ConsoleError> {
    Ok(caller
        .calls()
        .newest_sessions_up_to(app, user, MAX_SESSIONS_READ)
        .await?)
}

/// Page `page` (1-based) of `rows`, with the paging figures.
fn paged(rows: Vec<Value>, page: Option<usize>) -> Value {
    let total = rows.len();
    let pages = total.div_ceil(ROWS_PAGE).max(1);
    let page = page.unwrap_or(1).clamp(1, pages);
    let rows: Vec<Value> = rows
        .into_iter()
        .skip((page - 1) * ROWS_PAGE)
        .take(ROWS_PAGE)
        .collect();
    json!({"rows": rows, "total": total, "page": page, "pages": pages})
}

/// One row of the users table.
#[derive(Serialize)]
struct UserRow {
    user_id: String,
    sessions: usize,
    events: u64,
    last_update_time: Option<String>,
}

/// `GET /api/apps/{app}/users`: the app's users with their session counts, most recently
/// active first, and the app's figures.
pub async fn users(
    caller: Caller,
    Path(app): Path<String>,
    Query(q): Query<TableQuery>,
) -> ApiResult {
    let (sessions, truncated) = sessions_newest_first(&caller, &app, None).await?;
    // Newest first, so a user's first session is their latest activity.
    let mut users: Vec<UserRow> = Vec::new();
    let mut index = BTreeMap::new();
    for s in &sessions {
        let at = *index.entry(s.user_id.as_str()).or_insert_with(|| {
            users.push(UserRow {
                user_id: s.user_id.clone(),
                sessions: 0,
                events: 0,
                last_update_time: s.last_update_time.map(|t| t.to_string()),
            });
            users.len() - 1
        });
        users[at].sessions += 1;
        users[at].events += s.last_sequence;
    }
    let figures = json!({
        "sessions": sessions.len(),
        "users": users.len(),
        "events": users.iter().map(|u| u.events).sum::<u64>(),
        "truncated": truncated,
    });
    let rows = users
        .into_iter()
        .filter(|u| u.user_id.starts_with(&q.prefix))
        .map(|u| json!(u))
        .collect();
    Ok(Json(
        json!({"figures": figures, "table": paged(rows, q.page)}),
    ))
}

/// `GET /api/apps/{app}/sessions`: sessions newest first, filtered by user and id prefix.
pub async fn sessions(
    caller: Caller,
    Path(app): Path<String>,
    Query(q): Query<TableQuery>,
) -> ApiResult {
    let user = q.user.as_deref().filter(|u| !u.is_empty());
    let (sessions, truncated) = sessions_newest_first(&caller, &app, user).await?;
    let rows = sessions
        .iter()
        .filter(|s| s.id.starts_with(&q.prefix))
        .map(|s| {
            json!({
                "id": s.id, "user_id": s.user_id, "events": s.last_sequence,
                "create_time": s.create_time.map(|t| t.to_string()),
                "last_update_time": s.last_update_time.map(|t| t.to_string()),
            })
        })
        .collect();
    Ok(Json(
        json!({"table": paged(rows, q.page), "truncated": truncated}),
    ))
}

/// The merged state split by scope, prefixes removed.
fn state_by_scope(state: &str) -> Value {
    let mut scopes: [(&str, Map<String, Value>); 3] = [
        ("app", Map::new()),
        ("user", Map::new()),
        ("session", Map::new()),
    ];
    if let Value::Object(all) = json::parse_json_text(state) {
        for (key, value) in all {
            let (scope, key) = match (key.strip_prefix("app:"), key.strip_prefix("user:")) {
                (Some(k), _) => (0, k.to_owned()),
                (_, Some(k)) => (1, k.to_owned()),
                _ => (2, key),
            };
            scopes[scope].1.insert(key, value);
        }
    }
    Value::Object(
        scopes
            .into_iter()
            .map(|(name, map)| (name.to_owned(), Value::Object(map)))
            .collect(),
    )
}

/// `GET /api/apps/{app}/users/{user}/sessions/{id}`: the session's figures and state by scope.
pub async fn session(
    caller: Caller,
    Path((app, user, id)): Path<(String, String, String)>,
) -> ApiResult {
    let s = caller.calls().session(&app, &user, &id).await?;
    Ok(Json(json!({
        "id": s.id, "app_name": s.app_name, "user_id": s.user_id,
        "create_time": s.create_time.map(|t| t.to_string()),
        "last_update_time": s.last_update_time.map(|t| t.to_string()),
        "expire_time": s.expire_time.map(|t| t.to_string()),
        "last_sequence": s.last_sequence,
        "page_size": EVENTS_PAGE,
        "state": state_by_scope(&s.state),
    })))
}

#[derive(Deserialize)]
pub struct EventsQuery {
    /// 1-based; page `n` holds sequences `(n-1)*100+1 ..= n*100`.
    page: Option<u64>,
}

/// `GET .../sessions/{id}/events?page=N`: one page of stored events.
pub async fn events(
    caller: Caller,
    Path((app, user, id)): Path<(String, String, String)>,
    Query(q): Query<EventsQuery>,
) -> ApiResult {
    let page = q.page.unwrap_or(1).max(1);
    let after = (page - 1).saturating_mul(u64::from(EVENTS_PAGE));
    let events = caller.calls().events(&app, &user, &id, after).await?;
    Ok(Json(
        json!({"page": page, "events": events.iter().map(json::event).collect::<Vec<_>>()}),
    ))
}

/// The memory page's filters, as the page sends them (query parameters of a search or a
/// listing, fields of a purge); empty fields keep everything.
#[derive(Debug, Default, Deserialize)]
#[serde(default)]
pub struct FilterForm {
    /// Metadata conditions in the CLI's `--filter` syntax, one group per line: a memory passes
    /// when every condition of one line holds.
    filter: String,
    /// Topics, separated by commas.
    topics: String,
    author: String,
    /// RFC 3339.
    after: String,
    /// RFC 3339.
    before: String,
    /// RFC 3339: the memories valid then (empty: now). Searches and listings only.
    as_of: String,
    /// Superseded memories too. Searches and listings only.
    include_superseded: bool,
}

impl FilterForm {
    fn filters(&self) -> Result<MemoryFilters, ConsoleError> {
        let as_of = Some(self.as_of.trim()).filter(|t| !t.is_empty());
        Ok(MemoryFilters::from_text(
            &self.filter,
            &self.topics,
            &self.author,
            &self.after,
            &self.before,
        )?
        .valid_at(filters::time("as_of", as_of)?, self.include_superseded))
    }
}

#[derive(Deserialize)]
pub struct MemoriesQuery {
    #[serde(default)]
    page_token: String,
}

/// `GET .../memories?page_token=&filter=&topics=&author=&after=&before=`: one page of the
/// user's memories that pass the filters, in ingestion order; the first page also counts all
/// of the user's memories.
pub async fn memories(
    caller: Caller,
    Path((app, user)): Path<(String, String)>,
    Query(q): Query<MemoriesQuery>,
    Query(form): Query<FilterForm>,
) -> ApiResult {
    let first = q.page_token.is_empty();
    let page = caller
        .calls()
        .memories(&app, &user, form.filters()?, MEMORIES_PAGE, q.page_token)
        .await?;
    // The user's figure, counted along with the first page.
    let total = if first {
        Some(count_memories(&caller, &app, &user).await?)
    } else {
        None
    };
    Ok(Json(json!({
        "memories": page.memories.iter().map(json::memory_entry).collect::<Vec<_>>(),
        "next_page_token": page.next_page_token,
        "total": total,
    })))
}

/// How many memories the user has, counting up to [`MAX_MEMORIES_COUNTED`] (`"N+"` beyond).
async fn count_memories(caller: &Caller, app: &str, user: &str) -> Result<Value, ConsoleError> {
    let mut counted = 0;
    let mut token = String::new();
    loop {
        let page = caller
            .calls()
            .memories(app, user, MemoryFilters::default(), 100, token)
            .await?;
        counted += page.memories.len();
        if page.next_page_token.is_empty() {
            return Ok(json!(counted));
        }
        if counted >= MAX_MEMORIES_COUNTED {
            return Ok(json!(format!("{counted}+")));
        }
        token = page.next_page_token;
    }
}

#[derive(Deserialize)]
pub struct SearchQuery {
    q: String,
    limit: Option<i32>,
}

/// `GET .../memories/search?q=&limit=&filter=&topics=&author=&after=&before=`: ranked results
/// among the memories that pass the filters, best first.
pub async fn search(
    caller: Caller,
    Path((app, user)): Path<(String, String)>,
    Query(q): Query<SearchQuery>,
    Query(form): Query<FilterForm>,
) -> ApiResult {
    let request = form.filters()?.search(SearchMemoryRequest {
        app_name: app,
        user_id: user,
        query: q.q,
        limit: q.limit.unwrap_or(20),
        ..Default::default()
    });
    let found = caller.calls().search(request).await?;
    // Scores ride along even when 0, unlike in json::memory_entry.
    let rows: Vec<Value> = found
        .iter()
        .map(|m| {
            let mut row = json::memory_entry(m);
            if let Value::Object(o) = &mut row {
                o.insert("score".into(), json!(m.score));
            }
            row
        })
        .collect();
    Ok(Json(json!({ "memories": rows })))
}

#[derive(Deserialize)]
pub struct PurgeForm {
    #[serde(flatten)]
    filters: FilterForm,
    /// Delete; without it, a dry run.
    #[serde(default)]
    force: bool,
}

/// `POST .../memories/purge {"filter", "topics", "author", "after", "before", "force"}`: the
/// user's memories that pass the filters: a dry run (how many, and a sample) unless `force`,
/// which deletes them. The page runs the dry run first and asks for confirmation before the
/// forced one; both must come from the page (see [`check_write`]).
pub async fn purge(
    caller: Caller,
    headers: HeaderMap,
    Path((app, user)): Path<(String, String)>,
    Json(form): Json<PurgeForm>,
) -> ApiResult {
    check_write(&headers)?;
    let request = form.filters.filters()?.purge(PurgeMemoriesRequest {
        app_name: app,
        user_id: user,
        force: form.force,
        ..Default::default()
    })?;
    let purged = caller.calls().purge(request).await?;
    Ok(Json(json!({
        "count": purged.count,
        "deleted": form.force,
        "operation_id": purged.operation_id,
        "sample": purged.sample.iter().map(json::memory_entry).collect::<Vec<_>>(),
    })))
}

#[derive(Deserialize)]
pub struct RevisionsQuery {
    memory_id: String,
}

/// `GET .../memories/revisions?memory_id=`: the memory's history, oldest first.
pub async fn revisions(
    caller: Caller,
    Path((app, user)): Path<(String, String)>,
    Query(q): Query<RevisionsQuery>,
) -> ApiResult {
    let revisions = caller.calls().revisions(&app, &user, &q.memory_id).await?;
    Ok(Json(json!({
        "revisions": revisions.iter().map(json::memory_revision).collect::<Vec<_>>(),
    })))
}

#[derive(Deserialize)]
pub struct RollbackForm {
    memory_id: String,
    revision_id: String,
}

/// `POST .../memories/rollback {"memory_id", "revision_id"}`: the page asks for confirmation
/// first; the request must come from the page (see [`check_write`]).
pub async fn rollback(
    caller: Caller,
    headers: HeaderMap,
    Path((app, user)): Path<(String, String)>,
    Json(form): Json<RollbackForm>,
) -> ApiResult {
    check_write(&headers)?;
    let revision = caller
        .calls()
        .rollback(&app, &user, form.memory_id, form.revision_id)
        .await?;
    Ok(Json(
        json!({ "revision": revision.as_ref().map(json::memory_revision) }),
    ))
}

#[derive(Deserialize)]
pub struct DeleteForm {
    memory_id: Option<String>,
    session_id: Option<String>,
}

/// `POST .../memories/delete {"memory_id"} | {"session_id"}`: the page asks for confirmation
/// first; the request must come from the page (see [`check_write`]).
pub async fn delete_memory(
    caller: Caller,
    headers: HeaderMap,
    Path((app, user)): Path<(String, String)>,
    Json(form): Json<DeleteForm>,
) -> ApiResult {
    check_write(&headers)?;
    let target = match (form.memory_id, form.session_id) {
        (Some(id), None) if !id.is_empty() => Target::MemoryId(id),
        (None, Some(id)) if !id.is_empty() => Target::SessionId(id),
        _ => {
            return Err(ConsoleError::BadRequest {
                field: "memory_id",
                reason: "give exactly one non-empty memory_id or session_id".into(),
            })
        }
    };
    let deleted = caller.calls().delete_memory(&app, &user, target).await?;
    Ok(Json(json!({ "deleted": deleted })))
}

/// `GET .../memories/streams`: the user's event streams holding buffered events, by id.
pub async fn streams(caller: Caller, Path((app, user)): Path<(String, String)>) -> ApiResult {
    let streams = caller.calls().streams(&app, &user).await?;
    Ok(Json(json!({
        "streams": streams.iter().map(json::memory_stream).collect::<Vec<_>>(),
    })))
}

#[derive(Deserialize)]
pub struct FlushForm {
    stream_id: String,
}

/// `POST .../memories/streams/flush {"stream_id"}`: generation from the stream's buffered
/// events now; the job started (`null` when the stream held none). No confirmation: nothing is
/// lost. The request must come from the page (see [`check_write`]).
pub async fn flush_stream(
    caller: Caller,
    headers: HeaderMap,
    Path((app, user)): Path<(String, String)>,
    Json(form): Json<FlushForm>,
) -> ApiResult {
    check_write(&headers)?;
    let job = caller
        .calls()
        .flush_stream(&app, &user, form.stream_id)
        .await?;
    Ok(Json(json!({
        "job": job.map(|j| json!({
            "id": j.id,
            "state": j.state().as_str_name().trim_start_matches("GENERATION_STATE_").to_lowercase(),
        })),
    })))
}
