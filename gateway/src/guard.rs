//! The rules every request to the front door passes, `/mcp` and the console alike: the host
//! name it is addressed to (no DNS rebinding), the `Origin` it comes from (no calls from
//! foreign web pages), and the caller its bearer token makes.

use std::net::IpAddr;

use adk_common::serve::auth::Authenticator;
use axum::{
    extract::{Request, State},
    http::{header, uri::Authority, HeaderMap, StatusCode},
    middleware::Next,
    response::{IntoResponse, Response},
};

use crate::{caller::Caller, config::Http};

/// Who may call, and from where.
#[derive(Debug, Clone)]
pub struct Guard {
    authenticator: Authenticator,
    /// Host names (or `host:port`) requests may be addressed to besides loopback names; `None`:
    /// any (beyond loopback without `--allowed-hosts`, where tokens protect the gateway).
    hosts: Option<Vec<String>>,
    /// Foreign origins allowed to call (`--allowed-origins`), normalized.
    origins: Vec<Origin>,
}

impl Guard {
    pub fn new(http: &Http, authenticator: Authenticator) -> Self {
        let hosts = (http.listen.ip().is_loopback() || !http.allowed_hosts.is_empty())
            .then(|| http.allowed_hosts.clone());
        Self {
            authenticator,
            hosts,
            origins: http
                .allowed_origins
                .iter()
                .filter_map(|o| Origin::parse(o))
                .collect(),
        }
    }

    pub fn authenticator(&self) -> &Authenticator {
        &self.authenticator
    }

    /// The caller presenting `token` (`None`: no token), or `None` when the gateway does not
    /// accept it. With a tokens file in force, the caller's own token goes on to the services,
    /// which check it again; without one every caller acts with the gateway's own.
    pub fn caller(&self, token: Option<&str>) -> Option<Caller> {
        let grant = self.authenticator.authenticate(token)?;
        let passed_on = token
            .filter(|_| self.authenticator.is_required())
            .map(|t| t.trim().to_owned());
        Some(Caller::with_token(grant, passed_on))
    }

    /// Whether the request is addressed to a name this gateway answers to.
    fn host_allowed(&self, headers: &HeaderMap) -> bool {
        let Some(allowed) = &self.hosts else {
            return true;
        };
        let Some(host) = headers
            .get(header::HOST)
            .and_then(|h| h.to_str().ok())
            .and_then(|h| h.parse::<Authority>().ok())
        else {
            return false;
        };
        let name = host.host().trim_start_matches('[').trim_end_matches(']');
        name.eq_ignore_ascii_case("localhost")
            || name.parse::<IpAddr>().is_ok_and(|ip| ip.is_loopback())
            || allowed.iter().any(|a| {
                a.eq_ignore_ascii_case(host.as_str())
                    || (!a.contains(':') && a.eq_ignore_ascii_case(host.host()))
            })
    }

    /// Whether a request carrying `Origin` may be served: requests without one (not from a
    /// browser) and the gateway's own pages (the console) may; other origins only when
    /// `--allowed-origins` names them.
    fn origin_allowed(&self, headers: &HeaderMap) -> bool {
        let Some(origin) = headers.get(header::ORIGIN) else {
            return true;
        };
        let Some(origin) = origin.to_str().ok().and_then(Origin::parse) else {
            return false;
        };
        let own = headers
            .get(header::HOST)
            .and_then(|h| h.to_str().ok())
            .and_then(|h| h.parse::<Authority>().ok())
            .is_some_and(|host| {
                host.host().eq_ignore_ascii_case(&origin.host)
                    && host.port_u16().unwrap_or(origin.default_port()) == origin.port
            });
        own || self.origins.contains(&origin)
    }
}

/// An origin (`scheme://host[:port]`), its port made explicit.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Origin {
    scheme: String,
    host: String,
    port: u16,
}

