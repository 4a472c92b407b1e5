//! Who is calling, and whose data a call may touch: the one place where a tool's optional
//! `app_name` and `user_id` become the scope of the call.
//!
//! Over HTTP the caller is its bearer token's [`Grant`] (from the services' tokens file); the
//! token is also passed on to the services, which check it again. Over stdio the caller is
//! whoever launched the process: its `--token-file` goes to the services and `--app` / `--user`
//! fill in what a call leaves out.

use adk_common::serve::auth::Grant;

use crate::error::GatewayError;

/// The identity of one MCP request.
#[derive(Debug, Clone)]
pub struct Caller {
    grant: Grant,
    /// Presented to the services as `Bearer <token>` (`None`: the gateway's own, if any).
    pub token: Option<String>,
    default_app: Option<String>,
    default_user: Option<String>,
}

/// One (app, user) a call is about, checked against the caller's grant.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Scope {
    pub app: String,
    pub user: String,
}

impl Caller {
    /// A caller authenticated by its bearer token.
    pub fn with_token(grant: Grant, token: Option<String>) -> Self {
        Self {
            grant,
            token,
            default_app: None,
            default_user: None,
        }
    }

    /// The process's own user (stdio), with the app and user its flags name.
    pub fn local(default_app: Option<String>, default_user: Option<String>) -> Self {
        Self {
            grant: Grant::all(),
            token: None,
            default_app,
            default_user,
        }
    }

    pub fn grant(&self) -> &Grant {
        &self.grant
    }

    /// The app a call is about: the one it names, else the only one the token allows (or
    /// `--app`). A token of several apps must name one.
    pub fn app(&self, named: Option<&str>) -> Result<String, GatewayError> {
        let app = match named.filter(|a| !a.is_empty()) {
            Some(app) => app.to_owned(),
            None => sole(self.grant.apps())
                .or(self.default_app.as_deref())
                .ok_or(GatewayError::Missing {
                    field: "app_name",
                    why: "this token may use several apps (list_apps names them)",
                })?
                .to_owned(),
        };
        self.grant
            .check_app(&app)
            .map_err(|s| GatewayError::Denied(s.message().to_owned()))?;
        Ok(app)
    }

    /// The (app, user) a call is about. A token limited to one user always gets that user: a
    /// call naming another is refused, whatever else it says. A token of several users (or of
    /// every user) must name one.
    pub fn scope(&self, app: Option<&str>, user: Option<&str>) -> Result<Scope, GatewayError> {
        let app = self.app(app)?;
        let user = match user.filter(|u| !u.is_empty()) {
            Some(user) => user.to_owned(),
            None => sole(self.grant.users())
                .or(self.default_user.as_deref())
                .ok_or(GatewayError::Missing {
                    field: "user_id",
                    why: "this token may act for several users",
                })?
                .to_owned(),
        };
        self.grant
            .check(&app, Some(&user))
            .map_err(|s| GatewayError::Denied(s.message().to_owned()))?;
        Ok(Scope { app, user })
    }

    /// An (app, user) to ask the services about something that belongs to no user (whether
    /// memory-svc has a generator): the caller's first, or names of its own choosing.
    pub fn any_scope(&self) -> Scope {
        let first = |list: Option<&[String]>, default: &Option<String>| {
            list.and_then(|l| l.first().cloned())
                .or_else(|| default.clone())
                .unwrap_or_else(|| "gateway-probe".to_owned())
        };
        Scope {
            app: first(self.grant.apps(), &self.default_app),
            user: first(self.grant.users(), &self.default_user),
        }
    }
}

/// The only entry of a grant's list, if it has exactly one.
fn sole(list: Option<&[String]>) -> Option<&str> {
    match list {
        Some([only]) => Some(only),
        _ => None,
    }
}
