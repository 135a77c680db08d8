//! The server's log: `tracing` events (the server's own and those of the libraries it runs,
//! openraft's and tonic's in cluster mode) written by `tracing-subscriber` with a timestamp,
//! the level and the module, as text or JSON lines, to stderr or a file.
//!
//! The level comes from `--log-level` (`error`, `warn`, `info`, the default, `debug` or
//! `trace`; or any filter directive such as `info,openraft=warn`); `RUST_LOG`, when set,
//! wins over it, as in every `tracing` program.

use std::path::PathBuf;
use tracing_subscriber::EnvFilter;

/// Where and how the server logs.
#[derive(Clone, Debug)]
pub struct LogSettings {
    /// A filter directive (`info`, `warn,accelkv_server::cluster=debug`, …).
    pub level: String,
    /// Append to this file instead of writing to stderr.
    pub file: Option<PathBuf>,
    /// One JSON object per line instead of text.
    pub json: bool,
}

impl Default for LogSettings {
    fn default() -> LogSettings {
        LogSettings {
            level: "info".into(),
            file: None,
            json: false,
        }
    }
}

impl LogSettings {
    /// Checks the settings the flags and file give: a level that parses as a filter, a
    /// format that is `text` or `json`.
    pub fn resolve(
        level: Option<String>,
        file: Option<PathBuf>,
        format: Option<String>,
    ) -> Result<LogSettings, String> {
        let level = level.unwrap_or_else(|| "info".into());
        // A bare word must be a level (EnvFilter would take it as a module's name).
        let levels = ["off", "error", "warn", "info", "debug", "trace"];
        let bad = |why: String| format!("--log-level {level}: {why}");
        for part in level.split(',') {
            if !part.contains('=') && !levels.contains(&part.trim().to_ascii_lowercase().as_str()) {
                return Err(bad(format!(
                    "expected one of {}, or target=level",
                    levels.join(", ")
                )));
            }
        }
        EnvFilter::try_new(&level).map_err(|e| bad(e.to_string()))?;
        let json = match format.as_deref() {
            None | Some("text") => false,
            Some("json") => true,
            Some(other) => return Err(format!("--log-format {other}: expected text or json")),
        };
        Ok(LogSettings { level, file, json })
    }
}

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
        assert!(LogSettings::resolve(Some("warn".into()), None, None).is_ok());
        assert!(
            LogSettings::resolve(Some("info,openraft=warn".into()), None, Some("json".into()))
                .unwrap()
                .json
        );
        assert!(LogSettings::resolve(Some("loud".into()), None, None).is_err());
        assert!(LogSettings::resolve(Some("WARN".into()), None, None).is_ok());
        assert!(LogSettings::resolve(None, None, Some("xml".into())).is_err());
        assert_eq!(
            LogSettings::resolve(None, None, None).unwrap().level,
            "info"
        );
    }
}
