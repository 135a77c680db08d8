//! The memcached port end to end: the real server, driven over TCP (and UDP) with the exact
//! bytes a memcached client sends, checking memcached's answers, the one keyspace shared
//! with RESP, flags, CAS from versions, expiry, auth, limits and the UDP size rule.

mod common;

use common::{RespConn, Server};
use std::io::{Read, Write};
use std::net::{TcpStream, UdpSocket};
use std::time::{Duration, Instant};

struct Mc {
    s: TcpStream,
    buf: Vec<u8>,
}

impl Mc {
    fn new(srv: &Server) -> Mc {
        let s = TcpStream::connect(srv.memcached).expect("connect memcached port");
        s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
        Mc { s, buf: Vec::new() }
    }

    /// Sends `req` and reads until the reply ends with `end` (a whole reply's last line).
    fn call(&mut self, req: &[u8], end: &[u8]) -> String {
        self.s.write_all(req).unwrap();
        self.read_until(end)
    }

    fn read_until(&mut self, end: &[u8]) -> String {
        let deadline = Instant::now() + Duration::from_secs(10);
        while !self.buf.ends_with(end) {
            assert!(Instant::now() < deadline, "timed out: {:?}", self.text());
            let mut chunk = [0u8; 65536];
            let n = self.s.read(&mut chunk).expect("read");
            assert!(n > 0, "closed: {:?}", self.text());
            self.buf.extend_from_slice(&chunk[..n]);
        }
        let t = self.text();
        self.buf.clear();
        t
    }

    fn text(&self) -> String {
        String::from_utf8_lossy(&self.buf).into_owned()
    }
}

/// The CAS unique in a `gets` reply of one item.
fn cas_of(reply: &str) -> u64 {
    reply
        .lines()
        .next()
        .unwrap()
        .split(' ')
        .nth(4)
        .unwrap()
        .parse()
        .unwrap()
}

#[test]
fn classic_commands_answer_as_memcached() {
    let srv = Server::start(&[]);
    let mut m = Mc::new(&srv);
    assert_eq!(m.call(b"set a 5 0 3\r\nabc\r\n", b"\r\n"), "STORED\r\n");
    assert_eq!(
        m.call(b"get a missing\r\n", b"END\r\n"),
        "VALUE a 5 3\r\nabc\r\nEND\r\n"
    );
    // add / replace follow presence
    assert_eq!(m.call(b"add a 0 0 1\r\nx\r\n", b"\r\n"), "NOT_STORED\r\n");
    assert_eq!(
        m.call(b"replace b 0 0 1\r\nx\r\n", b"\r\n"),
        "NOT_STORED\r\n"
    );
    assert_eq!(m.call(b"add b 1 0 1\r\nx\r\n", b"\r\n"), "STORED\r\n");
    // append/prepend keep the flags
    m.call(b"append a 0 0 2\r\nde\r\n", b"\r\n");
    m.call(b"prepend a 0 0 1\r\nZ\r\n", b"\r\n");
    assert_eq!(
        m.call(b"get a\r\n", b"END\r\n"),
        "VALUE a 5 6\r\nZabcde\r\nEND\r\n"
    );
    assert_eq!(
        m.call(b"append nope 0 0 1\r\nx\r\n", b"\r\n"),
        "NOT_STORED\r\n"
    );
    // incr wraps at 2^64, decr stops at 0, text is refused
    m.call(b"set n 0 0 20\r\n18446744073709551615\r\n", b"\r\n");
    assert_eq!(m.call(b"incr n 2\r\n", b"\r\n"), "1\r\n");
    assert_eq!(m.call(b"decr n 5\r\n", b"\r\n"), "0\r\n");
    assert_eq!(
        m.call(b"incr a 1\r\n", b"\r\n"),
        "CLIENT_ERROR cannot increment or decrement non-numeric value\r\n"
    );
    assert_eq!(m.call(b"incr none 1\r\n", b"\r\n"), "NOT_FOUND\r\n");
    // touch, delete
    assert_eq!(m.call(b"touch a 100\r\n", b"\r\n"), "TOUCHED\r\n");
    assert_eq!(m.call(b"touch none 100\r\n", b"\r\n"), "NOT_FOUND\r\n");
    assert_eq!(m.call(b"delete a\r\n", b"\r\n"), "DELETED\r\n");
    assert_eq!(m.call(b"delete a 0\r\n", b"\r\n"), "NOT_FOUND\r\n");
    // noreply: nothing comes back, the effect happens
    m.s.write_all(b"set q 3 0 1 noreply\r\nq\r\ndelete b noreply\r\n")
        .unwrap();
    assert_eq!(
        m.call(b"get q b\r\n", b"END\r\n"),
        "VALUE q 3 1\r\nq\r\nEND\r\n"
    );
    // errors
    assert_eq!(m.call(b"bogus\r\n", b"\r\n"), "ERROR\r\n");
    assert_eq!(
        m.call(b"set k 0 0 x\r\n", b"\r\n"),
        "CLIENT_ERROR bad command line format\r\n"
    );
    // As memcached: the declared bytes and two more are the chunk; the rest is a line.
    assert_eq!(
        m.call(b"set k 0 0 1\r\nxy\r\n", b"ERROR\r\n"),
        "CLIENT_ERROR bad data chunk\r\nERROR\r\n"
    );
    assert!(m.call(b"version\r\n", b"\r\n").starts_with("VERSION "));
    assert_eq!(m.call(b"verbosity 1\r\n", b"\r\n"), "OK\r\n");
    let stats = m.call(b"stats\r\n", b"END\r\n");
    assert!(stats.contains("STAT curr_items "), "{stats}");
    let settings = m.call(b"stats settings\r\n", b"END\r\n");
    assert!(
        settings.contains("STAT item_size_max 1048576"),
        "{settings}"
    );
    assert_eq!(m.call(b"quit\r\n", b""), "");
}

