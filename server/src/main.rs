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
    if let Err(e) = accelkv_server::logging::init(&settings.log) {
        eprintln!("accelkv-server: {e}");
        std::process::exit(2);
    }
    let to_file = settings.log.file.is_some();
    if let Err(e) = accelkv_server::serve(settings) {
        tracing::error!("{e}");
        if to_file {
            // The log is in a file: say why on the terminal too.
            eprintln!("accelkv-server: {e}");
        }
        std::process::exit(1);
    }
}
