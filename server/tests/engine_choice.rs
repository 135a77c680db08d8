//! `--engine auto|cpu|gpu`: on a machine without a usable GPU (CI, the development
//! machines) `auto` runs the CPU engine and says so in the start-up line and INFO; `gpu` is
//! refused with a clear error; an unknown engine is refused. With a GPU, `auto` picks it.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::process::{Command, Stdio};

fn server(engine: &str) -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_accelkv-server"));
    c.args([
        "--engine",
        engine,
        "--port",
        "0",
        "--resp-port",
        "0",
        "--admin-port",
        "0",
        "--engine-threads",
        "1",
    ]);
    c
}

fn info(resp: &str) -> String {
    let mut s = TcpStream::connect(resp).unwrap();
    s.write_all(b"INFO\r\n").unwrap();
    let mut r = BufReader::new(s);
    let mut head = String::new();
    r.read_line(&mut head).unwrap();
    let len: usize = head.trim_start_matches('$').trim().parse().unwrap();
    let mut body = vec![0; len + 2];
    r.read_exact(&mut body).unwrap();
    String::from_utf8(body).unwrap()
}

#[test]
fn auto_says_which_engine_runs() {
    let gpu = accelkv_gpu::usable_device();
    let mut child = server("auto")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut line = String::new();
    BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    let at = line.find("resp ").unwrap() + 5;
    let resp = line[at..].split_whitespace().next().unwrap().to_string();
    let text = info(&resp);
    let at = line.find("admin http ").unwrap() + 11;
    let admin = line[at..].split_whitespace().next().unwrap().to_string();
    let mut m = TcpStream::connect(&admin).unwrap();
    m.write_all(b"GET /metrics HTTP/1.0\r\n\r\n").unwrap();
    let mut metrics = String::new();
    m.read_to_string(&mut metrics).unwrap();
    child.kill().unwrap();
    let mut stderr = String::new();
    child
        .stderr
        .take()
        .unwrap()
        .read_to_string(&mut stderr)
        .unwrap();
    let _ = child.wait();
    match gpu {
        Err(why) => {
            assert!(line.contains("engine cpu (no usable GPU)"), "{line}");
            assert!(text.contains("engine:cpu\r\n"), "{text}");
            let reason = why.to_string().replace(['\r', '\n'], " ");
            assert!(
                text.contains(&format!("engine_gpu_unavailable:{reason}")),
                "{text}"
            );
            assert!(
                stderr.contains("engine auto: running the CPU engine"),
                "{stderr}"
            );
        }
        Ok(_) => {
            assert!(line.contains("engine gpu on"), "{line}");
            assert!(text.contains("engine:gpu\r\n"), "{text}");
            assert!(text.contains("gpu_launches:"), "{text}");
            assert!(metrics.contains("accelkv_gpu_launches_total"), "{metrics}");
        }
    }
}

#[test]
fn gpu_without_a_gpu_and_unknown_engines_are_refused() {
    let out = server("fpga").output().unwrap();
    assert!(!out.status.success());
    // Refused by the flag parser, which names the values it takes.
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("invalid value 'fpga' for '--engine"), "{err}");
    assert!(
        err.contains("[possible values: auto, cpu, cpu-threads, gpu, rtl]"),
        "{err}"
    );
    if let Err(why) = accelkv_gpu::usable_device() {
        let out = server("gpu").output().unwrap();
        assert!(!out.status.success());
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(
            err.contains("--engine gpu: ") && err.contains(&why.to_string()),
            "{err}"
        );
    }
    // `cpu` never needs a GPU.
    let mut child = server("cpu").stdout(Stdio::piped()).spawn().unwrap();
    let mut line = String::new();
    BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    child.kill().unwrap();
    let _ = child.wait();
    assert!(line.contains("engine cpu,"), "{line}");
}
