//! Notifications: appends and deletions announce themselves on the schema's channel; every
//! replica listens and turns them into [`Notice`]s for its watchers.

use adk_common::{
    postgres::{self, Notification},
    stopping::Stopping,
};
use tokio::sync::mpsc;

use crate::{
    error::Result,
    store::{Notice, SessionKey},
};

/// Listens on `channel` until `stopping`; shutdown waits until the listening connection is
/// closed.
pub(super) fn notices(
    url: &str,
    channel: &str,
    stopping: &Stopping,
) -> Result<Option<mpsc::UnboundedReceiver<Notice>>> {
    let (tx, rx) = mpsc::unbounded_channel();
    let mut listener = postgres::listen(url, channel.to_owned(), move |notification| {
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
    // On its own the listener ends only when a notification finds no receiver, which a quiet
    // channel never sends: it would keep its connection open after shutdown. It waits only on
    // the connection between notices (delivering one does not await), so ending it there
    // loses nothing.
    let stopped = stopping.clone();
    stopping.spawn(async move {
        tokio::select! {
            ended = &mut listener => log_if_panicked(ended),
            () = stopped.wait() => {
                listener.abort();
                log_if_panicked(listener.await);
            }
        }
    });
    Ok(Some(rx))
}

fn log_if_panicked(ended: std::result::Result<(), tokio::task::JoinError>) {
    if let Err(e) = ended {
        if e.is_panic() {
            tracing::error!(error = %e, "the notification listener panicked");
        }
    }
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
