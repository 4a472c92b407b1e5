//! Bearer-token authentication with per-app (and optionally per-user) scopes.
//!
//! A tokens file lists who may do what:
//! ```json
//! {"tokens": [
//!   {"name": "support-bot", "token": "s3cr3t-bot", "apps": ["support"]},
//!   {"name": "alice-laptop", "token_sha256": "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08",
//!    "apps": ["support"], "users": ["alice"]},
//!   {"name": "ops", "token": "0ps-0ps-0ps", "apps": ["*"]}
//! ]}
//! ```
//! An entry names its token either in clear (`token`) or by the hex SHA-256 of it
//! (`token_sha256`, e.g. `printf %s "$TOKEN" | sha256sum`), so the file need not hold secrets.
//! Either way the server keeps only hashes, and compares a presented token's hash with every
//! entry in constant time.
//!
//! The [`Authenticator`] interceptor runs before every RPC (streams included): a request without
//! a known `authorization: Bearer <token>` header is `UNAUTHENTICATED`; otherwise the token's
//! [`Grant`] rides along in the request's extensions, and each handler checks it against the
//! app and user the request (or each stream message) names: `PERMISSION_DENIED` if outside.
//! Without a tokens file every request gets [`Grant::all`].
//!
//! [`Authenticator::reload`] (on SIGHUP) reads the file again: calls from then on see the new
//! tokens, while a stream already open keeps the grant it was opened with.

use std::{
    collections::HashSet,
    path::{Path, PathBuf},
    sync::{Arc, PoisonError, RwLock},
};

use ring::digest::{digest, SHA256};
use serde::Deserialize;
use subtle::ConstantTimeEq;
use tonic::{service::Interceptor, Request, Status};

/// Why the tokens file cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum TokensFileError {
    #[error("cannot read tokens file {path}: {source}")]
    Read {
        path: String,
        source: std::io::Error,
    },
    #[error("tokens file {path} is malformed: {source}")]
    Parse {
        path: String,
        source: serde_json::Error,
    },
    #[error("tokens file {path}: {reason}")]
    Invalid { path: String, reason: String },
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct TokensFile {
    tokens: Vec<TokenEntry>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct TokenEntry {
    /// Shown in logs instead of the secret.
    #[serde(default)]
    name: String,
    /// The token in clear, or
    #[serde(default)]
    token: Option<String>,
    /// the hex SHA-256 of it.
    #[serde(default)]
    token_sha256: Option<String>,
    apps: Vec<String>,
    #[serde(default)]
    users: Option<Vec<String>>,
}

/// What one token may access.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Grant {
    /// Who holds it, for logs.
    pub name: String,
    /// `None`: every app.
    apps: Option<Vec<String>>,
    /// `None`: every user of those apps.
    users: Option<Vec<String>>,
}

impl Grant {
    /// Access to everything (no tokens file configured).
    pub fn all() -> Self {
        Self {
            name: "anonymous".into(),
            apps: None,
            users: None,
        }
    }

    /// The apps the token may use (`None`: every app).
    pub fn apps(&self) -> Option<&[String]> {
        self.apps.as_deref()
    }

    /// The users of those apps the token may use (`None`: every user).
    pub fn users(&self) -> Option<&[String]> {
        self.users.as_deref()
    }

    /// Checks that the token may access everything (whole-store operations such as backups).
    pub fn check_everything(&self) -> Result<(), Status> {
        if self.apps.is_none() && self.users.is_none() {
            Ok(())
        } else {
            Err(Status::permission_denied(format!(
                "token {:?} is not granted every app (\"*\")",
                self.name
            )))
        }
    }

    /// Checks access to what an app shares with all its users (app state).
    pub fn check_app(&self, app_name: &str) -> Result<(), Status> {
        let app_ok = self
            .apps
            .as_ref()
            .is_none_or(|apps| apps.iter().any(|a| a == app_name));
        if app_ok {
            Ok(())
        } else {
            Err(Status::permission_denied(format!(
                "token {:?} may not access app {app_name:?}",
                self.name
            )))
        }
    }