impl Origin {
    fn parse(text: &str) -> Option<Self> {
        let uri: axum::http::Uri = text.trim_end_matches('/').parse().ok()?;
        let scheme = uri.scheme_str()?.to_ascii_lowercase();
        let authority = uri.authority()?;
        if uri.path() != "/" && !uri.path().is_empty() {
            return None;
        }
        let mut origin = Self {
            host: authority.host().to_ascii_lowercase(),
            port: 0,
            scheme,
        };
        origin.port = authority.port_u16().unwrap_or(origin.default_port());
        Some(origin)
    }

    fn default_port(&self) -> u16 {
        if self.scheme == "https" {
            443
        } else {
            80
        }
    }
}

/// Refuses a request addressed to a foreign host name (421) or sent by a foreign web page
/// (403), before anything else looks at it.
pub async fn front_door(State(guard): State<Guard>, request: Request, next: Next) -> Response {
    if !guard.host_allowed(request.headers()) {
        return (
            StatusCode::MISDIRECTED_REQUEST,
            "the gateway does not answer to this host name (see --allowed-hosts)\n",
        )
            .into_response();
    }
    if !guard.origin_allowed(request.headers()) {
        return (
            StatusCode::FORBIDDEN,
            "requests from this origin are refused (see --allowed-origins)\n",
        )
            .into_response();
    }
    next.run(request).await
}

#[cfg(test)]
mod tests {
    use axum::http::HeaderValue;

    use super::*;

    fn guard(listen: &str, hosts: &[&str], origins: &[&str]) -> Guard {
        let http = Http {
            listen: listen.parse().unwrap(),
            tokens_file: None,
            allow_unauthenticated: true,
            allowed_hosts: hosts.iter().map(|h| h.to_string()).collect(),
            allowed_origins: origins.iter().map(|o| o.to_string()).collect(),
            log_format: "plain".into(),
        };
        Guard::new(&http, Authenticator::open())
    }

    fn headers(host: &str, origin: Option<&str>) -> HeaderMap {
        let mut headers = HeaderMap::new();
        headers.insert(header::HOST, HeaderValue::from_str(host).unwrap());
        if let Some(origin) = origin {
            headers.insert(header::ORIGIN, HeaderValue::from_str(origin).unwrap());
        }
        headers
    }

    #[test]
    fn on_loopback_only_loopback_names_and_named_hosts_are_served() {
        let g = guard("127.0.0.1:8080", &["gw.example", "other.example:9000"], &[]);
        for host in [
            "localhost:8080",
            "127.0.0.1:8080",
            "[::1]:8080",
            "LOCALHOST",
            "gw.example:8080",
            "other.example:9000",
        ] {
            assert!(g.host_allowed(&headers(host, None)), "{host}");
        }
        for host in [
            "rebound.example:8080",
            "other.example:8080",
            "127.0.0.1.evil",
        ] {
            assert!(!g.host_allowed(&headers(host, None)), "{host}");
        }
        assert!(!g.host_allowed(&HeaderMap::new()), "no Host at all");
        let open = guard("0.0.0.0:8080", &[], &[]);
        assert!(open.host_allowed(&headers("anything.example", None)));
    }

    #[test]
    fn only_the_gateways_own_origin_and_listed_ones_are_served() {
        let g = guard("127.0.0.1:8080", &[], &["https://app.example"]);
        let allowed = [
            ("127.0.0.1:8080", "http://127.0.0.1:8080"),
            ("gw.example", "https://gw.example"),
            ("localhost:8080", "https://app.example:443"),
            ("localhost:8080", "HTTPS://App.Example/"),
        ];
        for (host, origin) in allowed {
            assert!(g.origin_allowed(&headers(host, Some(origin))), "{origin}");
        }
        let refused = [
            ("127.0.0.1:8080", "http://127.0.0.1:8081"),
            ("127.0.0.1:8080", "https://evil.example"),
            ("127.0.0.1:8080", "null"),
            ("localhost:8080", "http://app.example"),
        ];
        for (host, origin) in refused {
            assert!(!g.origin_allowed(&headers(host, Some(origin))), "{origin}");
        }
    }
}
