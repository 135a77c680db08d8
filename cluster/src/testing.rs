//! A throwaway etcd for tests: the `etcd` binary (Debian's `etcd-server`) on two free
//! loopback ports with its data in a directory of the caller's, stopped on drop. It can
//! be killed and started again on the same ports and data, as an etcd restart.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// A running (or stopped) etcd.
pub struct Etcd {
    child: Option<Child>,
    dir: PathBuf,
    client_port: u16,
    peer_port: u16,
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("a free loopback port")
}

/// Whether a test that needs etcd should run: true when it is installed; without it the
/// test is skipped and listed (accelkv-testkit), or fails with `ACCELKV_REQUIRE_TOOLS` set.
pub fn etcd_or_skip() -> bool {
    if available() {
        return true;
    }
    accelkv_testkit::skip("etcd is not installed (apt-get install etcd-server)");
    false
}

/// Whether the etcd binary is installed.
pub fn available() -> bool {
    Command::new("etcd")
        .arg("--version")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

impl Etcd {
    /// Starts etcd with its data in `dir`, and waits until it answers.
    pub fn start(dir: &Path) -> Etcd {
        let mut e = Etcd {
            child: None,
            dir: dir.to_path_buf(),
            client_port: free_port(),
            peer_port: free_port(),
        };
        e.restart();
        e
    }

    /// Its client endpoint.
    pub fn endpoint(&self) -> String {
        format!("http://127.0.0.1:{}", self.client_port)
    }

    /// Kills it (`SIGKILL`).
    pub fn kill(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }

    /// Starts it (again) on its ports and data, and waits until it answers.
    pub fn restart(&mut self) {
        self.kill();
        std::fs::create_dir_all(&self.dir).expect("etcd's directory");
        let log = std::fs::File::create(self.dir.join("etcd.log")).expect("etcd's log");
        let client = self.endpoint();
        let peer = format!("http://127.0.0.1:{}", self.peer_port);
        let child = Command::new("etcd")
            .args(["--name", "test", "--data-dir"])
            .arg(self.dir.join("data"))
            .args([
                "--listen-client-urls",
                &client,
                "--advertise-client-urls",
                &client,
            ])
            .args([
                "--listen-peer-urls",
                &peer,
                "--initial-advertise-peer-urls",
                &peer,
            ])
            .args(["--initial-cluster", &format!("test={peer}")])
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .expect("etcd starts (apt-get install etcd-server)");
        self.child = Some(child);
        let t = Instant::now();
        while std::net::TcpStream::connect(("127.0.0.1", self.client_port)).is_err() {
            assert!(t.elapsed() < Duration::from_secs(20), "etcd did not start");
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}

impl Drop for Etcd {
    fn drop(&mut self) {
        self.kill();
    }
}