    /// Checks access to `app_name` and, when the request names one, `user_id`. A token limited
    /// to some users cannot make requests spanning all users (`user_id: None`).
    pub fn check(&self, app_name: &str, user_id: Option<&str>) -> Result<(), Status> {
        self.check_app(app_name)?;
        match (&self.users, user_id) {
            (None, _) => Ok(()),
            (Some(users), Some(user)) if users.iter().any(|u| u == user) => Ok(()),
            (Some(_), Some(user)) => Err(Status::permission_denied(format!(
                "token {:?} may not access user {user:?} of app {app_name:?}",
                self.name
            ))),
            (Some(_), None) => Err(Status::permission_denied(format!(
                "token {:?} is limited to some users; name a user_id",
                self.name
            ))),
        }
    }
}

/// Reads the grant the [`Authenticator`] attached to a request.
pub fn grant<T>(request: &Request<T>) -> Result<&Grant, Status> {
    request
        .extensions()
        .get::<Grant>()
        .ok_or_else(|| Status::internal("request was not authenticated"))
}

/// A SHA-256 digest of a token.
type Digest = [u8; 32];

fn sha256(bytes: &[u8]) -> Digest {
    let mut out = [0; 32];
    out.copy_from_slice(digest(&SHA256, bytes).as_ref());
    out
}

/// The tokens of one reading of the file.
type Tokens = Vec<(Digest, Grant)>;

/// The tokens file and what it held when last read.
#[derive(Debug)]
struct TokensSource {
    path: PathBuf,
    current: RwLock<Arc<Tokens>>,
}

/// The interceptor that turns a bearer token into a [`Grant`]. Clones share the tokens, so a
/// [`reload`](Self::reload) reaches every service the authenticator guards.
#[derive(Debug, Clone, Default)]
pub struct Authenticator {
    /// `None`: authentication is off.
    tokens: Option<Arc<TokensSource>>,
}

impl Authenticator {
    /// Authentication off: every request may do everything.
    pub fn open() -> Self {
        Self::default()
    }

    /// Loads a tokens file.
    pub fn from_file(path: &Path) -> Result<Self, TokensFileError> {
        let tokens = read_tokens(path)?;
        Ok(Self {
            tokens: Some(Arc::new(TokensSource {
                path: path.to_owned(),
                current: RwLock::new(Arc::new(tokens)),
            })),
        })
    }

    /// Reads the tokens file again; returns how many tokens it holds now. On an error the
    /// tokens read before stay in force. Without a tokens file, there is nothing to read.
    pub fn reload(&self) -> Result<usize, TokensFileError> {
        let Some(source) = &self.tokens else {
            return Ok(0);
        };
        let tokens = read_tokens(&source.path)?;
        let count = tokens.len();
        *source
            .current
            .write()
            .unwrap_or_else(PoisonError::into_inner) = Arc::new(tokens);
        Ok(count)
    }

    /// The grant of a bearer token (the text after `Bearer `), for servers that authenticate
    /// outside gRPC (the gateway's HTTP front door): `None` when tokens are required and
    /// `token` is absent or unknown; without a tokens file, [`Grant::all`].
    pub fn authenticate(&self, token: Option<&str>) -> Option<Grant> {
        match &self.tokens {
            None => Some(Grant::all()),
            Some(source) => Self::lookup(source, token?.trim()),
        }
    }

    /// Whether a tokens file is in force.
    pub fn is_required(&self) -> bool {
        self.tokens.is_some()
    }

    /// The grant of `token`: its hash is compared with every known one, each comparison in
    /// constant time and all of them whatever matches, so timing tells nothing of the tokens.
    fn lookup(source: &TokensSource, token: &str) -> Option<Grant> {
        let tokens = source
            .current
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .clone();
        let presented = sha256(token.as_bytes());
        let mut found = None;
        for (known, grant) in tokens.iter() {
            if bool::from(known.ct_eq(&presented)) {
                found = Some(grant);
            }
        }
        found.cloned()
    }
}