#[test]
fn cas_uniques_come_from_versions_and_catch_every_change() {
    let srv = Server::start(&[]);
    let (mut a, mut b) = (Mc::new(&srv), Mc::new(&srv));
    a.call(b"set k 1 0 1\r\n1\r\n", b"\r\n");
    let u = cas_of(&a.call(b"gets k\r\n", b"END\r\n"));
    let u2 = cas_of(&b.call(b"gets k\r\n", b"END\r\n"));
    assert_eq!(u, u2, "two reads of an unchanged item agree");
    // b wins, a's unique is now stale
    assert_eq!(
        b.call(format!("cas k 2 0 1 {u}\r\nb\r\n").as_bytes(), b"\r\n"),
        "STORED\r\n"
    );
    assert_eq!(
        a.call(format!("cas k 2 0 1 {u}\r\na\r\n").as_bytes(), b"\r\n"),
        "EXISTS\r\n"
    );
    assert_eq!(
        a.call(b"get k\r\n", b"END\r\n"),
        "VALUE k 2 1\r\nb\r\nEND\r\n"
    );
    // a touch changes the item too; so does a RESP write of the same key
    let u = cas_of(&a.call(b"gets k\r\n", b"END\r\n"));
    let mut r = RespConn::new(&srv);
    r.str(&["SET", "k", "resp"]);
    assert_eq!(
        a.call(format!("cas k 0 0 1 {u}\r\na\r\n").as_bytes(), b"\r\n"),
        "EXISTS\r\n"
    );
    assert_eq!(
        a.call(b"cas gone 0 0 1 1\r\na\r\n", b"\r\n"),
        "NOT_FOUND\r\n"
    );
    // a pipeline of set, gets, cas on one connection sees its own set's unique
    let reply = a.call(b"set p 0 0 1\r\nx\r\ngets p\r\n", b"END\r\n");
    let u = cas_of(reply.strip_prefix("STORED\r\n").unwrap());
    assert_eq!(
        a.call(format!("cas p 0 0 1 {u}\r\ny\r\n").as_bytes(), b"\r\n"),
        "STORED\r\n"
    );
}

