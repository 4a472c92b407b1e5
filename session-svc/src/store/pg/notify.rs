//! Notifications: appends and deletions announce themselves on the schema's channel; every
//! replica listens and turns them into [`Notice`]s for its watchers.

use adk_common::postgres::{self, Notification};
use tokio::sync::mpsc;

use crate::{
    error::Result,
    store::{Notice, SessionKey},
};

pub(super) fn notices(url: &str, channel: &str) -> Result<Option<mpsc::UnboundedReceiver<Notice>>> {
    let (tx, rx) = mpsc::unbounded_channel();
    postgres::listen(url, channel.to_owned(), move |notification| {
        let notice = match &notification {
            Notification::Subscribed => Some(Notice::Resync),
            Notification::Payload(payload) => parse_notice(payload),
        };
        match notice {
            Some(notice) => tx.send(notice).is_ok(),
            None => {
                tracing::warn!(payload = %notification_text(&notification), "unreadable notification");
                true
            }
        }
    })?;
    Ok(Some(rx))
}

/// Reads a payload written by an append (`C`) or a deletion (`D`). Identifiers never contain
/// control characters, so tabs separate the fields.
pub(super) fn parse_notice(payload: &str) -> Option<Notice> {
    let mut fields = payload.split('\t');
    let kind = fields.next()?;
    let key = SessionKey {
        app_name: fields.next()?.to_owned(),
        user_id: fields.next()?.to_owned(),
        session_id: fields.next()?.to_owned(),
    };
    let notice = match kind {
        "C" => Notice::Committed {
            key,
            last_sequence: fields.next()?.parse().ok()?,
            change: fields.next()?.parse().ok()?,
        },
        "D" => Notice::Deleted(key),
        _ => return None,
    };
    fields.next().is_none().then_some(notice)
}

pub(super) fn notification_text(notification: &Notification) -> &str {
    match notification {
        Notification::Payload(p) => p,
        Notification::Subscribed => "",
    }
}
