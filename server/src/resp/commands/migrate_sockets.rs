//! MIGRATE's cached connections, as Redis keeps them: one per target `host:port`, taken by
//! the next MIGRATE to that target within 10 seconds of its last use (at most 64 are kept,
//! the least recently used dropped first). A connection the target closed meanwhile is seen
//! before it is used (a look at the socket that reads nothing) and replaced by a new one; a
//! connection that failed is never put back. Two MIGRATEs to one target at once (on two
//! event loops) each have a connection of their own: one is taken out while in use.
//! INFO's `migrate_cached_sockets` counts them.

use std::collections::HashMap;
use std::io::ErrorKind;
use std::net::TcpStream;
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// How long an unused connection is kept (Redis's `MIGRATE_SOCKET_CACHE_TTL`).
pub const TTL: Duration = Duration::from_secs(10);
/// How many are kept (Redis's `MIGRATE_SOCKET_CACHE_ITEMS`).
pub const MAX: usize = 64;

/// The cached connections by target.
#[derive(Default)]
pub struct Sockets {
    map: Mutex<HashMap<String, (TcpStream, Instant)>>,
}

impl Sockets {
    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, (TcpStream, Instant)>> {
        self.map.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The cached connection to `target`, taken out while it is used (`None`: none, or
    /// only one unused for [`TTL`] or closed by the target).
    pub fn take(&self, target: &str) -> Option<TcpStream> {
        let (conn, last) = {
            let mut map = self.lock();
            map.retain(|_, (_, t)| t.elapsed() < TTL);
            map.remove(target)?
        };
        (last.elapsed() < TTL && open(&conn)).then_some(conn)
    }

    /// Keeps `conn` to `target` for the next MIGRATE, used just now.
    pub fn put(&self, target: String, conn: TcpStream) {
        let mut map = self.lock();
        map.retain(|_, (_, t)| t.elapsed() < TTL);
        if map.len() >= MAX && !map.contains_key(&target) {
            let oldest = map
                .iter()
                .min_by_key(|(_, (_, t))| *t)
                .map(|(k, _)| k.clone());
            if let Some(k) = oldest {
                map.remove(&k);
            }
        }
        map.insert(target, (conn, Instant::now()));
    }

    /// How many are kept now (INFO's `migrate_cached_sockets`).
    pub fn count(&self) -> usize {
        let mut map = self.lock();
        map.retain(|_, (_, t)| t.elapsed() < TTL);
        map.len()
    }
}

/// Whether `conn` is still open and holds nothing unread (a reply nobody asked for means
/// it is out of step: not reused).
fn open(conn: &TcpStream) -> bool {
    if conn.set_nonblocking(true).is_err() {
        return false;
    }
    let mut b = [0u8; 1];
    let alive = matches!(conn.peek(&mut b), Err(e) if e.kind() == ErrorKind::WouldBlock);
    alive && conn.set_nonblocking(false).is_ok()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::TcpListener;

    #[test]
    fn a_connection_is_reused_until_its_target_closes_it() {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let target = l.local_addr().unwrap().to_string();
        let c = TcpStream::connect(&target).unwrap();
        let (server_side, _) = l.accept().unwrap();
        let s = Sockets::default();
        s.put(target.clone(), c);
        assert_eq!(s.count(), 1);
        let c = s.take(&target).expect("cached and open");
        assert_eq!(s.count(), 0, "taken out while in use");
        s.put(target.clone(), c);
        drop(server_side);
        std::thread::sleep(Duration::from_millis(50));
        assert!(
            s.take(&target).is_none(),
            "closed by its target: not reused"
        );
        assert!(s.take("127.0.0.1:1").is_none());
    }

    #[test]
    fn at_most_max_are_kept() {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = l.local_addr().unwrap();
        let s = Sockets::default();
        let mut keep = Vec::new();
        for i in 0..MAX + 3 {
            s.put(format!("t{i}"), TcpStream::connect(addr).unwrap());
            keep.push(l.accept().unwrap());
        }
        assert_eq!(s.count(), MAX);
    }
}
