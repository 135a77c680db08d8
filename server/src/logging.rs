//! The server's log: `tracing` events (the server's own and those of the libraries it runs,
//! openraft's and tonic's in cluster mode) written by `tracing-subscriber` with a timestamp,
//! the level and the module, as text or JSON lines, to stderr or a file.
//!
//! The level comes from `--log-level` (`error`, `warn`, `info`, the default, `debug` or
//! `trace`; or any filter directive such as `info,openraft=warn`); `RUST_LOG`, when set,
//! wins over it, as in every `tracing` program.

use crate::config::LogSettings;
use tracing_subscriber::EnvFilter;

/// Installs the log as the process's global `tracing` subscriber (once; a second call
/// changes nothing).
pub fn init(s: &LogSettings) -> Result<(), String> {
    let filter = match std::env::var("RUST_LOG") {
        Ok(env) if !env.is_empty() => {
            EnvFilter::try_new(&env).map_err(|e| format!("RUST_LOG {env}: {e}"))?
        }
        _ => EnvFilter::try_new(&s.level).map_err(|e| format!("--log-level {}: {e}", s.level))?,
    };
    let builder = tracing_subscriber::fmt().with_env_filter(filter);
    let result = match (&s.file, s.json) {
        (None, false) => {
            // Colours only for a terminal, not for a file or a supervisor's pipe.
            let tty = std::io::IsTerminal::is_terminal(&std::io::stderr());
            builder
                .with_ansi(tty)
                .with_writer(std::io::stderr)
                .try_init()
        }
        (None, true) => builder.json().with_writer(std::io::stderr).try_init(),
        (Some(path), json) => {
            let f = std::fs::OpenOptions::new()
                .create(true)
                .append(true)
                .open(path)
                .map_err(|e| format!("--log-file {}: {e}", path.display()))?;
            let writer = std::sync::Mutex::new(f);
            match json {
                false => builder.with_ansi(false).with_writer(writer).try_init(),
                true => builder.json().with_writer(writer).try_init(),
            }
        }
    };
    // Already installed (a test calling twice): keep the first.
    let _ = result;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn levels_and_formats_are_checked() {
        let s = |l: Option<&str>, f: Option<&str>| {
            LogSettings::from_parts(l.map(Into::into), None, f.map(Into::into))
        };
        assert!(s(Some("warn"), None).is_ok());
        assert!(s(Some("info,openraft=warn"), Some("json")).unwrap().json);
        assert!(s(Some("loud"), None).is_err());
        assert!(s(Some("WARN"), None).is_ok());
        assert!(s(None, Some("xml")).is_err());
        assert_eq!(s(None, None).unwrap().level, "info");
        assert!(init(&s(Some("warn"), None).unwrap()).is_ok());
    }
}