#[test]
fn concurrent_cas_increments_lose_nothing() {
    let srv = Server::start(&[]);
    Mc::new(&srv).call(b"set c 0 0 1\r\n0\r\n", b"\r\n");
    let threads: Vec<_> = (0..4)
        .map(|_| {
            let addr = srv.memcached;
            std::thread::spawn(move || {
                let s = TcpStream::connect(addr).unwrap();
                s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
                let mut m = Mc { s, buf: Vec::new() };
                let mut done = 0;
                while done < 50 {
                    let r = m.call(b"gets c\r\n", b"END\r\n");
                    let n: u64 = r.lines().nth(1).unwrap().parse().unwrap();
                    let v = (n + 1).to_string();
                    let req = format!("cas c 0 0 {} {}\r\n{v}\r\n", v.len(), cas_of(&r));
                    match m.call(req.as_bytes(), b"\r\n").as_str() {
                        "STORED\r\n" => done += 1,
                        "EXISTS\r\n" => {}
                        other => panic!("{other}"),
                    }
                }
            })
        })
        .collect();
    for t in threads {
        t.join().unwrap();
    }
    assert_eq!(
        Mc::new(&srv).call(b"get c\r\n", b"END\r\n"),
        "VALUE c 0 3\r\n200\r\nEND\r\n"
    );
}

#[test]
fn one_keyspace_with_resp_and_flags_survive_resp_reads() {
    let srv = Server::start(&[]);
    let mut m = Mc::new(&srv);
    let mut r = RespConn::new(&srv);
    m.call(b"set shared 42 0 5\r\nhello\r\n", b"\r\n");
    assert_eq!(r.str(&["GET", "shared"]), common::bulk("hello"));
    r.str(&["SET", "fromresp", "world"]);
    assert_eq!(
        m.call(b"get fromresp shared\r\n", b"END\r\n"),
        "VALUE fromresp 0 5\r\nworld\r\nVALUE shared 42 5\r\nhello\r\nEND\r\n"
    );
    // An in-place RESP change keeps the flags; a RESP SET replaces the item (flags 0).
    r.str(&["APPEND", "shared", "!"]);
    assert_eq!(
        m.call(b"get shared\r\n", b"END\r\n"),
        "VALUE shared 42 6\r\nhello!\r\nEND\r\n"
    );
    // So does one inside a transaction (its writes go back as one atomic batch).
    r.str(&["MULTI"]);
    r.str(&["APPEND", "shared", "?"]);
    r.str(&["EXEC"]);
    assert_eq!(
        m.call(b"get shared\r\n", b"END\r\n"),
        "VALUE shared 42 7\r\nhello!?\r\nEND\r\n"
    );
    r.str(&["SET", "shared", "x"]);
    assert_eq!(
        m.call(b"get shared\r\n", b"END\r\n"),
        "VALUE shared 0 1\r\nx\r\nEND\r\n"
    );
}

