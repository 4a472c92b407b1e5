//! ListSessions: one page of an app's or a user's sessions, in the order of their last update,
//! with the state shown beside each, read in one snapshot.

use std::collections::HashMap;

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
        Page, SessionKey, SessionOrder, SessionPage, SessionQuery,
    },
    time::now,
};

pub(super) async fn list(store: &PgSessionStore, query: SessionQuery<'_>) -> Result<SessionPage> {
    let SessionQuery {
        app_name,
        user_id,
        order,
        page_size,
        page_token,
        ..
    } = query;
    let listing = SessionListing { app_name, user_id };
    let after = listing.resume_after(page_token)?;
    let now = now();
    let limit = to_i64(page_size as u64 + 1);
    // A token names where the page starts; the offset counts from the listing's start.
    let offset = to_i64(if after.is_some() {
        0
    } else {
        query.offset as u64
    });
    let mut params: Vec<&(dyn ToSql + Sync)> = vec![&app_name, &now.seconds, &now.nanos];
    let mut filter =
        String::from("app_name = $1 AND (expire_s IS NULL OR (expire_s, expire_n) > ($2, $3))");
    if let Some(user) = &user_id {
        params.push(user);
        filter.push_str(" AND user_id = $4");
    }
    let count_params = params.clone();
    let count_filter = filter.clone();
    // Ties by (user, session) ascending in both orders; in a user's listing, by session.
    let tie = match user_id {
        Some(_) => "session_id",
        None => "user_id, session_id",
    };
    if let Some(place) = &after {
        let n = params.len();
        let (time, rest) = (format!("(${}, ${})", n + 1, n + 2), n + 3);
        params.extend([
            &place.last_update_time.seconds as &(dyn ToSql + Sync),
            &place.last_update_time.nanos,
        ]);
        let (tie_after, extra): (String, Vec<&(dyn ToSql + Sync)>) = match user_id {
            Some(_) => (format!("session_id > ${rest}"), vec![&place.session_id]),
            None => (
                format!("(user_id, session_id) > (${rest}, ${})", rest + 1),
                vec![&place.user_id, &place.session_id],
            ),
        };
        params.extend(extra);
        let newer = match order {
            SessionOrder::OldestFirst => ">",
            SessionOrder::NewestFirst => "<",
        };
        filter.push_str(&format!(
            " AND ((update_s, update_n) {newer} {time} OR ((update_s, update_n) = {time} AND {tie_after}))"
        ));
    }
    let direction = match order {
        SessionOrder::OldestFirst => "",
        SessionOrder::NewestFirst => " DESC",
    };
    let n = params.len();
    params.extend([&limit as &(dyn ToSql + Sync), &offset]);
    let statement = format!(
        "SELECT {RECORD}, user_id, session_id FROM sessions WHERE {filter}
         ORDER BY update_s{direction}, update_n{direction}, {tie} LIMIT ${} OFFSET ${}",
        n + 1,
        n + 2
    );
    let mut client = store.pool.get().await?;
    // One snapshot: the page, its count and the state shown with it.
    let tx = read_snapshot(&mut client).await?;
    let rows = tx.query(&statement, &params).await?;
    let total_size = if query.count {
        let row = tx
            .query_one(
                &format!("SELECT count(*) FROM sessions WHERE {count_filter}"),
                &count_params,
            )
            .await?;
        Some(usize::try_from(row.try_get::<_, i64>(0)?).unwrap_or(usize::MAX))
    } else {
        None
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
    Ok(SessionPage {
        page: Page {
            items,
            next_page_token,
        },
        total_size,
    })
}
