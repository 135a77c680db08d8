//! TLS for the blocking client ([`crate::Client::connect_tls`]): the server's `--tls-binary-port`
//! (rustls, the ring provider). The server's certificate is checked against the CA given
//! and the name the client dials; a client certificate is presented where the server asks
//! for one (`--tls-ca` on the server).

use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName};
use std::io;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// What a TLS connection needs: the CA to check the server against, the client's own
/// certificate and key when the server requires one, and the name the server's
/// certificate must carry (by default the host of the address dialled).
#[derive(Clone, Debug, Default)]
pub struct TlsOptions {
    pub ca: PathBuf,
    pub cert: Option<PathBuf>,
    pub key: Option<PathBuf>,
    pub server_name: Option<String>,
}

fn bad(path: &Path, what: &str, e: impl std::fmt::Display) -> io::Error {
    io::Error::new(
        io::ErrorKind::InvalidInput,
        format!("{}: {what}: {e}", path.display()),
    )
}

fn certificates(path: &Path) -> io::Result<Vec<CertificateDer<'static>>> {
    CertificateDer::pem_file_iter(path)
        .and_then(|it| it.collect::<Result<Vec<_>, _>>())
        .map_err(|e| bad(path, "cannot read certificates", e))
}

impl TlsOptions {
    /// The rustls configuration these options make.
    pub fn config(&self) -> io::Result<Arc<rustls::ClientConfig>> {
        let mut roots = rustls::RootCertStore::empty();
        for c in certificates(&self.ca)? {
            roots
                .add(c)
                .map_err(|e| bad(&self.ca, "not a CA certificate", e))?;
        }
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let b = rustls::ClientConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .map_err(io::Error::other)?
            .with_root_certificates(roots);
        let cfg = match (&self.cert, &self.key) {
            (Some(cert), Some(key)) => {
                let k = PrivateKeyDer::from_pem_file(key)
                    .map_err(|e| bad(key, "cannot read a private key", e))?;
                b.with_client_auth_cert(certificates(cert)?, k)
                    .map_err(|e| bad(cert, "not a certificate for that key", e))?
            }
            (None, None) => b.with_no_client_auth(),
            _ => {
                return Err(io::Error::new(
                    io::ErrorKind::InvalidInput,
                    "a client certificate needs both its file and its key",
                ))
            }
        };
        Ok(Arc::new(cfg))
    }

    /// The name the server's certificate must carry when dialling `addr` (`host:port`).
    pub fn name_for(&self, addr: &str) -> io::Result<ServerName<'static>> {
        let host = match &self.server_name {
            Some(n) => n.as_str(),
            None => addr.rsplit_once(':').map_or(addr, |(h, _)| h),
        };
        let host = host.trim_start_matches('[').trim_end_matches(']');
        ServerName::try_from(host.to_string()).map_err(|e| {
            io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("{host}: not a name to check the server's certificate for: {e}"),
            )
        })
    }
}
