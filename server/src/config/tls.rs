//! TLS's settings (`--tls-*`): which ports speak TLS, the certificate and key, and the
//! client certificates asked for. The rustls configuration made from them is
//! `net/tls_config.rs`'s.

use super::Args;
use std::path::PathBuf;

/// Client certificates on the TLS ports (`--tls-auth-clients`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ClientAuth {
    Required,
    Optional,
    No,
}

/// TLS's settings: the certificate, its key, the CA client certificates chain to, and the
/// TLS ports (`None`: that protocol has none).
#[derive(Clone, Debug)]
pub struct TlsSettings {
    pub cert: PathBuf,
    pub key: PathBuf,
    pub ca: Option<PathBuf>,
    pub auth_clients: ClientAuth,
    pub resp_port: Option<u16>,
    pub memcached_port: Option<u16>,
    pub binary_port: Option<u16>,
    /// `--tls-only`: the plain client ports stay closed.
    pub only: bool,
}

impl TlsSettings {
    /// `None` when no TLS flag is given; an error when they do not make a whole.
    pub(super) fn resolve(flags: &Args, file: &Args) -> Result<Option<TlsSettings>, String> {
        let cert = flags.tls_cert.clone().or(file.tls_cert.clone());
        let key = flags.tls_key.clone().or(file.tls_key.clone());
        let ca = flags.tls_ca.clone().or(file.tls_ca.clone());
        let resp_port = flags.tls_port.or(file.tls_port);
        let memcached_port = flags.tls_memcached_port.or(file.tls_memcached_port);
        let binary_port = flags.tls_binary_port.or(file.tls_binary_port);
        let auth = flags
            .tls_auth_clients
            .clone()
            .or(file.tls_auth_clients.clone());
        let ports = resp_port.is_some() || memcached_port.is_some() || binary_port.is_some();
        let only = flags.tls_only.or(file.tls_only).unwrap_or(false);
        if only && !ports {
            return Err("--tls-only needs a TLS port (--tls-port, --tls-memcached-port or --tls-binary-port)".into());
        }
        if only && (flags.cluster.is_some() || file.cluster.is_some()) {
            return Err("--tls-only does not apply with --cluster: nodes proxy commands to each other's plain RESP ports".into());
        }
        if !ports && cert.is_none() && key.is_none() && ca.is_none() {
            return Ok(None);
        }
        let (Some(cert), Some(key)) = (cert, key) else {
            return Err("TLS needs both --tls-cert and --tls-key (PEM files)".into());
        };
        let auth_clients = match (auth.as_deref(), &ca) {
            (None, Some(_)) | (Some("yes"), Some(_)) => ClientAuth::Required,
            (Some("optional"), Some(_)) => ClientAuth::Optional,
            (None | Some("no"), _) => ClientAuth::No,
            (Some(a), None) => {
                return Err(format!(
                    "--tls-auth-clients {a} needs --tls-ca: the CA client certificates are checked against"
                ))
            }
            (Some(a), Some(_)) => {
                return Err(format!(
                    "--tls-auth-clients {a}: expected yes, optional or no"
                ))
            }
        };
        Ok(Some(TlsSettings {
            cert,
            key,
            ca,
            auth_clients,
            resp_port,
            memcached_port,
            binary_port,
            only,
        }))
    }
}
