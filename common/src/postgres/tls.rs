//! TLS to PostgreSQL, with rustls: the connection string's `sslmode` and `sslrootcert`, read as
//! libpq reads them, turned into a tokio-postgres configuration and a TLS connector.
//!
//! | `sslmode`          | TLS                  | server certificate                                |
//! |--------------------|----------------------|---------------------------------------------------|
//! | `disable`          | never                | —                                                 |
//! | `prefer` (default) | when the server has it | not checked                                     |
//! | `require`          | always               | not checked (checked as `verify-ca` when a root certificate is given, as libpq does) |
//! | `verify-ca`        | always               | signed by the root certificate; any host name     |
//! | `verify-full`      | always               | signed by the root certificate and naming the host |
//!
//! `sslrootcert` is a PEM file of trusted certificates, or `system` for the operating system's
//! trust store (which, as in libpq, implies `verify-full` unless a stricter mode is named).
//! tokio-postgres itself knows only `disable`, `prefer` and `require`, and no `sslrootcert`:
//! both are taken out of the connection string before it parses the rest.

use std::{borrow::Cow, path::PathBuf, sync::Arc};

use percent_encoding::{percent_decode_str, utf8_percent_encode, NON_ALPHANUMERIC};
use rustls::{
    client::{
        danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier},
        verify_server_cert_signed_by_trust_anchor,
    },
    crypto::{verify_tls12_signature, verify_tls13_signature, CryptoProvider},
    pki_types::{pem::PemObject, CertificateDer, ServerName, UnixTime},
    server::ParsedCertificate,
    ClientConfig, DigitallySignedStruct, RootCertStore, SignatureScheme,
};
use tokio_postgres_rustls::MakeRustlsConnect;

use super::PgError;

/// How a connection uses TLS: the connection string's `sslmode`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SslMode {
    Disable,
    Prefer,
    Require,
    VerifyCa,
    VerifyFull,
}

impl SslMode {
    fn parse(value: &str) -> Result<Self, PgError> {
        Ok(match value {
            "disable" => Self::Disable,
            "prefer" => Self::Prefer,
            "require" => Self::Require,
            "verify-ca" => Self::VerifyCa,
            "verify-full" => Self::VerifyFull,
            other => {
                return Err(PgError::Config(format!(
                    "sslmode: expected disable, prefer, require, verify-ca or verify-full, \
                     got {other:?}"
                )))
            }
        })
    }

    /// The name the connection string uses.
    pub fn name(self) -> &'static str {
        match self {
            Self::Disable => "disable",
            Self::Prefer => "prefer",
            Self::Require => "require",
            Self::VerifyCa => "verify-ca",
            Self::VerifyFull => "verify-full",
        }
    }
}

/// Where trusted root certificates come from: the connection string's `sslrootcert`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RootCert {
    /// A PEM file of one or more certificates.
    File(PathBuf),
    /// The operating system's trust store (`sslrootcert=system`).
    System,
}

/// A connection string taken apart: what tokio-postgres reads, and the TLS settings it does not.
#[derive(Debug, Clone)]
pub struct Connection {
    pub config: tokio_postgres::Config,
    pub ssl_mode: SslMode,
    pub root_cert: Option<RootCert>,
}

/// The query parameters this module reads instead of tokio-postgres.
const SSLMODE: &str = "sslmode";
const SSLROOTCERT: &str = "sslrootcert";