#[test]
fn exptime_is_relative_absolute_or_past_and_flush_all_takes_a_delay() {
    let srv = Server::start(&[]);
    let mut m = Mc::new(&srv);
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs();
    m.call(b"set rel 0 1 1\r\nr\r\n", b"\r\n");
    m.call(
        format!("set abs 0 {} 1\r\na\r\n", now + 1).as_bytes(),
        b"\r\n",
    );
    m.call(b"set past 0 -1 1\r\np\r\n", b"\r\n");
    m.call(b"set keep 0 0 1\r\nk\r\n", b"\r\n");
    assert_eq!(
        m.call(b"get past\r\n", b"END\r\n"),
        "END\r\n",
        "a negative exptime expires at once"
    );
    let ttl = m.call(b"mg rel t v\r\n", b"\r\nr\r\n");
    assert!(ttl.starts_with("VA 1 t1"), "{ttl}");
    std::thread::sleep(Duration::from_millis(2100));
    assert_eq!(
        m.call(b"get rel abs keep\r\n", b"END\r\n"),
        "VALUE keep 0 1\r\nk\r\nEND\r\n"
    );
    // gat touches as it reads
    assert_eq!(
        m.call(b"gat -1 keep\r\n", b"END\r\n"),
        "VALUE keep 0 1\r\nk\r\nEND\r\n"
    );
    assert_eq!(m.call(b"get keep\r\n", b"END\r\n"), "END\r\n");
    // flush_all with a delay: items stay until then
    m.call(b"set f 0 0 1\r\nf\r\n", b"\r\n");
    assert_eq!(m.call(b"flush_all 1\r\n", b"\r\n"), "OK\r\n");
    assert_eq!(
        m.call(b"get f\r\n", b"END\r\n"),
        "VALUE f 0 1\r\nf\r\nEND\r\n"
    );
    std::thread::sleep(Duration::from_millis(1400));
    assert_eq!(m.call(b"get f\r\n", b"END\r\n"), "END\r\n");
    m.call(b"set g 0 0 1\r\ng\r\n", b"\r\n");
    assert_eq!(m.call(b"flush_all\r\n", b"\r\n"), "OK\r\n");
    assert_eq!(m.call(b"get g\r\n", b"END\r\n"), "END\r\n");
}

#[test]
fn meta_commands_and_their_flags() {
    let srv = Server::start(&[]);
    let mut m = Mc::new(&srv);
    assert_eq!(m.call(b"mn\r\n", b"\r\n"), "MN\r\n");
    assert_eq!(m.call(b"ms m 2 F33 T60\r\nhi\r\n", b"\r\n"), "HD\r\n");
    let r = m.call(b"mg m s f v k Oxy\r\n", b"hi\r\n");
    assert_eq!(r, "VA 2 s2 f33 km Oxy\r\nhi\r\n");
    assert_eq!(m.call(b"mg none v\r\n", b"\r\n"), "EN\r\n");
    // quiet: only what is not the common answer, then mn marks the end
    assert_eq!(m.call(b"mg none v q\r\nmn\r\n", b"MN\r\n"), "MN\r\n");
    // modes, CAS compare
    assert_eq!(m.call(b"ms m 1 ME\r\nx\r\n", b"\r\n"), "NS\r\n");
    let cas: u64 = m
        .call(b"mg m c\r\n", b"\r\n")
        .trim_end()
        .strip_prefix("HD c")
        .unwrap()
        .parse()
        .unwrap();
    assert_eq!(
        m.call(
            format!("ms m 1 C{}\r\nz\r\n", cas + 1000).as_bytes(),
            b"\r\n"
        ),
        "EX\r\n"
    );
    assert_eq!(
        m.call(format!("ms m 1 C{cas} MA\r\n!\r\n").as_bytes(), b"\r\n"),
        "HD\r\n"
    );
    assert_eq!(m.call(b"mg m v f\r\n", b"hi!\r\n"), "VA 3 f33\r\nhi!\r\n");
    // ma: vivify with an initial value, then count
    assert_eq!(m.call(b"ma c N0 J10 v\r\n", b"10\r\n"), "VA 2\r\n10\r\n");
    assert_eq!(m.call(b"ma c D5 v\r\n", b"15\r\n"), "VA 2\r\n15\r\n");
    assert_eq!(m.call(b"ma c MD D20 v\r\n", b"0\r\n"), "VA 1\r\n0\r\n");
    assert_eq!(m.call(b"ma nope\r\n", b"\r\n"), "NF\r\n");
    // md, base64 keys
    assert_eq!(m.call(b"md m\r\n", b"\r\n"), "HD\r\n");
    assert_eq!(m.call(b"md m\r\n", b"\r\n"), "NF\r\n");
    assert_eq!(m.call(b"ms Ymlu 1 b\r\nB\r\n", b"\r\n"), "HD\r\n");
    assert_eq!(
        m.call(b"get bin\r\n", b"END\r\n"),
        "VALUE bin 0 1\r\nB\r\nEND\r\n"
    );
    assert!(m
        .call(b"me c\r\n", b"\r\n")
        .starts_with("ME c exp=-1 la=0 cas="));
    assert!(m
        .call(b"ms x 1 E5\r\nx\r\n", b"\r\n")
        .starts_with("CLIENT_ERROR"));
}

