//! Opaque page tokens.
//!
//! A token is the URL-safe base64 of the last key a page returned. Reading it back checks that
//! the key lies inside the scope the new request names, so a token from another app, user or
//! session, or a hand-edited one, is rejected instead of paging through someone else's data.

use base64::{engine::general_purpose::URL_SAFE_NO_PAD, Engine};

/// Why a page token was refused.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum PageTokenError {
    #[error("is not a page token issued by this service")]
    Malformed,
    #[error("was issued for another listing")]
    OtherScope,
}

/// Encodes the last key of a page as a token.
pub fn encode(last_key: &[u8]) -> String {
    URL_SAFE_NO_PAD.encode(last_key)
}

/// Decodes a token for a listing whose keys all start with `scope_prefix`. An empty token is
/// the first page (`None`).
pub fn decode(token: &str, scope_prefix: &[u8]) -> Result<Option<Vec<u8>>, PageTokenError> {
    if token.is_empty() {
        return Ok(None);
    }
    let key = URL_SAFE_NO_PAD
        .decode(token)
        .map_err(|_| PageTokenError::Malformed)?;
    if !key.starts_with(scope_prefix) {
        return Err(PageTokenError::OtherScope);
    }
    if key.len() == scope_prefix.len() {
        return Err(PageTokenError::Malformed);
    }
    Ok(Some(key))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip_and_scope_check() {
        let token = encode(b"scope/key-1");
        assert_eq!(decode(&token, b"scope/"), Ok(Some(b"scope/key-1".to_vec())));
        assert_eq!(decode(&token, b"other/"), Err(PageTokenError::OtherScope));
        assert_eq!(decode("", b"scope/"), Ok(None));
        assert_eq!(decode("%%%", b"scope/"), Err(PageTokenError::Malformed));
        assert_eq!(
            decode(&encode(b"scope/"), b"scope/"),
            Err(PageTokenError::Malformed)
        );
    }
}
