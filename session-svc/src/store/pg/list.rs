//! ListSessions: one page of an app's or a user's sessions, in the order of their last update,
//! with the state shown beside each, read in one snapshot.

use std::collections::HashMap;

use adk_proto::session::v1::Session;
use prost_types::Timestamp;
use tokio_postgres::types::ToSql;

use super::{
    read::{keep_newest, read_snapshot, record, session, shared_entries, APP_STATE, RECORD},
    to_i64, PgSessionStore,
};
use crate::{
    error::{Result, SessionError},
    state::{self, Entry},
    store::{
        token::{SessionListing, SessionPlace},
        Page, SessionKey,
    },
    time::now,
};

pub(super) async fn list(
    store: &PgSessionStore,
    app_name: &str,
    user_id: Option<&str>,
    page_size: usize,
    page_token: &str,
) -> Result<Page<Session>> {
    let listing = SessionListing { app_name, user_id };
    let after = listing
        .resume_after(page_token)?
        .unwrap_or_else(|| SessionPlace {
            last_update_time: Timestamp {
                seconds: i64::MIN,
                nanos: i32::MIN,
            },
            user_id: String::new(),
            session_id: String::new(),
        });
    let SessionPlace {
        last_update_time: ts,
        user_id: after_user,
        session_id: after_session,
    } = after;
    let now = now();
    let limit = to_i64(page_size as u64 + 1);
    let mut client = store.pool.get().await?;
    // One snapshot: the page and the state shown with it.
    let tx = read_snapshot(&mut client).await?;
    let live = "(expire_s IS NULL OR (expire_s, expire_n) > ($6, $7))";
    let rows = match user_id {
        None => {
            tx.query(
                &format!(
                    "SELECT {RECORD}, user_id, session_id FROM sessions
                     WHERE app_name = $1
                       AND (update_s, update_n, user_id, session_id) > ($2, $3, $4, $5)
                       AND {live}
                     ORDER BY update_s, update_n, user_id, session_id LIMIT $8"
                ),
                &[
                    &app_name,
                    &ts.seconds,
                    &ts.nanos,
                    &after_user,
                    &after_session,
                    &now.seconds,
                    &now.nanos,
                    &limit,
                ],
            )
            .await?
        }
        Some(user) => {
            tx.query(
                &format!(
                    "SELECT {RECORD}, user_id, session_id FROM sessions
                     WHERE app_name = $1 AND user_id = $4
                       AND (update_s, update_n, session_id) > ($2, $3, $5)
                       AND {live}
                     ORDER BY update_s, update_n, session_id LIMIT $8"
                ),
                &[
                    &app_name,
                    &ts.seconds,
                    &ts.nanos,
                    &user,
                    &after_session,
                    &now.seconds,
                    &now.nanos,
                    &limit,
                ],
            )
            .await?
        }
    };
    let more = rows.len() > page_size;
    let mut listed = Vec::with_capacity(page_size);
    for row in rows.iter().take(page_size) {
        let key = SessionKey {
            app_name: app_name.to_owned(),
            user_id: row.try_get(8)?,
            session_id: row.try_get(9)?,
        };
        listed.push((key, record(row)?));
    }
    let users: Vec<&str> = listed.iter().map(|(k, _)| k.user_id.as_str()).collect();
    let sessions: Vec<&str> = listed.iter().map(|(k, _)| k.session_id.as_str()).collect();
    let app: [&(dyn ToSql + Sync); 1] = [&app_name];
    let (app_state, user_rows, session_rows) = tokio::try_join!(
        shared_entries(&tx, APP_STATE, &app),
        async {
            Ok(tx
                .query(
                    "SELECT user_id, key, value FROM user_state
                     WHERE app_name = $1 AND user_id = ANY($2) ORDER BY user_id, key, version",
                    &[&app_name, &users],
                )
                .await?)
        },
        async {
            Ok::<_, SessionError>(
                tx.query(
                    "SELECT s.user_id, s.session_id, s.key, s.value
                     FROM session_state s
                     JOIN unnest($2::text[], $3::text[]) AS page(user_id, session_id)
                       ON s.user_id = page.user_id AND s.session_id = page.session_id
                     WHERE s.app_name = $1 ORDER BY s.user_id, s.session_id, s.key",
                    &[&app_name, &users, &sessions],
                )
                .await?,
            )
        },
    )?;
    tx.commit().await?;
    let mut user_state: HashMap<String, Vec<Entry>> = HashMap::new();
    for row in &user_rows {
        keep_newest(
            user_state.entry(row.try_get(0)?).or_default(),
            row.try_get(1)?,
            row.try_get(2)?,
        );
    }
    let mut session_state: HashMap<(String, String), Vec<Entry>> = HashMap::new();
    for row in &session_rows {
        session_state
            .entry((row.try_get(0)?, row.try_get(1)?))
            .or_default()
            .push((row.try_get(2)?, row.try_get(3)?));
    }
    let next_page_token = match listed.last() {
        Some((key, record)) if more => listing.token(&SessionPlace {
            last_update_time: record.last_update_time,
            user_id: key.user_id.clone(),
            session_id: key.session_id.clone(),
        }),
        _ => String::new(),
    };
    let items = listed
        .into_iter()
        .map(|(key, record)| {
            let own = session_state
                .remove(&(key.user_id.clone(), key.session_id.clone()))
                .unwrap_or_default();
            let user = user_state
                .get(&key.user_id)
                .map(Vec::as_slice)
                .unwrap_or_default();
            let merged = state::merge(state::pairs(&own), &app_state, user);
            session(&key, &record, merged, Vec::new())
        })
        .collect();
    Ok(Page {
        items,
        next_page_token,
    })
}
