//! Three replicas of one range in one process, each node on its own tokio runtime and Raft
//! port on loopback: writes commit and apply everywhere, a follower refuses reads and
//! writes with the leader's address, a crashed leader (its runtime dropped, its memory
//! lost) is replaced, and on restart it rebuilds its state from its snapshot and log, or
//! from the leader's snapshot once the log it missed was dropped.

use accelkv_cluster::{read_barrier, write, Machine, NotServed, RaftNode, Tuning};
use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tokio::runtime::Runtime;

/// A model state machine: commands are `key=value`; the reply is the old value.
#[derive(Default)]
struct MapMachine(Mutex<BTreeMap<Vec<u8>, Vec<u8>>>, AtomicUsize);

impl Machine for MapMachine {
    fn apply(&self, cmd: &[u8]) -> Vec<u8> {
        let at = cmd.iter().position(|&b| b == b'=').expect("key=value");
        let old = self
            .0
            .lock()
            .unwrap()
            .insert(cmd[..at].to_vec(), cmd[at + 1..].to_vec());
        old.unwrap_or_default()
    }
    fn snapshot(&self) -> Result<Vec<u8>, String> {
        Ok(bincode::serialize(&*self.0.lock().unwrap()).unwrap())
    }
    fn install(&self, data: &[u8]) -> Result<(), String> {
        self.1.fetch_add(1, Ordering::Relaxed);
        *self.0.lock().unwrap() = bincode::deserialize(data).map_err(|e| e.to_string())?;
        Ok(())
    }
}

struct Replica {
    rt: Runtime,
    node: RaftNode,
    machine: Arc<MapMachine>,
}

fn tuning() -> Tuning {
    Tuning {
        heartbeat: Duration::from_millis(50),
        election: (Duration::from_millis(200), Duration::from_millis(400)),
        snapshot_every: 100,
        keep_behind_snapshot: 10,
        sync: true,
        source: None,
        transport: Default::default(),
    }
}

fn start(id: u64, listen: &str, dir: &std::path::Path, members: &BTreeMap<u64, String>) -> Replica {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .unwrap();
    let machine = Arc::new(MapMachine::default());
    let node = rt.block_on(async {
        let node = RaftNode::start(id, listen, dir.join(format!("n{id}")), tuning())
            .await
            .unwrap();
        node.open_group(
            1,
            members,
            machine.clone(),
            accelkv_cluster::Open::Bootstrap,
        )
        .await
        .unwrap();
        node
    });
    Replica { rt, node, machine }
}

/// TCP sockets on this host, TIME_WAIT included.
/// TCP sockets (any state, TIME_WAIT included) with an end on one of `addrs`' ports: the
/// group's own connections, not those of whatever else runs on the machine (a test binary
/// that ran just before leaves hundreds in TIME_WAIT).
fn sockets(addrs: &BTreeMap<u64, String>) -> usize {
    let ports: Vec<u16> = addrs
        .values()
        .filter_map(|a| a.rsplit(':').next()?.parse().ok())
        .collect();
    let port = |field: Option<&str>| {
        field
            .and_then(|f| f.rsplit(':').next())
            .and_then(|p| u16::from_str_radix(p, 16).ok())
            .is_some_and(|p| ports.contains(&p))
    };
    let n = |f: &str| {
        std::fs::read_to_string(f).map_or(0, |t| {
            t.lines()
                .skip(1)
                .filter(|l| {
                    let mut fields = l.split_whitespace().skip(1);
                    port(fields.next()) || port(fields.next())
                })
                .count()
        })
    };
    n("/proc/net/tcp") + n("/proc/net/tcp6")
}

fn ports(n: usize) -> Vec<String> {
    // Bind and release: the ports are free when the nodes bind them a moment later.
    let ls: Vec<_> = (0..n)
        .map(|_| std::net::TcpListener::bind("127.0.0.1:0").unwrap())
        .collect();
    ls.iter()
        .map(|l| l.local_addr().unwrap().to_string())
        .collect()
}

