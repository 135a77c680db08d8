//! The rustls server configuration made from `--tls-cert`, `--tls-key`, `--tls-ca` and
//! `--tls-auth-clients` (config/tls.rs): loaded once at start, with an error naming the file
//! and what is wrong with it. TLS 1.2 and 1.3, rustls's safe defaults, the `ring` crypto
//! provider (it builds with a C compiler only).

use crate::config::{ClientAuth, TlsSettings};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use rustls::server::WebPkiClientVerifier;
use rustls::{RootCertStore, ServerConfig};
use std::path::Path;
use std::sync::Arc;

/// The crypto provider every TLS endpoint uses.
pub fn provider() -> Arc<rustls::crypto::CryptoProvider> {
    Arc::new(rustls::crypto::ring::default_provider())
}

/// The certificates of a PEM file (at least one).
pub fn certificates(path: &Path) -> Result<Vec<CertificateDer<'static>>, String> {
    let certs = CertificateDer::pem_file_iter(path)
        .and_then(|it| it.collect::<Result<Vec<_>, _>>())
        .map_err(|e| format!("{}: cannot read certificates: {e}", path.display()))?;
    if certs.is_empty() {
        return Err(format!("{}: no certificate in the file", path.display()));
    }
    Ok(certs)
}

/// The private key of a PEM file.
pub fn private_key(path: &Path) -> Result<PrivateKeyDer<'static>, String> {
    PrivateKeyDer::from_pem_file(path)
        .map_err(|e| format!("{}: cannot read a private key: {e}", path.display()))
}

/// The CA certificates of a PEM file, as roots to check peers' certificates against.
pub fn roots(path: &Path) -> Result<Arc<RootCertStore>, String> {
    let mut roots = RootCertStore::empty();
    for c in certificates(path)? {
        roots
            .add(c)
            .map_err(|e| format!("{}: not a CA certificate: {e}", path.display()))?;
    }
    Ok(Arc::new(roots))
}

/// The configuration of the TLS client ports.
pub fn server_config(t: &TlsSettings) -> Result<Arc<ServerConfig>, String> {
    let provider = provider();
    let verifier = match (&t.ca, t.auth_clients) {
        (Some(ca), ClientAuth::Required | ClientAuth::Optional) => {
            let b = WebPkiClientVerifier::builder_with_provider(roots(ca)?, provider.clone());
            let b = if t.auth_clients == ClientAuth::Optional {
                b.allow_unauthenticated()
            } else {
                b
            };
            b.build().map_err(|e| format!("--tls-ca: {e}"))?
        }
        _ => WebPkiClientVerifier::no_client_auth(),
    };
    let cfg = ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| e.to_string())?
        .with_client_cert_verifier(verifier)
        .with_single_cert(certificates(&t.cert)?, private_key(&t.key)?)
        .map_err(|e| format!("--tls-cert and --tls-key do not make a certificate: {e}"))?;
    Ok(Arc::new(cfg))
}

/// The Raft port's mutual TLS (cluster mode with `--tls-ca`): as a server, a peer's
/// certificate is required and must chain to the CA; as a client, the node presents its own
/// certificate and checks the peer's against the same CA. Node certificates serve both
/// ways (extended key usages serverAuth and clientAuth, or none).
#[cfg(feature = "cluster")]
pub fn raft(t: &TlsSettings) -> Result<(Arc<ServerConfig>, Arc<rustls::ClientConfig>), String> {
    let Some(ca) = &t.ca else {
        return Err("the Raft port's mutual TLS needs --tls-ca".into());
    };
    // The client ports' configuration with a certificate always required.
    let server = server_config(&TlsSettings {
        auth_clients: ClientAuth::Required,
        ..t.clone()
    })?;
    let client = rustls::ClientConfig::builder_with_provider(provider())
        .with_safe_default_protocol_versions()
        .map_err(|e| e.to_string())?
        .with_root_certificates(roots(ca)?)
        .with_client_auth_cert(certificates(&t.cert)?, private_key(&t.key)?)
        .map_err(|e| format!("--tls-cert and --tls-key do not make a certificate: {e}"))?;
    Ok((server, Arc::new(client)))
}