#[test]
fn limits_refuse_cleanly_and_lose_nothing() {
    let srv = Server::start(&[]);
    let mut m = Mc::new(&srv);
    m.call(b"set big 0 0 1\r\nb\r\n", b"\r\n");
    // An item over the limit: the data is swallowed, the old item removed (memcached).
    let huge = vec![b'x'; (1 << 20) + 1];
    let mut req = b"set big 0 0 1048577\r\n".to_vec();
    req.extend_from_slice(&huge);
    req.extend_from_slice(b"\r\nget big\r\n");
    assert_eq!(
        m.call(&req, b"END\r\n"),
        "SERVER_ERROR object too large for cache\r\nEND\r\n"
    );
    // A 250-byte key is fine, 251 is not.
    let k = "k".repeat(250);
    assert_eq!(
        m.call(format!("set {k} 0 0 1\r\nv\r\n").as_bytes(), b"\r\n"),
        "STORED\r\n"
    );
    assert!(m
        .call(format!("get {k}k\r\n").as_bytes(), b"\r\n")
        .starts_with("CLIENT_ERROR"));
    // A line longer than memcached reads closes the connection.
    let mut m2 = Mc::new(&srv);
    m2.s.write_all(&[b'a'; 4096]).unwrap();
    let mut rest = Vec::new();
    let _ = m2.s.read_to_end(&mut rest);
    assert!(rest.is_empty(), "no reply, closed");
    // The server lives on.
    assert_eq!(
        m.call(format!("get {k}\r\n").as_bytes(), b"END\r\n"),
        format!("VALUE {k} 0 1\r\nv\r\nEND\r\n")
    );
}

#[test]
fn a_multi_get_of_a_hundred_keys_answers_in_order() {
    let srv = Server::start(&[]);
    let mut m = Mc::new(&srv);
    let mut req = Vec::new();
    for i in 0..100 {
        req.extend_from_slice(
            format!("set key{i} {i} 0 {}\r\nv{i}\r\n", 1 + i.to_string().len()).as_bytes(),
        );
    }
    m.s.write_all(&req).unwrap();
    let got = m.read_until(b"STORED\r\n".repeat(100).as_slice());
    assert_eq!(got.matches("STORED").count(), 100);
    let keys: Vec<String> = (0..100).rev().map(|i| format!("key{i}")).collect();
    let reply = m.call(format!("get {}\r\n", keys.join(" ")).as_bytes(), b"END\r\n");
    let want: String = (0..100)
        .rev()
        .map(|i| format!("VALUE key{i} {i} {}\r\nv{i}\r\n", 1 + i.to_string().len()))
        .collect();
    assert_eq!(reply, want + "END\r\n");
}

#[test]
fn with_a_password_memcached_ascii_auth_comes_first() {
    let srv = Server::start(&["--password", "sesame"]);
    let mut m = Mc::new(&srv);
    assert_eq!(
        m.call(b"get a\r\n", b"\r\n"),
        "CLIENT_ERROR unauthenticated\r\n"
    );
    assert_eq!(
        m.call(b"set auth 0 0 9\r\nuser nope\r\n", b"\r\n"),
        "CLIENT_ERROR authentication failure\r\n"
    );
    assert_eq!(
        m.call(b"set auth 0 0 11\r\nuser sesame\r\n", b"\r\n"),
        "STORED\r\n"
    );
    assert_eq!(m.call(b"set a 0 0 1\r\nv\r\n", b"\r\n"), "STORED\r\n");
    assert_eq!(
        m.call(b"get a\r\n", b"END\r\n"),
        "VALUE a 0 1\r\nv\r\nEND\r\n"
    );
    // A stranger's oversized set is refused without removing the item it names.
    let mut stranger = Mc::new(&srv);
    let mut req = b"set a 0 0 1048577\r\n".to_vec();
    req.extend_from_slice(&vec![b'x'; (1 << 20) + 1]);
    req.extend_from_slice(b"\r\n");
    assert_eq!(
        stranger.call(&req, b"\r\n"),
        "SERVER_ERROR object too large for cache\r\n"
    );
    assert_eq!(
        m.call(b"get a\r\n", b"END\r\n"),
        "VALUE a 0 1\r\nv\r\nEND\r\n"
    );
}

