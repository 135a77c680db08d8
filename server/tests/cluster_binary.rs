//! The binary protocol in cluster mode (docs/CLUSTER.md, "The binary protocol"), end to end
//! with a real etcd and three real server processes on loopback: a range's leader serves
//! every kind of keyed operation through the range's group; a follower answers MOVED with
//! the leader's binary address and does nothing; what was written over the binary protocol
//! survives a kill -9 of the leader; a scan that crosses a split is refused, not cut short;
//! UDP refuses keyed operations. Needs `--features cluster` and etcd (etcd-server).

mod cluster_support;
mod common;

use accelkv_client::{Client, ClientError, UdpClient};
use accelkv_proto::resp::Value;
use accelkv_proto::{Request, Status};
use cluster_support::client::{commands_led, Client as RespClient, Outcome};
use cluster_support::harness::Cluster;
use std::net::SocketAddr;
use std::time::{Duration, Instant};

/// Runs `op` on some live node's binary port, following MOVED and waiting out TRYAGAIN
/// and refused connections (a leader just killed), for up to 30 s.
fn follow<T>(c: &Cluster, mut op: impl FnMut(&mut Client) -> Result<T, ClientError>) -> T {
    let live: Vec<SocketAddr> = (0..c.nodes.len())
        .filter(|&i| c.alive(i))
        .map(|i| c.nodes[i].binary)
        .collect();
    let (t, mut at, mut next) = (Instant::now(), live[0], 1);
    loop {
        let r = Client::connect(at, None).and_then(|mut cl| op(&mut cl));
        match r {
            Ok(v) => return v,
            Err(e) if e.moved().is_some() => {
                at = e.moved().unwrap().1.parse().expect("MOVED names host:port");
                continue;
            }
            Err(ClientError::Status(Status::TryAgain, _) | ClientError::Io(_)) => {
                at = live[next % live.len()];
                next += 1;
            }
            Err(e) => panic!("{e}"),
        }
        assert!(t.elapsed() < Duration::from_secs(30), "no node served it");
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[test]
fn the_binary_protocol_is_served_by_each_ranges_leader_and_redirected_elsewhere() {
    if !accelkv_cluster::testing::etcd_or_skip() {
        return;
    }
    let mut c = Cluster::start(3, "binary");
    let leader = c.leader(Duration::from_secs(20));
    let follower = (0..3).find(|&i| i != leader).unwrap();
    let bin = |i: usize| Client::connect(c.nodes[i].binary, None).unwrap();
    let leader_addr = c.nodes[leader].binary.to_string();

    // A follower redirects to the leader's binary address, and does nothing.
    let mut f = bin(follower);
    let e = f.put(b"b-1", b"from a follower").unwrap_err();
    assert_eq!(e.moved(), Some((1, leader_addr.as_str())), "{e}");
    let e = f.get(b"b-1").unwrap_err();
    assert_eq!(e.moved(), Some((1, leader_addr.as_str())), "{e}");
    assert_eq!(
        f.ping(b"hi").unwrap(),
        b"hi",
        "keyless operations run anywhere"
    );

    // The leader serves every kind of keyed operation.
    let mut l = bin(leader);
    assert_eq!(l.get(b"b-1").unwrap(), None, "the follower wrote nothing");
    let v1 = l.put(b"b-1", b"one").unwrap();
    let v2 = l.put(b"b-2", b"two").unwrap();
    assert!(v2 > v1, "write versions grow: {v1} {v2}");
    assert_eq!(l.get(b"b-1").unwrap().as_deref(), Some(&b"one"[..]));
    assert_eq!(l.fetch_add_u64(b"b-counter", 5).unwrap(), 0);
    assert_eq!(l.fetch_add_u64(b"b-counter", 5).unwrap(), 5);
    assert!(l.cas(b"b-2", Some(b"two"), b"deux").unwrap());
    assert!(!l.cas(b"b-2", Some(b"two"), b"zwei").unwrap());
    assert!(l.delete(b"b-1").unwrap());
    assert!(!l.delete(b"b-1").unwrap());
    let deadline = accelkv_tree::now_ms() + 600_000;
    l.put_expiring(b"b-3", b"three", deadline).unwrap();
    assert_eq!(l.deadline(b"b-3").unwrap(), Some(deadline));
    let keys = |r: accelkv_client::ScanReply| -> Vec<Vec<u8>> {
        r.0.into_iter().map(|(k, _)| k).collect()
    };
    let got = keys(l.scan(b"b-", b"b-~", 100).unwrap());
    assert_eq!(got, [&b"b-2"[..], b"b-3", b"b-counter"]);
    // One frame of many operations: writes then reads, answered together; the frame's
    // reads see its writes.
    let names: Vec<String> = (0..40).map(|i| format!("f-{i:02}")).collect();
    let mut ops: Vec<Request> = names
        .iter()
        .enumerate()
        .map(|(i, k)| Request::Put {
            id: i as u16,
            key: k.as_bytes(),
            value: b"x",
        })
        .collect();
    ops.extend(names.iter().enumerate().map(|(i, k)| Request::Get {
        id: 100 + i as u16,
        key: k.as_bytes(),
    }));
    let before = commands_led(&c.seeds());
    let answers = l.execute(&ops).unwrap();
    assert_eq!(answers.len(), 80);
    // Each operation counted once towards the range's load (--split-load), a read too.
    assert_eq!(commands_led(&c.seeds()) - before, 80);
    for a in answers {
        if a.id >= 100 {
            assert_eq!(a.into_value().unwrap().as_deref(), Some(&b"x"[..]));
        } else {
            a.into_version().unwrap();
        }
    }
    // What the binary protocol wrote is what RESP reads, through any node.
    let mut resp = RespClient::new(c.seeds());
    for (k, v) in [("b-2", "deux"), ("b-3", "three"), ("f-07", "x")] {
        match resp.call(&[b"GET", k.as_bytes()], false, Duration::from_secs(10)) {
            Outcome::Done(Value::Bulk(Some(got))) => assert_eq!(got, v.as_bytes()),
            o => panic!("GET {k}: {o:?}"),
        }
    }

    // UDP refuses keyed operations in cluster mode (there is no connection to wait on).
    let mut udp = UdpClient::connect(c.nodes[leader].binary, None).unwrap();
    match udp.get(b"b-2") {
        Err(ClientError::Status(Status::Unsupported, m)) => assert!(m.contains("UDP"), "{m}"),
        r => panic!("{r:?}"),
    }

    // kill -9 the leader: a new one serves what the binary protocol wrote.
    c.kill9(leader);
    let got = follow(&c, |cl| cl.get(b"b-2"));
    assert_eq!(got.as_deref(), Some(&b"deux"[..]));
    assert_eq!(follow(&c, |cl| cl.fetch_add_u64(b"b-counter", 1)), 10);
    assert_eq!(follow(&c, |cl| cl.deadline(b"b-3")), Some(deadline));
    assert_eq!(follow(&c, |cl| cl.get(b"b-1")), None);
    for k in &names {
        assert_eq!(
            follow(&c, |cl| cl.get(k.as_bytes())).as_deref(),
            Some(&b"x"[..])
        );
    }

    // A split at "b-5": a scan across it is refused rather than cut short; one inside a
    // range is served; a key past it goes to the new range.
    let live = (0..3)
        .filter(|&i| c.alive(i))
        .map(|i| c.nodes[i].resp)
        .collect();
    let mut resp = RespClient::new(live);
    match resp.call(
        &[b"CLUSTER", b"SPLIT", b"b-5"],
        true,
        Duration::from_secs(20),
    ) {
        Outcome::Done(Value::Integer(_)) => {}
        o => panic!("CLUSTER SPLIT answered {o:?}"),
    }
    follow(&c, |cl| cl.put(b"b-7", b"seven"));
    let e = follow(&c, |cl| match cl.scan(b"b-", b"b-~", 100) {
        Err(ClientError::Status(Status::Error, m)) => Ok(m),
        Err(e) => Err(e),
        Ok(r) => panic!("a scan across ranges was served: {r:?}"),
    });
    assert!(e.contains("CROSSSLOT"), "{e}");
    let got = keys(follow(&c, |cl| cl.scan(b"b-", b"b-5", 100)));
    assert_eq!(got, [&b"b-2"[..], b"b-3"]);
    let got = keys(follow(&c, |cl| cl.scan(b"b-5", b"c", 100)));
    assert_eq!(got, [&b"b-7"[..], b"b-counter"]);
}