/// Reads and checks a tokens file.
fn read_tokens(path: &Path) -> Result<Tokens, TokensFileError> {
    let shown = path.display().to_string();
    let text = std::fs::read_to_string(path).map_err(|source| TokensFileError::Read {
        path: shown.clone(),
        source,
    })?;
    let file: TokensFile =
        serde_json::from_str(&text).map_err(|source| TokensFileError::Parse {
            path: shown.clone(),
            source,
        })?;
    let invalid = |reason: String| TokensFileError::Invalid {
        path: shown.clone(),
        reason,
    };
    let mut seen = HashSet::new();
    let mut tokens = Vec::with_capacity(file.tokens.len());
    for (i, entry) in file.tokens.into_iter().enumerate() {
        let digest = match (&entry.token, &entry.token_sha256) {
            (Some(token), None) if token.len() < 8 => {
                return Err(invalid(format!("token {i} is shorter than 8 characters")))
            }
            (Some(token), None) => sha256(token.as_bytes()),
            (None, Some(hex)) => parse_sha256(hex).ok_or_else(|| {
                invalid(format!(
                    "token {i}: token_sha256 is not 64 hexadecimal digits (a SHA-256)"
                ))
            })?,
            _ => {
                return Err(invalid(format!(
                    "token {i} needs exactly one of token and token_sha256"
                )))
            }
        };
        if entry.apps.is_empty() {
            return Err(invalid(format!(
                "token {i} names no app (use [\"*\"] for all)"
            )));
        }
        if !seen.insert(digest) {
            return Err(invalid(format!("token {i} appears twice")));
        }
        let grant = Grant {
            name: if entry.name.is_empty() {
                format!("#{i}")
            } else {
                entry.name
            },
            apps: (!entry.apps.iter().any(|a| a == "*")).then_some(entry.apps),
            users: entry.users,
        };
        tokens.push((digest, grant));
    }
    Ok(tokens)
}

/// 64 hexadecimal digits (either case) as a digest.
fn parse_sha256(hex: &str) -> Option<Digest> {
    let hex = hex.as_bytes();
    if hex.len() != 64 || !hex.iter().all(u8::is_ascii_hexdigit) {
        return None;
    }
    let mut out = [0; 32];
    for (byte, pair) in out.iter_mut().zip(hex.chunks_exact(2)) {
        let text = std::str::from_utf8(pair).ok()?;
        *byte = u8::from_str_radix(text, 16).ok()?;
    }
    Some(out)
}

