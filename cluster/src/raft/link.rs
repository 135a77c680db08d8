//! The byte stream between replicas on the Raft port: plain TCP, or mutual TLS when the node
//! is given [`RaftTls`] (the server makes it from `--tls-cert`, `--tls-key` and `--tls-ca`):
//! each side presents its certificate and accepts only a peer whose certificate chains to
//! the CA, so nothing but the cluster's nodes reaches the frame decoder. A dialled peer's
//! certificate must name the host of its Raft address (its IP address or DNS name).

use rustls::pki_types::ServerName;
use std::fmt;
use std::io;
use std::sync::Arc;
use std::time::Duration;
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::net::TcpStream;

/// A stream either kind of link offers.
pub trait Io: AsyncRead + AsyncWrite + Unpin + Send {}
impl<T: AsyncRead + AsyncWrite + Unpin + Send> Io for T {}

/// One connection between replicas.
pub type Link = Box<dyn Io>;

/// How long a TLS handshake may take before the connection is dropped.
const HANDSHAKE: Duration = Duration::from_secs(10);

/// The TLS configurations of a node's Raft port: as a server (peers' certificates
/// required) and as a client (its own certificate presented, the peer's checked).
#[derive(Clone)]
pub struct RaftTls {
    pub server: Arc<rustls::ServerConfig>,
    pub client: Arc<rustls::ClientConfig>,
}

impl fmt::Debug for RaftTls {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("RaftTls { mutual }")
    }
}

/// The server side of a connection a peer opened.
pub async fn accept(tls: Option<&RaftTls>, s: TcpStream) -> io::Result<Link> {
    let _ = s.set_nodelay(true);
    let Some(t) = tls else {
        return Ok(Box::new(s));
    };
    let acceptor = tokio_rustls::TlsAcceptor::from(t.server.clone());
    let s = tokio::time::timeout(HANDSHAKE, acceptor.accept(s))
        .await
        .map_err(|_| io::Error::other("TLS handshake timed out"))??;
    Ok(Box::new(s))
}

/// The client side of a connection to the peer at `addr` (`host:port`).
pub async fn connect(tls: Option<&RaftTls>, addr: &str, s: TcpStream) -> io::Result<Link> {
    s.set_nodelay(true)?;
    let Some(t) = tls else {
        return Ok(Box::new(s));
    };
    let name = server_name(addr)?;
    let connector = tokio_rustls::TlsConnector::from(t.client.clone());
    let s = tokio::time::timeout(HANDSHAKE, connector.connect(name, s))
        .await
        .map_err(|_| io::Error::other("TLS handshake timed out"))??;
    Ok(Box::new(s))
}

/// The name a peer's certificate must carry: the host of its address.
fn server_name(addr: &str) -> io::Result<ServerName<'static>> {
    let host = addr.rsplit_once(':').map_or(addr, |(h, _)| h);
    let host = host.trim_start_matches('[').trim_end_matches(']');
    ServerName::try_from(host.to_string()).map_err(|e| {
        io::Error::other(format!(
            "{addr}: not a name to check a certificate for: {e}"
        ))
    })
}

#[cfg(test)]
mod tests {
    use super::server_name;

    #[test]
    fn the_name_checked_is_the_addresss_host() {
        let name = |h: &str| rustls::pki_types::ServerName::try_from(h.to_string()).unwrap();
        assert_eq!(server_name("127.0.0.1:7709").unwrap(), name("127.0.0.1"));
        assert_eq!(server_name("[::1]:7709").unwrap(), name("::1"));
        assert_eq!(
            server_name("node-2.example:7709").unwrap(),
            name("node-2.example")
        );
        assert!(server_name(":7709").is_err());
    }
}
