//! A session and a user's memory as MCP resources:
//! `adk://apps/{app_name}/users/{user_id}/sessions/{session_id}` (state and recent events) and
//! `adk://apps/{app_name}/users/{user_id}/memory` (the user's memories). A URI names its scope
//! outright, so it is checked against the caller's grant like any tool argument.

use adk_proto::memory::v1::ListMemoriesRequest;
use percent_encoding::{percent_decode_str, utf8_percent_encode, AsciiSet, NON_ALPHANUMERIC};
use rmcp::model::{
    ListResourcesResult, PaginatedRequestParams, ReadResourceResult, Resource, ResourceContents,
    ResourceTemplate,
};

use super::{tools, Gateway};
use crate::{caller::Caller, error::GatewayError};

const SCHEME: &str = "adk://apps/";

/// Events a session resource shows (the most recent ones).
const RESOURCE_EVENTS: u32 = 100;

/// Sessions listed as resources per app, at most.
const LISTED_SESSIONS: i32 = 100;

pub fn templates() -> Vec<ResourceTemplate> {
    vec![
        ResourceTemplate::new(
            "adk://apps/{app_name}/users/{user_id}/sessions/{session_id}",
            "session",
        )
        .with_description("A conversation: its state and its last 100 events")
        .with_mime_type("text/plain"),
        ResourceTemplate::new("adk://apps/{app_name}/users/{user_id}/memory", "memory")
            .with_description("What is remembered about the user (the first 100 memories)")
            .with_mime_type("text/plain"),
    ]
}

/// What a resource URI names.
#[derive(Debug, PartialEq, Eq)]
enum Target {
    Session {
        app: String,
        user: String,
        session: String,
    },
    Memory {
        app: String,
        user: String,
    },
}

/// Parses a resource URI; its segments are percent-encoded.
fn parse(uri: &str) -> Option<Target> {
    let rest = uri.strip_prefix(SCHEME)?;
    let segments: Vec<String> = rest.split('/').map(percent_decode).collect::<Option<_>>()?;
    match segments.as_slice() {
        [app, users, user, sessions, session] if users == "users" && sessions == "sessions" => {
            Some(Target::Session {
                app: app.clone(),
                user: user.clone(),
                session: session.clone(),
            })
        }
        [app, users, user, memory] if users == "users" && memory == "memory" => {
            Some(Target::Memory {
                app: app.clone(),
                user: user.clone(),
            })
        }
        _ => None,
    }
}

/// What a URI segment may hold unencoded (RFC 3986's unreserved characters).
const SEGMENT: &AsciiSet = &NON_ALPHANUMERIC
    .remove(b'-')
    .remove(b'_')
    .remove(b'.')
    .remove(b'~');

fn percent_decode(segment: &str) -> Option<String> {
    let decoded = percent_decode_str(segment).decode_utf8().ok()?;
    // A stray `%` that is not an escape is not a URI this server made.
    let canonical = !segment.contains('%') || percent_encode(&decoded) == segment;
    (canonical && !decoded.is_empty()).then(|| decoded.into_owned())
}

fn percent_encode(segment: &str) -> String {
    utf8_percent_encode(segment, SEGMENT).to_string()
}

fn uri(app: &str, user: &str, tail: &str) -> String {
    format!(
        "{SCHEME}{}/users/{}/{tail}",
        percent_encode(app),
        percent_encode(user)
    )
}

impl Gateway {
    /// The resources of the caller's user, in every app it may use: its memory and its
    /// sessions. A caller acting for several users lists none (the templates name them).
    pub(super) async fn resources(
        &self,
        caller: &Caller,
        _page: Option<PaginatedRequestParams>,
    ) -> Result<ListResourcesResult, GatewayError> {
        let mut resources = Vec::new();
        for app in self.backend.apps(caller).await? {
            let Ok(scope) = caller.scope(Some(&app), None) else {
                continue;
            };
            resources.push(
                Resource::new(
                    uri(&app, &scope.user, "memory"),
                    format!("memory of {}", scope.user),
                )
                .with_mime_type("text/plain"),
            );
            let request = adk_proto::session::v1::ListSessionsRequest {
                app_name: scope.app.clone(),
                user_id: Some(scope.user.clone()),
                page_size: LISTED_SESSIONS,
                page_token: String::new(),
                ..Default::default()
            };
            let sessions = self
                .backend
                .session_call(caller, "ListSessions", request, |mut c, r| async move {
                    c.list_sessions(r).await
                })
                .await?
                .sessions;
            for s in sessions {
                let tail = format!("sessions/{}", percent_encode(&s.id));
                resources.push(
                    Resource::new(uri(&app, &scope.user, &tail), format!("session {}", s.id))
                        .with_mime_type("text/plain"),
                );
            }
        }
        Ok(ListResourcesResult::with_all_items(resources))
    }

    pub(super) async fn read(
        &self,
        caller: &Caller,
        resource: &str,
    ) -> Result<ReadResourceResult, GatewayError> {
        let target = parse(resource).ok_or_else(|| GatewayError::Invalid {
            field: "uri".into(),
            why: format!(
                "{resource:?} is not adk://apps/APP/users/USER/sessions/SESSION or \
                 adk://apps/APP/users/USER/memory"
            ),
        })?;
        let text = match target {
            Target::Session { app, user, session } => {
                let scope = caller.scope(Some(&app), Some(&user))?;
                let found = self
                    .read_session(caller, &scope.app, &scope.user, &session, RESOURCE_EVENTS)
                    .await?;
                tools::session_text(&found)
            }
            Target::Memory { app, user } => {
                let scope = caller.scope(Some(&app), Some(&user))?;
                let request = ListMemoriesRequest {
                    app_name: scope.app,
                    user_id: scope.user,
                    page_size: 100,
                    ..Default::default()
                };
                let memories = self
                    .backend
                    .memory_call(caller, "ListMemories", request, |mut c, r| async move {
                        c.list_memories(r).await
                    })
                    .await?
                    .memories;
                tools::memories_text(&memories, "No memories.")
            }
        };
        Ok(ReadResourceResult::new(vec![ResourceContents::text(
            text, resource,
        )]))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn uris_round_trip_and_never_alias() {
        let u = uri(
            "a/b",
            "ali ce",
            &format!("sessions/{}", percent_encode("s%1")),
        );
        assert_eq!(u, "adk://apps/a%2Fb/users/ali%20ce/sessions/s%251");
        assert_eq!(
            parse(&u),
            Some(Target::Session {
                app: "a/b".into(),
                user: "ali ce".into(),
                session: "s%1".into()
            })
        );
        assert_eq!(parse("adk://apps/a/users/b/memory/x"), None);
        assert_eq!(parse("adk://apps/a/users//memory"), None);
        assert_eq!(parse("adk://apps/a/users/%zz/memory"), None);
    }
}