impl Interceptor for Authenticator {
    fn call(&mut self, mut request: Request<()>) -> Result<Request<()>, Status> {
        let grant = match &self.tokens {
            None => Grant::all(),
            Some(source) => {
                let token = request
                    .metadata()
                    .get("authorization")
                    .and_then(|v| v.to_str().ok())
                    .and_then(|v| v.strip_prefix("Bearer "))
                    .ok_or_else(|| {
                        Status::unauthenticated("missing `authorization: Bearer <token>` header")
                    })?;
                Self::lookup(source, token.trim())
                    .ok_or_else(|| Status::unauthenticated("unknown token"))?
            }
        };
        request.extensions_mut().insert(grant);
        Ok(request)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn file(text: &str) -> Result<Authenticator, TokensFileError> {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("tokens.json");
        std::fs::write(&path, text).unwrap();
        Authenticator::from_file(&path)
    }

    fn call(auth: &mut Authenticator, token: Option<&str>) -> Result<Grant, Status> {
        let mut request = Request::new(());
        if let Some(t) = token {
            request
                .metadata_mut()
                .insert("authorization", format!("Bearer {t}").parse().unwrap());
        }
        let request = auth.call(request)?;
        Ok(grant(&request)?.clone())
    }

    #[test]
    fn tokens_map_to_scoped_grants() {
        let mut auth = file(
            r#"{"tokens": [
                {"name": "a", "token": "aaaaaaaa", "apps": ["app1"]},
                {"name": "u", "token": "uuuuuuuu", "apps": ["app1"], "users": ["alice"]},
                {"name": "ops", "token": "oooooooo", "apps": ["*"]}
            ]}"#,
        )
        .unwrap();
        assert_eq!(
            call(&mut auth, None).unwrap_err().code(),
            tonic::Code::Unauthenticated
        );
        assert_eq!(
            call(&mut auth, Some("nope-nope")).unwrap_err().code(),
            tonic::Code::Unauthenticated
        );
        let a = call(&mut auth, Some("aaaaaaaa")).unwrap();
        assert!(a.check("app1", None).is_ok());
        assert_eq!(
            a.check("app2", Some("x")).unwrap_err().code(),
            tonic::Code::PermissionDenied
        );
        let u = call(&mut auth, Some("uuuuuuuu")).unwrap();
        assert!(u.check("app1", Some("alice")).is_ok());
        assert!(u.check("app1", Some("bob")).is_err());
        assert!(u.check("app1", None).is_err());
        let ops = call(&mut auth, Some("oooooooo")).unwrap();
        assert!(ops.check("anything", None).is_ok());
        assert!(call(&mut Authenticator::open(), None)
            .unwrap()
            .check("x", None)
            .is_ok());
    }

    #[test]
    fn bad_files_are_refused_with_a_reason() {
        for text in [
            "not json",
            r#"{"tokens": [{"token": "short", "apps": ["a"]}]}"#,
            r#"{"tokens": [{"token": "longenough", "apps": []}]}"#,
            r#"{"tokens": [{"token": "longenough", "apps": ["a"], "typo": 1}]}"#,
            r#"{"tokens": [{"token": "longenough", "apps": ["a"]}, {"token": "longenough", "apps": ["b"]}]}"#,
            r#"{"tokens": [{"apps": ["a"]}]}"#,
            r#"{"tokens": [{"token": "longenough", "token_sha256": "2b9a", "apps": ["a"]}]}"#,
            r#"{"tokens": [{"token_sha256": "not-hex", "apps": ["a"]}]}"#,
            r#"{"tokens": [{"token_sha256": "+f9a8b7c6d5e4f3a2b1c0d9e8f7a6b5c4d3e2f1a0b9c8d7e6f5a4b3c2d1e0f9a", "apps": ["a"]}]}"#,
            // The same token twice, once in clear and once hashed.
            r#"{"tokens": [{"token": "longenough", "apps": ["a"]}, {"token_sha256": "6ddf9d0c023b02684ae97185cb6648ecfa1318d540e6c45d61d12a8eecb15dcf", "apps": ["b"]}]}"#,
        ] {
            assert!(file(text).is_err(), "{text}");
        }
    }

    #[test]
    fn hashed_tokens_match_their_token_in_either_case_of_hex() {
        // `printf %s hashed-token-1 | sha256sum`, as the documentation says to make one.
        let hash = "b994b24ad665aa12e2de126ec0de71a49b933e8792fef3a93a09434c438befad";
        for written in [hash.to_owned(), hash.to_uppercase()] {
            let mut auth = file(&format!(
                r#"{{"tokens": [{{"name": "h", "token_sha256": "{written}", "apps": ["app1"]}}]}}"#
            ))
            .unwrap();
            assert_eq!(call(&mut auth, Some("hashed-token-1")).unwrap().name, "h");
            assert_eq!(
                call(&mut auth, Some("hashed-token-2")).unwrap_err().code(),
                tonic::Code::Unauthenticated
            );
            // The hash itself is not a token.
            assert!(call(&mut auth, Some(&written)).is_err());
        }
    }

    #[test]
    fn reload_replaces_the_tokens_and_keeps_them_on_a_bad_file() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("tokens.json");
        std::fs::write(
            &path,
            r#"{"tokens": [{"token": "first-token", "apps": ["a"]}]}"#,
        )
        .unwrap();
        let mut auth = Authenticator::from_file(&path).unwrap();
        assert!(call(&mut auth, Some("first-token")).is_ok());
        std::fs::write(
            &path,
            r#"{"tokens": [{"token": "second-token", "apps": ["a"]}]}"#,
        )
        .unwrap();
        assert_eq!(auth.clone().reload().unwrap(), 1);
        assert!(call(&mut auth, Some("first-token")).is_err());
        assert!(call(&mut auth, Some("second-token")).is_ok());
        std::fs::write(&path, "{").unwrap();
        assert!(auth.reload().is_err());
        assert!(call(&mut auth, Some("second-token")).is_ok());
    }
}
