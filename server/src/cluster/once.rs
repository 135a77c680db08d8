//! Writes sent again (`ACCELKV.ONCE <client> <seq> <command…>`, docs/CLUSTER.md "Writes sent
//! again"). Each range's replicas keep, per client, the sequence number of its last write
//! and that write's reply, so a write that arrives again (a client retrying after a broken
//! connection or a leader change, or the old leader's entry committed after all) is
//! answered from this table instead of being applied twice. The table is part of the
//! range's replicated state: every replica builds the same one from the same log, and
//! snapshots and a split's seed carry it.

use accelkv_durable::range_snapshot::ClientWrite;
use std::collections::HashMap;

/// Clients a range remembers; past it, the one whose last write is oldest is forgotten
/// (the same one on every replica: ticks count applied writes).
pub(crate) const MAX_CLIENTS: usize = 10_000;

/// The longest reply kept; a longer one is remembered as "applied, reply not kept".
pub(crate) const MAX_REPLY: usize = 1024;

#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct Sessions {
    by_client: HashMap<u64, Entry>,
    tick: u64,
}

#[derive(Clone, Debug, PartialEq, Eq)]
struct Entry {
    seq: u64,
    reply: Vec<u8>,
    tick: u64,
}

impl Sessions {
    /// The answer to write `seq` of `client` if it must not be applied: it was (its reply
    /// again), or a later write of the client was (an error). `None`: apply it.
    pub fn seen(&self, client: u64, seq: u64) -> Option<Vec<u8>> {
        let e = self.by_client.get(&client)?;
        if seq == e.seq {
            return Some(e.reply.clone());
        }
        (seq < e.seq).then(|| {
            format!(
                "-ERR request {seq} of client {client} arrived after its request {}: not applied\r\n",
                e.seq
            )
            .into_bytes()
        })
    }

    /// Remembers that write `seq` of `client` was applied and answered `reply`.
    pub fn record(&mut self, client: u64, seq: u64, reply: &[u8]) {
        self.tick += 1;
        if !self.by_client.contains_key(&client) && self.by_client.len() >= MAX_CLIENTS {
            let oldest = self
                .by_client
                .iter()
                .min_by_key(|(_, e)| e.tick)
                .map(|(c, _)| *c);
            if let Some(c) = oldest {
                self.by_client.remove(&c);
            }
        }
        let reply = if reply.len() <= MAX_REPLY {
            reply.to_vec()
        } else {
            b"-ERR this request was applied; its reply was too long to keep\r\n".to_vec()
        };
        let tick = self.tick;
        self.by_client.insert(client, Entry { seq, reply, tick });
    }

    /// The table as a snapshot carries it (docs/FORMAT.md "Range snapshot"), in client
    /// order.
    pub fn clients(&self) -> Vec<ClientWrite<'_>> {
        let mut out: Vec<_> = self
            .by_client
            .iter()
            .map(|(c, e)| ClientWrite {
                client: *c,
                seq: e.seq,
                tick: e.tick,
                reply: &e.reply,
            })
            .collect();
        out.sort_by_key(|c| c.client);
        out
    }

    /// [`Sessions::clients`]' inverse: the table a snapshot carried.
    pub fn from_clients(clients: &[ClientWrite<'_>]) -> Sessions {
        let mut s = Sessions::default();
        for c in clients {
            s.tick = s.tick.max(c.tick);
            let e = Entry {
                seq: c.seq,
                reply: c.reply.to_vec(),
                tick: c.tick,
            };
            s.by_client.insert(c.client, e);
        }
        s
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        #[test]
        fn any_table_round_trips(
            writes in proptest::collection::vec((0u64..50, any::<u64>(), proptest::collection::vec(any::<u8>(), 0..40)), 0..60)
        ) {
            let mut s = Sessions::default();
            for (c, q, reply) in &writes {
                s.record(*c, *q, reply);
            }
            prop_assert_eq!(Sessions::from_clients(&s.clients()), s);
        }
    }

    #[test]
    fn a_write_seen_again_gets_its_reply_and_an_older_one_an_error() {
        let mut s = Sessions::default();
        assert_eq!(s.seen(7, 1), None);
        s.record(7, 1, b":1\r\n");
        assert_eq!(s.seen(7, 1).as_deref(), Some(&b":1\r\n"[..]));
        assert_eq!(s.seen(7, 2), None);
        s.record(7, 2, b":2\r\n");
        assert!(s
            .seen(7, 1)
            .unwrap()
            .starts_with(b"-ERR request 1 of client 7"));
        assert_eq!(s.seen(8, 1), None, "clients are apart");
        s.record(8, 5, &vec![b'x'; MAX_REPLY + 1]);
        assert!(s
            .seen(8, 5)
            .unwrap()
            .starts_with(b"-ERR this request was applied"));
    }

    #[test]
    fn the_table_round_trips_and_forgets_the_oldest_client_first() {
        let mut s = Sessions::default();
        for c in 0..MAX_CLIENTS as u64 {
            s.record(c, 1, b"+OK\r\n");
        }
        s.record(0, 2, b"+OK\r\n"); // client 0 is now the newest
        s.record(u64::MAX, 1, b"+OK\r\n"); // forgets client 1, the oldest
        assert_eq!(s.by_client.len(), MAX_CLIENTS);
        assert_eq!(s.seen(1, 1), None);
        assert!(s.seen(0, 2).is_some());
        assert_eq!(Sessions::from_clients(&s.clients()), s);
    }
}