#[test]
fn udp_replies_never_outgrow_their_request() {
    let srv = Server::start(&["--memcached-udp"]);
    Mc::new(&srv).call(b"set k 7 0 1\r\nv\r\n", b"\r\n");
    let u = UdpSocket::bind("127.0.0.1:0").unwrap();
    u.set_read_timeout(Some(Duration::from_millis(500)))
        .unwrap();
    let ask = |id: u8, body: &[u8]| -> Option<Vec<u8>> {
        let mut d = vec![0, id, 0, 0, 0, 1, 0, 0];
        d.extend_from_slice(body);
        u.send_to(&d, srv.memcached).unwrap();
        let mut b = [0u8; 2048];
        let (n, _) = u.recv_from(&mut b).ok()?;
        assert!(
            n <= d.len(),
            "reply of {n} bytes to a {}-byte request",
            d.len()
        );
        assert_eq!(&b[..8], &[0, id, 0, 0, 0, 1, 0, 0]);
        Some(b[8..n].to_vec())
    };
    // Padded: the answer fits.
    let padded = format!("get k{}\r\n", " ".repeat(20));
    assert_eq!(
        ask(1, padded.as_bytes()).as_deref(),
        Some(&b"VALUE k 7 1\r\nv\r\nEND\r\n"[..])
    );
    // Bare: the answer is larger than the request, and so is the error: no reply.
    assert_eq!(ask(2, b"get k\r\n"), None);
    // Writes are refused.
    let set = format!("set k 0 0 1\r\nx\r\n{}", " ".repeat(40));
    let r = ask(3, set.as_bytes()).unwrap();
    assert!(r.starts_with(b"SERVER_ERROR writes are not accepted"));
    // A value bigger than its request gets the too-large error instead.
    Mc::new(&srv).call(
        format!("set big 0 0 100\r\n{}\r\n", "b".repeat(100)).as_bytes(),
        b"\r\n",
    );
    let r = ask(4, format!("get big{}\r\n", " ".repeat(60)).as_bytes()).unwrap();
    assert_eq!(r, b"SERVER_ERROR object too large for cache\r\n");
}

#[test]
fn durable_items_keep_their_flags_across_a_restart() {
    let dir = std::env::temp_dir().join(format!("accelkv-mc-flags-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let d = dir.to_str().unwrap();
    {
        let srv = Server::start(&["--data-dir", d, "--sync", "sync"]);
        let mut m = Mc::new(&srv);
        assert_eq!(m.call(b"set f 4242 0 2\r\nhi\r\n", b"\r\n"), "STORED\r\n");
        let big = "x".repeat(3000);
        let req = format!("set g 7 3600 {}\r\n{big}\r\n", big.len());
        assert_eq!(m.call(req.as_bytes(), b"\r\n"), "STORED\r\n");
        drop(srv); // killed
    }
    let srv = Server::start(&["--data-dir", d]);
    let mut m = Mc::new(&srv);
    let r = m.call(b"get f g\r\n", b"END\r\n");
    assert!(
        r.starts_with("VALUE f 4242 2\r\nhi\r\nVALUE g 7 3000\r\n"),
        "{r}"
    );
    drop(srv);
    let _ = std::fs::remove_dir_all(&dir);
}