fn leader(rs: &HashMap<u64, Replica>) -> u64 {
    let t = Instant::now();
    loop {
        for (id, r) in rs {
            let g = r.node.group(1).unwrap();
            let m = g.metrics().borrow().clone();
            if m.current_leader == Some(*id) && rs.contains_key(id) {
                return *id;
            }
        }
        assert!(
            t.elapsed() < Duration::from_secs(20),
            "no leader was elected"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn put(r: &Replica, k: &str, v: &str) -> Result<Vec<u8>, NotServed> {
    let g = r.node.group(1).unwrap();
    r.rt.block_on(write(&g, format!("{k}={v}").into_bytes()))
}

fn wait_same(rs: &HashMap<u64, Replica>, want: &BTreeMap<Vec<u8>, Vec<u8>>) {
    let t = Instant::now();
    loop {
        if rs.values().all(|r| *r.machine.0.lock().unwrap() == *want) {
            return;
        }
        assert!(
            t.elapsed() < Duration::from_secs(20),
            "replicas did not converge"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn a_group_replicates_fails_over_and_recovers() {
    let dir = std::env::temp_dir().join(format!("accelkv-raft-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let addrs = ports(3);
    let members: BTreeMap<u64, String> = (1..=3)
        .map(|i| (i, addrs[i as usize - 1].clone()))
        .collect();
    let mut rs: HashMap<u64, Replica> = members
        .iter()
        .map(|(id, a)| (*id, start(*id, a, &dir, &members)))
        .collect();

    let mut model = BTreeMap::new();
    let l = leader(&rs);
    for i in 0..250 {
        let (k, v) = (format!("k{:03}", i % 97), format!("v{i}"));
        let old = put(&rs[&l], &k, &v).unwrap();
        assert_eq!(
            old,
            model
                .insert(k.into_bytes(), v.into_bytes())
                .unwrap_or_default()
        );
    }
    wait_same(&rs, &model);

    // A follower refuses, naming the leader.
    let f = *rs.keys().find(|id| **id != l).unwrap();
    let fg = rs[&f].node.group(1).unwrap();
    let refused = rs[&f].rt.block_on(read_barrier(&fg));
    assert_eq!(
        refused,
        Err(NotServed::NotLeader(Some((l, members[&l].clone()))))
    );
    assert!(matches!(put(&rs[&f], "x", "y"), Err(NotServed::NotLeader(Some((id, _)))) if id == l));
    let lg = rs[&l].node.group(1).unwrap();
    // Every read index is a leadership check, for which openraft makes new peer clients:
    // they share pooled connections, so thousands of reads do not use thousands of ports.
    let before = sockets(&members);
    for _ in 0..2000 {
        rs[&l].rt.block_on(read_barrier(&lg)).unwrap();
    }
    let after = sockets(&members);
    assert!(
        after < before + 100,
        "{before} TCP sockets before 2000 reads, {after} after"
    );

    // The leader crashes: its runtime and memory are gone. The others elect a leader and
    // take writes, past a snapshot, so the old leader must be sent one.
    let dead = rs.remove(&l).unwrap();
    dead.rt.shutdown_background();
    drop(dead.machine);
    let l2 = leader(&rs);
    assert_ne!(l2, l);
    for i in 0..300 {
        let (k, v) = (format!("k{:03}", i % 131), format!("w{i}"));
        put(&rs[&l2], &k, &v).unwrap();
        model.insert(k.into_bytes(), v.into_bytes());
    }
    wait_same(&rs, &model);

    // It restarts on its port with its files: snapshot, log, then the leader's snapshot.
    std::thread::sleep(Duration::from_millis(300)); // let the old port's sockets close
    rs.insert(l, start(l, &members[&l], &dir, &members));
    wait_same(&rs, &model);
    // Once from its own snapshot file as it opened, once from the leader's.
    assert!(rs[&l].machine.1.load(Ordering::Relaxed) >= 2);

    // All three crash and restart: every acknowledged write is still there.
    for (_, r) in rs.drain() {
        r.rt.shutdown_background();
    }
    std::thread::sleep(Duration::from_millis(300));
    let rs: HashMap<u64, Replica> = members
        .iter()
        .map(|(id, a)| (*id, start(*id, a, &dir, &members)))
        .collect();
    let l3 = leader(&rs);
    put(&rs[&l3], "after", "restart").unwrap();
    model.insert(b"after".to_vec(), b"restart".to_vec());
    wait_same(&rs, &model);
    for (_, r) in rs {
        r.rt.shutdown_background();
    }
    let _ = std::fs::remove_dir_all(&dir);
}
