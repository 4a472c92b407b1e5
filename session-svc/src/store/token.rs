//! Page tokens of ListSessions and ListEvents: one codec each, used by both stores.
//!
//! A token is the key of the last item a page showed, checked on the way back to lie in the
//! listing it is sent with (see [`adk_common::page`]):
//! - ListSessions: the session's place in the listing's order, `(app, last update time, user,
//!   session)`, or, listing one user's sessions, `(app, user, last update time, session)`. These
//!   are also the keys of the sled store's two ListSessions indexes, built here.
//! - ListEvents: `(app, user, session, sequence)`, the sled store's event key.
//!
//! Both stores issue and read the same tokens through this module, so the layout is defined
//! once.

use adk_common::{
    keys::{Key, KeyReader},
    page::{self, PageTokenError},
};
use prost_types::Timestamp;

use super::SessionKey;
use crate::error::{Result, SessionError};

/// What a ListSessions call lists: an app's sessions, or one user's in it.
#[derive(Debug, Clone, Copy)]
pub struct SessionListing<'a> {
    pub app_name: &'a str,
    pub user_id: Option<&'a str>,
}

/// A session's place in a ListSessions listing, ordered by these fields in turn.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SessionPlace {
    pub last_update_time: Timestamp,
    pub user_id: String,
    pub session_id: String,
}

impl SessionListing<'_> {
    /// The prefix every key of the listing starts with.
    pub fn prefix(&self) -> Key {
        match self.user_id {
            Some(user) => Key::new().str(self.app_name).str(user),
            None => Key::new().str(self.app_name),
        }
    }

    /// The prefix of the keys of the sessions last updated at `time`: ties in the listing's
    /// order, ordered by user and session after it.
    pub fn at(&self, time: &Timestamp) -> Key {
        self.prefix().timestamp(time)
    }

    /// The key of `place` in the listing (in a user's listing, `place.user_id` is that user).
    pub fn key(&self, place: &SessionPlace) -> Key {
        let key = self.at(&place.last_update_time);
        match self.user_id {
            Some(_) => key,
            None => key.str(&place.user_id),
        }
        .str(&place.session_id)
    }

    /// Reads a key of the listing back; `None` if it is not one.
    pub fn parse(&self, key: &[u8]) -> Option<SessionPlace> {
        let prefix = self.prefix();
        let mut r = KeyReader::new(key.strip_prefix(prefix.as_bytes())?);
        let last_update_time = r.timestamp()?;
        let user_id = match self.user_id {
            Some(user) => user.to_owned(),
            None => r.str()?,
        };
        let session_id = r.str()?;
        r.is_empty().then_some(SessionPlace {
            last_update_time,
            user_id,
            session_id,
        })
    }

    /// The token of a page whose last session is at `place`.
    pub fn token(&self, place: &SessionPlace) -> String {
        page::encode(self.key(place).as_bytes())
    }

    /// Where a page resumes: after the place `token` names, or from the start (`None`) for an
    /// empty token. A token of another listing, or not a token, is INVALID_ARGUMENT.
    pub fn resume_after(&self, token: &str) -> Result<Option<SessionPlace>> {
        match page::decode(token, self.prefix().as_bytes()).map_err(SessionError::page_token)? {
            Some(key) => self
                .parse(&key)
                .map(Some)
                .ok_or_else(|| SessionError::page_token(PageTokenError::Malformed)),
            None => Ok(None),
        }
    }
}

/// The key of a session's event `sequence`: the ListEvents order.
pub fn event_key(key: &SessionKey, sequence: u64) -> Key {
    session_prefix(key).u64(sequence)
}

/// The token of a ListEvents page whose last event is `sequence`.
pub fn events_token(key: &SessionKey, sequence: u64) -> String {
    page::encode(event_key(key, sequence).as_bytes())
}

/// The sequence a ListEvents page resumes after (0 for an empty token).
pub fn events_resume_after(key: &SessionKey, token: &str) -> Result<u64> {
    let prefix = session_prefix(key);
    let malformed = || SessionError::page_token(PageTokenError::Malformed);
    match page::decode(token, prefix.as_bytes()).map_err(SessionError::page_token)? {
        Some(last) => {
            let mut r = KeyReader::new(&last[prefix.as_bytes().len()..]);
            let sequence = r.u64().ok_or_else(malformed)?;
            r.is_empty().then_some(sequence).ok_or_else(malformed)
        }
        None => Ok(0),
    }
}

fn session_prefix(key: &SessionKey) -> Key {
    Key::new()
        .str(&key.app_name)
        .str(&key.user_id)
        .str(&key.session_id)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn place(seconds: i64, user: &str, session: &str) -> SessionPlace {
        SessionPlace {
            last_update_time: Timestamp { seconds, nanos: 7 },
            user_id: user.into(),
            session_id: session.into(),
        }
    }

    #[test]
    fn session_tokens_round_trip_in_their_listing_only() {
        let app = SessionListing {
            app_name: "a",
            user_id: None,
        };
        let user = SessionListing {
            app_name: "a",
            user_id: Some("u"),
        };
        let at = place(5, "u", "s");
        assert_eq!(app.resume_after(&app.token(&at)).unwrap(), Some(at.clone()));
        assert_eq!(
            user.resume_after(&user.token(&at)).unwrap(),
            Some(at.clone())
        );
        assert_eq!(app.resume_after("").unwrap(), None);
        assert!(user.resume_after(&app.token(&place(5, "v", "s"))).is_err());
        let other = SessionListing {
            app_name: "b",
            user_id: None,
        };
        assert!(other.resume_after(&app.token(&at)).is_err());
    }

    #[test]
    fn listing_keys_sort_by_time_then_user_then_session() {
        let app = SessionListing {
            app_name: "a",
            user_id: None,
        };
        let keys: Vec<_> = [place(1, "z", "z"), place(2, "a", "b"), place(2, "b", "a")]
            .iter()
            .map(|p| app.key(p).into_vec())
            .collect();
        assert!(keys.windows(2).all(|w| w[0] < w[1]));
    }

    #[test]
    fn event_tokens_name_a_sequence_of_one_session() {
        let key = SessionKey {
            app_name: "a".into(),
            user_id: "u".into(),
            session_id: "s".into(),
        };
        let other = SessionKey {
            session_id: "t".into(),
            ..key.clone()
        };
        assert_eq!(
            events_resume_after(&key, &events_token(&key, 42)).unwrap(),
            42
        );
        assert_eq!(events_resume_after(&key, "").unwrap(), 0);
        assert!(events_resume_after(&other, &events_token(&key, 42)).is_err());
    }
}
