//! Bearer-token authentication with per-app (and optionally per-user) scopes.
//!
//! A tokens file lists who may do what:
//! ```json
//! {"tokens": [
//!   {"name": "support-bot", "token": "s3cr3t", "apps": ["support"]},
//!   {"name": "alice-laptop", "token": "t0k3n", "apps": ["support"], "users": ["alice"]},
//!   {"name": "ops", "token": "0ps", "apps": ["*"]}
//! ]}
//! ```
//! The [`Authenticator`] interceptor runs before every RPC (streams included): a request without
//! a known `authorization: Bearer <token>` header is `UNAUTHENTICATED`; otherwise the token's
//! [`Grant`] rides along in the request's extensions, and each handler checks it against the
//! app and user the request (or each stream message) names: `PERMISSION_DENIED` if outside.
//! Without a tokens file every request gets [`Grant::all`].

use std::{collections::HashMap, path::Path, sync::Arc};

use serde::Deserialize;
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
    token: String,
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

/// The interceptor that turns a bearer token into a [`Grant`].
#[derive(Debug, Clone, Default)]
pub struct Authenticator {
    /// `None`: authentication is off.
    tokens: Option<Arc<HashMap<String, Grant>>>,
}

impl Authenticator {
    /// Authentication off: every request may do everything.
    pub fn open() -> Self {
        Self::default()
    }

    /// Loads a tokens file.
    pub fn from_file(path: &Path) -> Result<Self, TokensFileError> {
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
        let mut tokens = HashMap::new();
        for (i, entry) in file.tokens.into_iter().enumerate() {
            if entry.token.len() < 8 {
                return Err(invalid(format!("token {i} is shorter than 8 characters")));
            }
            if entry.apps.is_empty() {
                return Err(invalid(format!(
                    "token {i} names no app (use [\"*\"] for all)"
                )));
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
            if tokens.insert(entry.token, grant).is_some() {
                return Err(invalid(format!("token {i} appears twice")));
            }
        }
        Ok(Self {
            tokens: Some(Arc::new(tokens)),
        })
    }
}

impl Interceptor for Authenticator {
    fn call(&mut self, mut request: Request<()>) -> Result<Request<()>, Status> {
        let grant = match &self.tokens {
            None => Grant::all(),
            Some(tokens) => {
                let token = request
                    .metadata()
                    .get("authorization")
                    .and_then(|v| v.to_str().ok())
                    .and_then(|v| v.strip_prefix("Bearer "))
                    .ok_or_else(|| {
                        Status::unauthenticated("missing `authorization: Bearer <token>` header")
                    })?;
                tokens
                    .get(token.trim())
                    .cloned()
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
        ] {
            assert!(file(text).is_err(), "{text}");
        }
    }
}
