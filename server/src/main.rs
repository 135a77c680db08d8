//! `accelkv-server`: starts an in-memory store with the read engine and serves it over the
//! binary protocol (TCP and UDP), RESP, and an admin HTTP endpoint. `--help` lists every
//! flag; see the README for a first session.

use accelkv_server::config;
use clap::Parser;

fn main() {
    let settings = match config::Settings::resolve(config::Args::parse()) {
        Ok(s) => s,
        Err(e) => {
            eprintln!("accelkv-server: {e}");
            std::process::exit(2);
        }
    };
    let rt = match tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("accelkv-server: cannot start the runtime: {e}");
            std::process::exit(1);
        }
    };
    if let Err(e) = rt.block_on(accelkv_server::serve(settings)) {
        eprintln!("accelkv-server: {e}");
        std::process::exit(1);
    }
}
