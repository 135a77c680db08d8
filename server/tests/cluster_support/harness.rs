//! A cluster of real `accelkv-server` processes (node `i` on loopback address
//! `127.0.0.<10+i>`, so each sends from an address of its own) and a real etcd, each node's
//! Raft port behind a [`Proxy`] the test can cut.

use super::proxy::Proxy;
use accelkv_cluster::testing::Etcd;
use std::io::{BufRead, BufReader};
use std::net::{IpAddr, SocketAddr};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

pub struct Node {
    pub id: u64,
    pub ip: IpAddr,
    pub resp: SocketAddr,
    /// Its binary protocol's TCP (and UDP) address.
    pub binary: SocketAddr,
    /// Its admin HTTP endpoint (/metrics).
    pub admin: SocketAddr,
    pub raft: SocketAddr,
    pub proxy: Proxy,
    child: Option<Child>,
    dir: PathBuf,
}

pub struct Cluster {
    pub etcd: Etcd,
    pub nodes: Vec<Node>,
    dir: PathBuf,
    name: String,
    /// Flags every node gets besides the harness's own.
    extra: Vec<String>,
}

fn free_port(ip: IpAddr) -> u16 {
    std::net::TcpListener::bind((ip, 0))
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

impl Cluster {
    /// Starts etcd and `n` nodes (a one-range map over the first three), and waits until
    /// every node is serving.
    pub fn start(n: u64, name: &str) -> Cluster {
        Cluster::start_with(n, name, &[])
    }

    /// [`Cluster::start`] with `extra` flags for every node.
    pub fn start_with(n: u64, name: &str, extra: &[&str]) -> Cluster {
        let dir =
            std::env::temp_dir().join(format!("accelkv-cluster-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let etcd = Etcd::start(&dir.join("etcd"));
        let nodes = (1..=n)
            .map(|id| {
                let ip = IpAddr::from([127, 0, 0, 10 + id as u8]);
                let raft = SocketAddr::new(ip, free_port(ip));
                let proxy = Proxy::start(SocketAddr::new(ip, 0), raft);
                Node {
                    id,
                    ip,
                    resp: SocketAddr::new(ip, free_port(ip)),
                    binary: SocketAddr::new(ip, free_port(ip)),
                    admin: SocketAddr::new(ip, free_port(ip)),
                    raft,
                    proxy,
                    child: None,
                    dir: dir.join(format!("n{id}")),
                }
            })
            .collect();
        let mut c = Cluster {
            etcd,
            nodes,
            dir,
            name: name.into(),
            extra: extra.iter().map(|s| s.to_string()).collect(),
        };
        // Every node waits for the others before it listens, so they start together; one
        // whose port another process took meanwhile (free_port's race) gets new ports.
        let (tx, rx) = std::sync::mpsc::channel();
        let mut waiting = 0;
        for i in 0..c.nodes.len() {
            c.launch(i, &tx);
            waiting += 1;
        }
        let t = Instant::now();
        while waiting > 0 {
            let left = Duration::from_secs(60).saturating_sub(t.elapsed());
            let Ok((i, listening)) = rx.recv_timeout(left) else {
                let logs: String = (0..c.nodes.len()).map(|i| c.log(i)).collect();
                panic!("the cluster did not start in 60 s:\n{logs}");
            };
            if listening {
                waiting -= 1;
                continue;
            }
            let log = c.log(i);
            assert!(
                log.contains("already in use"),
                "node {} did not start:\n{log}",
                i + 1
            );
            let n = &mut c.nodes[i];
            n.child = None;
            n.resp = SocketAddr::new(n.ip, free_port(n.ip));
            n.binary = SocketAddr::new(n.ip, free_port(n.ip));
            n.admin = SocketAddr::new(n.ip, free_port(n.ip));
            n.raft = SocketAddr::new(n.ip, free_port(n.ip));
            n.proxy = Proxy::start(SocketAddr::new(n.ip, 0), n.raft);
            c.launch(i, &tx);
        }
        c
    }

    /// Spawns node `i` and reports on `tx`, once it printed its first line, whether that
    /// said it listens.
    fn launch(&mut self, i: usize, tx: &std::sync::mpsc::Sender<(usize, bool)>) {
        let mut child = self.spawn(i);
        let out = child.stdout.take().expect("stdout");
        self.nodes[i].child = Some(child);
        let tx = tx.clone();
        std::thread::spawn(move || {
            let mut line = String::new();
            let _ = BufReader::new(out).read_line(&mut line);
            let _ = tx.send((i, line.contains("listening")));
        });
    }

    fn spawn(&self, i: usize) -> Child {
        let n = &self.nodes[i];
        Command::new(env!("CARGO_BIN_EXE_accelkv-server"))
            .args(["--cluster", &format!("etcd={}", self.etcd.endpoint())])
            .args(["--cluster-name", &self.name])
            .args(["--node-id", &n.id.to_string()])
            .arg("--data-dir")
            .arg(&n.dir)
            .args(["--bind", &n.ip.to_string()])
            .args(["--port", &n.binary.port().to_string()])
            .args(["--admin-port", &n.admin.port().to_string()])
            .args(["--resp-port", &n.resp.port().to_string()])
            .args(["--raft-port", &n.raft.port().to_string()])
            .args(["--raft-advertise", &n.proxy.addr.to_string()])
            .args(["--threads", "1", "--engine-threads", "1"])
            .args(&self.extra)
            .env_remove("ACCELKV_PASSWORD")
            .stdout(Stdio::piped())
            .stderr(self.stderr(i))
            .spawn()
            .expect("start accelkv-server")
    }

    fn stderr(&self, i: usize) -> Stdio {
        let f = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(self.log_path(i))
            .expect("a node's log");
        Stdio::from(f)
    }

    /// Node `i`'s Prometheus metrics, as text.
    pub fn metrics(&self, i: usize) -> String {
        use std::io::{Read, Write};
        let mut h = std::net::TcpStream::connect(self.nodes[i].admin).expect("admin port");
        h.write_all(b"GET /metrics HTTP/1.1\r\n\r\n")
            .expect("write");
        let mut text = String::new();
        let _ = h.read_to_string(&mut text);
        text
    }

    /// Where node `i`'s stderr goes (appended across restarts).
    pub fn log_path(&self, i: usize) -> PathBuf {
        self.dir.join(format!("n{}.stderr", self.nodes[i].id))
    }

    /// What node `i` wrote on stderr so far.
    pub fn log(&self, i: usize) -> String {
        std::fs::read_to_string(self.log_path(i)).unwrap_or_default()
    }

    /// SIGKILLs node `i` (index into `nodes`).
    pub fn kill9(&mut self, i: usize) {
        if let Some(mut c) = self.nodes[i].child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }

    /// Stops node `i` as an operator does (SIGTERM) and waits for it to exit: whether it
    /// exited with status 0.
    pub fn stop(&mut self, i: usize) -> bool {
        let Some(mut c) = self.nodes[i].child.take() else {
            return false;
        };
        let term = Command::new("kill")
            .args(["-TERM", &c.id().to_string()])
            .status();
        let ok = term.is_ok_and(|s| s.success()) && c.wait().is_ok_and(|s| s.success());
        let _ = c.kill();
        ok
    }

    /// Starts node `i` again with its data and ports.
    pub fn restart(&mut self, i: usize) {
        self.kill9(i);
        let child = self.spawn(i);
        self.nodes[i].child = Some(wait_listening(child));
    }

    /// Cuts node `i` off from its peers (both ways) until [`Cluster::heal`].
    pub fn partition(&self, i: usize) {
        let ip = self.nodes[i].ip;
        for (j, n) in self.nodes.iter().enumerate() {
            if j == i {
                for m in &self.nodes {
                    n.proxy.block(m.ip);
                }
            } else {
                n.proxy.block(ip);
            }
        }
    }

    pub fn heal(&self) {
        for n in &self.nodes {
            n.proxy.heal();
        }
    }

    pub fn alive(&self, i: usize) -> bool {
        self.nodes[i].child.is_some()
    }

    /// The index of the node that leads range 1 now, as the live nodes tell (a node that
    /// answers a read itself leads; a follower redirects a connection that named itself a
    /// proxy, rather than proxying its read).
    pub fn leader(&self, timeout: Duration) -> usize {
        let t = Instant::now();
        loop {
            for (i, n) in self.nodes.iter().enumerate() {
                if !self.alive(i) {
                    continue;
                }
                let Ok(s) =
                    std::net::TcpStream::connect_timeout(&n.resp, Duration::from_millis(500))
                else {
                    continue;
                };
                let _ = s.set_read_timeout(Some(Duration::from_secs(2)));
                let mut c = super::client::Conn::from_stream(s);
                c.try_call(&[b"CLIENT", b"SETNAME", b"accelkv-proxy-test"]);
                if let Some(v) = c.try_call(&[b"GET", b"leader-probe"]) {
                    if !matches!(&v, accelkv_proto::resp::Value::Error(_)) {
                        return i;
                    }
                }
            }
            assert!(t.elapsed() < timeout, "no node leads range 1");
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    pub fn seeds(&self) -> Vec<SocketAddr> {
        self.nodes.iter().map(|n| n.resp).collect()
    }
}

impl Drop for Cluster {
    fn drop(&mut self) {
        for i in 0..self.nodes.len() {
            self.kill9(i);
        }
        if std::thread::panicking() {
            // A failed test: its nodes' logs stay for a look.
            eprintln!("the cluster's files and logs: {}", self.dir.display());
        } else {
            let _ = std::fs::remove_dir_all(&self.dir);
        }
    }
}

/// Waits for the listening line (printed once the node's groups are open).
fn wait_listening(mut child: Child) -> Child {
    let mut line = String::new();
    BufReader::new(child.stdout.take().expect("stdout"))
        .read_line(&mut line)
        .expect("listening line");
    assert!(
        line.contains("listening"),
        "the node did not start: {line:?}"
    );
    child
}
