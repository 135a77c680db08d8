//! The coordinator against a real etcd: nodes register under leases, racing nodes create
//! one map between them, a change is a compare-and-swap on the map's revision, watchers see
//! every change, and a killed and restarted etcd loses neither the map nor the watch.

use accelkv_cluster::testing::Etcd;
use accelkv_cluster::{Coordinator, NodeAddr};
use std::time::{Duration, Instant};

fn addr(i: u64) -> NodeAddr {
    NodeAddr {
        resp: format!("127.0.0.1:{}", 7000 + i),
        raft: format!("127.0.0.1:{}", 8000 + i),
        binary: format!("127.0.0.1:{}", 9000 + i),
    }
}

#[test]
fn the_map_lives_in_etcd_and_survives_its_restart() {
    if !accelkv_cluster::testing::etcd_or_skip() {
        return;
    }
    let dir = std::env::temp_dir().join(format!("accelkv-etcd-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let mut etcd = Etcd::start(&dir);
    let rt = tokio::runtime::Runtime::new().unwrap();
    let ep = vec![etcd.endpoint()];
    let (coords, map) = rt.block_on(async {
        let mut coords = Vec::new();
        for i in 1..=4 {
            let c = Coordinator::connect(&ep, "t").await.unwrap();
            c.register(i, &addr(i), 2).await.unwrap();
            coords.push(c);
        }
        // Four nodes race to create the map; one wins and all agree.
        let maps = futures_join(coords.iter().map(|c| {
            let c = c.clone();
            async move { c.bootstrap(3, false).await }
        }))
        .await;
        for m in &maps {
            assert_eq!(m, &maps[0]);
        }
        assert_eq!(maps[0].ranges[0].replicas, vec![1, 2, 3]);
        assert_eq!(coords[0].live_nodes().await.unwrap().len(), 4);
        (coords, maps[0].clone())
    });
    let mut watch = rt.block_on(coords[3].watch_map()).unwrap();

    // A compare-and-swap on the revision: the second writer with the same read loses.
    let (mut m2, rev) = rt.block_on(coords[0].map()).unwrap().unwrap();
    m2.split(1, b"m", 2).unwrap();
    assert!(rt.block_on(coords[0].replace_map(&m2, rev)).unwrap());
    let mut other = map.clone();
    other.split(1, b"x", 2).unwrap();
    assert!(!rt.block_on(coords[1].replace_map(&other, rev)).unwrap());
    wait_epoch(&rt, &mut watch, m2.epoch);
    assert_eq!(*watch.borrow(), m2);

    // etcd is killed and restarted: the map is there, and the watch follows a change made
    // after the restart.
    etcd.kill();
    std::thread::sleep(Duration::from_millis(500));
    etcd.restart();
    let (mut m3, rev) = retry(&rt, || coords[2].map()).unwrap();
    assert_eq!(m3, m2);
    m3.split(2, b"t", 3).unwrap();
    assert!(rt.block_on(coords[2].replace_map(&m3, rev)).unwrap());
    wait_epoch(&rt, &mut watch, m3.epoch);
    assert_eq!(*watch.borrow(), m3);

    // Leases: a node that stops renewing drops out; the others are registered again.
    let t = Instant::now();
    loop {
        let live = retry(&rt, || coords[0].live_nodes());
        if live.len() == 4 {
            break;
        }
        assert!(
            t.elapsed() < Duration::from_secs(15),
            "nodes did not register again: {live:?}"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    drop(rt); // the keep-alive tasks stop with the runtime
    let rt = tokio::runtime::Runtime::new().unwrap();
    let c = rt.block_on(Coordinator::connect(&ep, "t")).unwrap();
    let t = Instant::now();
    while !rt.block_on(c.live_nodes()).unwrap().is_empty() {
        assert!(
            t.elapsed() < Duration::from_secs(15),
            "leases did not expire"
        );
        std::thread::sleep(Duration::from_millis(200));
    }
    drop(etcd);
    let _ = std::fs::remove_dir_all(&dir);
}

async fn futures_join<
    F: std::future::Future<Output = Result<T, String>> + Send + 'static,
    T: Send + 'static,
>(
    fs: impl Iterator<Item = F>,
) -> Vec<T> {
    let hs: Vec<_> = fs.map(tokio::spawn).collect();
    let mut out = Vec::new();
    for h in hs {
        out.push(h.await.unwrap().unwrap());
    }
    out
}

fn retry<T, F: std::future::Future<Output = Result<T, String>>>(
    rt: &tokio::runtime::Runtime,
    f: impl Fn() -> F,
) -> T {
    let t = Instant::now();
    loop {
        match rt.block_on(f()) {
            Ok(v) => return v,
            Err(e) => assert!(
                t.elapsed() < Duration::from_secs(20),
                "etcd did not answer: {e}"
            ),
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}

fn wait_epoch(
    rt: &tokio::runtime::Runtime,
    w: &mut tokio::sync::watch::Receiver<accelkv_cluster::RangeMap>,
    epoch: u64,
) {
    rt.block_on(async {
        tokio::time::timeout(Duration::from_secs(20), w.wait_for(|m| m.epoch >= epoch))
            .await
            .expect("the watch saw the change")
            .unwrap();
    });
}
