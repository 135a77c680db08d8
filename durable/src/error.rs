//! Errors of the durable store.

use std::fmt;

/// What can go wrong opening or writing a durable store.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Error {
    /// The in-memory store refused the operation (bad key, value too large, out of memory).
    Tree(accelkv_tree::Error),
    /// The device failed (full disk, I/O error). A write that returns this may or may not be
    /// applied and may or may not survive a crash; the store refuses further writes until
    /// the device works again, and stays readable.
    Disk(String),
    /// The page file is not one this build can open (bad superblock, another format).
    Corrupt(String),
    /// Another process holds the data directory.
    Locked(String),
    /// The options do not fit the page file.
    Config(String),
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::Tree(e) => write!(f, "{e}"),
            Error::Disk(m) => write!(f, "disk error: {m}"),
            Error::Corrupt(m) => write!(f, "page file unusable: {m}"),
            Error::Locked(m) => write!(f, "data directory in use: {m}"),
            Error::Config(m) => write!(f, "invalid durability options: {m}"),
        }
    }
}

impl std::error::Error for Error {}

impl From<accelkv_tree::Error> for Error {
    fn from(e: accelkv_tree::Error) -> Error {
        Error::Tree(e)
    }
}

/// Result with the durable store's error.
pub type Result<T> = std::result::Result<T, Error>;

/// A disk error with what was being done.
pub(crate) fn disk(what: &str, e: std::io::Error) -> Error {
    Error::Disk(format!("{what}: {e}"))
}
