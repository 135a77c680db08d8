//! What the Raft frame format costs: one AppendEntries of 1,024 SET commands (a full write
//! batch, as cluster mode sends them) encoded and decoded in format 2 (postcard) and in
//! format 1 (bincode 1.3), with the bytes each takes.
//!
//! `cargo run --release -p accelkv-cluster --example raft_codec`

use accelkv_cluster::openraft::raft::AppendEntriesRequest;
use accelkv_cluster::openraft::{CommittedLeaderId, EntryPayload, LogId, Vote};
use accelkv_cluster::raft::{codec, Command, Config, Entry};
use std::time::Instant;

fn main() {
    let id = |i| LogId::new(CommittedLeaderId::new(3, 1), i);
    let entries: Vec<Entry> = (0..1024u64)
        .map(|i| Entry {
            log_id: id(1000 + i),
            payload: EntryPayload::Normal(Command(
                format!("*3\r\n$3\r\nSET\r\n$10\r\nkey{i:07}\r\n$16\r\nvalue{i:011}\r\n")
                    .into_bytes(),
            )),
        })
        .collect();
    let req: AppendEntriesRequest<Config> = AppendEntriesRequest {
        vote: Vote::new_committed(3, 1),
        prev_log_id: Some(id(999)),
        entries,
        leader_commit: Some(id(999)),
    };
    let rounds = 2000;
    let t = Instant::now();
    let mut bytes = 0;
    for _ in 0..rounds {
        let b = codec::frame(&req).unwrap();
        bytes = b.len();
        let back: AppendEntriesRequest<Config> = codec::unframe(&b).unwrap();
        assert_eq!(back.entries.len(), 1024);
    }
    let postcard = t.elapsed().as_secs_f64() / rounds as f64;
    let t = Instant::now();
    let mut old_bytes = 0;
    for _ in 0..rounds {
        let b = bincode::serialize(&req).unwrap();
        old_bytes = b.len();
        let back: AppendEntriesRequest<Config> = bincode::deserialize(&b).unwrap();
        assert_eq!(back.entries.len(), 1024);
    }
    let bincode = t.elapsed().as_secs_f64() / rounds as f64;
    println!("| format | bytes | encode + decode (µs) |");
    println!("|---|---|---|");
    println!("| 2 (postcard) | {bytes} | {:.0} |", postcard * 1e6);
    println!("| 1 (bincode 1.3) | {old_bytes} | {:.0} |", bincode * 1e6);
}