impl Connection {
    /// Reads a `postgres://` connection string; files are not opened yet (see [`Self::tls`]).
    pub fn parse(url: &str) -> Result<Self, PgError> {
        let (base, query) = url.split_once('?').unwrap_or((url, ""));
        let mut rest = Vec::new();
        let mut ssl_mode = None;
        let mut root_cert = None;
        for pair in query.split('&').filter(|p| !p.is_empty()) {
            let (key, value) = pair.split_once('=').unwrap_or((pair, ""));
            let decoded = || -> Result<Cow<'_, str>, PgError> {
                percent_decode_str(value)
                    .decode_utf8()
                    .map_err(|_| PgError::Config(format!("{key}: not UTF-8 once decoded")))
            };
            match key {
                SSLMODE => ssl_mode = Some(SslMode::parse(&decoded()?)?),
                SSLROOTCERT => {
                    root_cert = Some(match &*decoded()? {
                        "" => return Err(PgError::Config("sslrootcert: empty".into())),
                        "system" => RootCert::System,
                        path => RootCert::File(PathBuf::from(path)),
                    })
                }
                _ => rest.push(pair),
            }
        }
        let rest = match rest.is_empty() {
            true => base.to_owned(),
            false => format!("{base}?{}", rest.join("&")),
        };
        let mut config: tokio_postgres::Config = rest
            .parse()
            .map_err(|e| PgError::Config(super::describe(&e)))?;
        let ssl_mode = match (ssl_mode, &root_cert) {
            (Some(mode), _) => mode,
            // libpq: the system trust store is only worth anything with the host name checked.
            (None, Some(RootCert::System)) => SslMode::VerifyFull,
            (None, _) => SslMode::Prefer,
        };
        config.ssl_mode(match ssl_mode {
            SslMode::Disable => tokio_postgres::config::SslMode::Disable,
            SslMode::Prefer => tokio_postgres::config::SslMode::Prefer,
            SslMode::Require | SslMode::VerifyCa | SslMode::VerifyFull => {
                tokio_postgres::config::SslMode::Require
            }
        });
        Ok(Self {
            config,
            ssl_mode,
            root_cert,
        })
    }

    /// The TLS connector for this connection: reads the root certificates, if any.
    pub fn tls(&self) -> Result<MakeRustlsConnect, PgError> {
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let roots = match &self.root_cert {
            Some(source) => Some(load_roots(source)?),
            None if matches!(self.ssl_mode, SslMode::VerifyCa | SslMode::VerifyFull) => {
                return Err(PgError::Config(format!(
                    "sslmode={} needs a root certificate: sslrootcert=FILE (or =system) in the \
                     connection string, or --pg-ca-file",
                    self.ssl_mode.name()
                )))
            }
            None => None,
        };
        let builder = ClientConfig::builder_with_provider(provider.clone())
            .with_safe_default_protocol_versions()
            .map_err(|e| PgError::Config(format!("TLS: {e}")))?;
        let config = match (self.ssl_mode, roots) {
            (SslMode::VerifyFull, Some(roots)) => builder.with_root_certificates(roots),
            // A host name is not checked: `verify-ca`, and `require` or `prefer` given a root
            // certificate (libpq checks the chain then).
            (_, roots) => builder
                .dangerous()
                .with_custom_certificate_verifier(Arc::new(ChainOnly { roots, provider })),
        }
        .with_no_client_auth();
        Ok(MakeRustlsConnect::new(config))
    }
}

/// Adds `sslrootcert=path` to `url` unless it names a root certificate already (the
/// connection string wins over a flag, as it does over libpq's `PGSSLROOTCERT`).
pub fn with_root_cert(url: &str, path: &std::path::Path) -> String {
    let (_, query) = url.split_once('?').unwrap_or((url, ""));
    if query
        .split('&')
        .any(|pair| pair.split_once('=').map_or(pair, |(k, _)| k) == SSLROOTCERT)
    {
        return url.to_owned();
    }
    let separator = if url.contains('?') { '&' } else { '?' };
    let path = path.to_string_lossy();
    let value = utf8_percent_encode(&path, NON_ALPHANUMERIC);
    format!("{url}{separator}{SSLROOTCERT}={value}")
}

fn load_roots(source: &RootCert) -> Result<RootCertStore, PgError> {
    let mut roots = RootCertStore::empty();
    match source {
        RootCert::File(path) => {
            let invalid = |e: &dyn std::fmt::Display| {
                PgError::Config(format!("sslrootcert {}: {e}", path.display()))
            };
            let certs = CertificateDer::pem_file_iter(path)
                .map_err(|e| invalid(&e))?
                .collect::<Result<Vec<_>, _>>()
                .map_err(|e| invalid(&e))?;
            if certs.is_empty() {
                return Err(invalid(&"no PEM certificate in the file"));
            }
            for cert in certs {
                roots.add(cert).map_err(|e| invalid(&e))?;
            }
        }
        RootCert::System => {
            let found = rustls_native_certs::load_native_certs();
            let (added, _) = roots.add_parsable_certificates(found.certs);
            if added == 0 {
                return Err(PgError::Config(format!(
                    "sslrootcert=system: no certificate in the system's trust store ({} errors)",
                    found.errors.len()
                )));
            }
        }
    }
    Ok(roots)
}

