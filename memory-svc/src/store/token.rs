//! The ListMemories page token, one format for both stores: the last listed entry's key as the
//! sled store lays out its `entries` tree, (app, user, seq), in [`adk_common::page`]'s encoding.
//! A token is only accepted for the (app, user) it was issued for, and a store may change
//! without invalidating the tokens clients hold.

use adk_common::{
    keys::{Key, KeyReader},
    page::{self, PageTokenError},
};

use super::Scope;

/// The token of a page whose last entry has ingestion number `seq`.
pub fn encode(scope: Scope<'_>, seq: u64) -> String {
    page::encode(scope_prefix(scope).u64(seq).as_bytes())
}

/// The seq after which the page `token` asks for starts; `None` for the first page.
pub fn decode(scope: Scope<'_>, token: &str) -> Result<Option<u64>, PageTokenError> {
    let prefix = scope_prefix(scope);
    let Some(key) = page::decode(token, prefix.as_bytes())? else {
        return Ok(None);
    };
    let mut rest = KeyReader::new(&key[prefix.as_bytes().len()..]);
    match rest.u64() {
        Some(seq) if rest.is_empty() => Ok(Some(seq)),
        _ => Err(PageTokenError::Malformed),
    }
}

fn scope_prefix(scope: Scope<'_>) -> Key {
    Key::new().str(scope.app_name).str(scope.user_id)
}

#[cfg(test)]
mod tests {
    use super::*;

    const SCOPE: Scope<'static> = Scope {
        app_name: "app",
        user_id: "user",
    };

    #[test]
    fn round_trips_within_its_scope_only() {
        assert_eq!(decode(SCOPE, ""), Ok(None));
        let token = encode(SCOPE, 42);
        assert_eq!(decode(SCOPE, &token), Ok(Some(42)));
        let other = Scope {
            app_name: "app",
            user_id: "other",
        };
        assert_eq!(decode(other, &token), Err(PageTokenError::OtherScope));
        assert_eq!(
            decode(SCOPE, "not a token!"),
            Err(PageTokenError::Malformed)
        );
        // A key of the scope that is not an entry's.
        let longer = page::encode(scope_prefix(SCOPE).u64(1).str("x").as_bytes());
        assert_eq!(decode(SCOPE, &longer), Err(PageTokenError::Malformed));
    }

    #[test]
    fn is_the_sled_entry_key() {
        // Tokens issued before the stores shared this codec stay valid.
        let key = Key::new().str("app").str("user").u64(7);
        assert_eq!(encode(SCOPE, 7), page::encode(key.as_bytes()));
    }
}