/// Checks that the server's certificate chains to `roots`, not which host it names; with no
/// roots, accepts any certificate (`prefer` and `require`: encryption without authentication).
/// Handshake signatures are checked either way.
#[derive(Debug)]
struct ChainOnly {
    roots: Option<RootCertStore>,
    provider: Arc<CryptoProvider>,
}

impl ServerCertVerifier for ChainOnly {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        _server_name: &ServerName<'_>,
        _ocsp_response: &[u8],
        now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        if let Some(roots) = &self.roots {
            verify_server_cert_signed_by_trust_anchor(
                &ParsedCertificate::try_from(end_entity)?,
                roots,
                intermediates,
                now,
                self.provider.signature_verification_algorithms.all,
            )?;
        }
        Ok(ServerCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        verify_tls12_signature(
            message,
            cert,
            dss,
            &self.provider.signature_verification_algorithms,
        )
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        verify_tls13_signature(
            message,
            cert,
            dss,
            &self.provider.signature_verification_algorithms,
        )
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.provider
            .signature_verification_algorithms
            .supported_schemes()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn takes_the_tls_settings_out_of_the_connection_string() {
        let c = Connection::parse(
            "postgres://u:p@db.example:5433/app?sslmode=verify-full&sslrootcert=%2Fetc%2Fca%20x.pem\
             &options=-csearch_path%3Dt1",
        )
        .unwrap();
        assert_eq!(c.ssl_mode, SslMode::VerifyFull);
        assert_eq!(
            c.root_cert,
            Some(RootCert::File(PathBuf::from("/etc/ca x.pem")))
        );
        assert_eq!(
            c.config.get_ssl_mode(),
            tokio_postgres::config::SslMode::Require
        );
        assert_eq!(c.config.get_options(), Some("-csearch_path=t1"));
        assert_eq!(c.config.get_dbname(), Some("app"));
    }

    #[test]
    fn defaults_as_libpq_does() {
        let plain = Connection::parse("postgres://u@h/db").unwrap();
        assert_eq!(plain.ssl_mode, SslMode::Prefer);
        let system = Connection::parse("postgres://u@h/db?sslrootcert=system").unwrap();
        assert_eq!(system.ssl_mode, SslMode::VerifyFull);
        let ca = Connection::parse("postgres://u@h/db?sslmode=verify-ca&sslrootcert=system");
        assert_eq!(ca.unwrap().ssl_mode, SslMode::VerifyCa);
    }

    #[test]
    fn refuses_unknown_modes_and_missing_roots() {
        let e = Connection::parse("postgres://u@h/db?sslmode=allow").unwrap_err();
        assert!(e.to_string().contains("sslmode"), "{e}");
        let e = Connection::parse("postgres://u@h/db?sslmode=verify-full")
            .unwrap()
            .tls()
            .err()
            .unwrap();
        assert!(e.to_string().contains("needs a root certificate"), "{e}");
        let e = Connection::parse("postgres://u@h/db?sslmode=verify-ca&sslrootcert=/nonexistent")
            .unwrap()
            .tls()
            .err()
            .unwrap();
        assert!(e.to_string().contains("/nonexistent"), "{e}");
    }

    #[test]
    fn a_flag_adds_the_root_certificate_unless_the_string_has_one() {
        let path = std::path::Path::new("/run/ca bundle.pem");
        assert_eq!(
            with_root_cert("postgres://u@h/db", path),
            "postgres://u@h/db?sslrootcert=%2Frun%2Fca%20bundle%2Epem"
        );
        let added = with_root_cert("postgres://u@h/db?sslmode=verify-ca", path);
        assert_eq!(
            Connection::parse(&added).unwrap().root_cert,
            Some(RootCert::File(path.to_owned()))
        );
        let given = "postgres://u@h/db?sslrootcert=/etc/ca.pem";
        assert_eq!(with_root_cert(given, path), given);
    }
}
