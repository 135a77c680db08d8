//! Errors of the store's public API: typed values, never panics on user input.

use std::fmt;

/// What went wrong.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Error {
    /// Keys must have at least one byte.
    EmptyKey,
    /// The key is longer than the store allows.
    KeyTooLong {
        /// Length given.
        len: usize,
        /// Largest length allowed.
        max: usize,
    },
    /// The value is larger than the store allows.
    ValueTooLarge {
        /// Length given.
        len: usize,
        /// Largest length allowed.
        max: usize,
    },
    /// The operation needs the key to be present and it is not.
    NotFound,
    /// The store's memory limit is reached; the operation changed nothing.
    OutOfMemory {
        /// The configured limit in bytes.
        limit: usize,
    },
    /// Bulk load input is not strictly ascending at this position.
    Unsorted {
        /// Index of the first out-of-order item.
        index: usize,
    },
    /// The configuration is inconsistent.
    InvalidConfig(String),
    /// A leaf evicted to the page file could not be read back (an I/O error, a checksum
    /// that does not match); the request failed, the store is unchanged.
    PageRead(String),
    /// An atomic batch holds more writes than one batch may.
    BatchTooLarge {
        /// Writes given.
        len: usize,
        /// Most allowed.
        max: usize,
    },
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::EmptyKey => write!(f, "key is empty"),
            Error::KeyTooLong { len, max } => {
                write!(f, "key of {len} bytes is longer than the limit of {max}")
            }
            Error::ValueTooLarge { len, max } => {
                write!(f, "value of {len} bytes is larger than the limit of {max}")
            }
            Error::NotFound => write!(f, "key not found"),
            Error::OutOfMemory { limit } => {
                write!(f, "store memory limit of {limit} bytes reached")
            }
            Error::Unsorted { index } => {
                write!(f, "bulk load input not strictly ascending at item {index}")
            }
            Error::InvalidConfig(m) => write!(f, "invalid configuration: {m}"),
            Error::PageRead(m) => write!(f, "reading an evicted leaf failed: {m}"),
            Error::BatchTooLarge { len, max } => {
                write!(
                    f,
                    "atomic batch of {len} writes is larger than the limit of {max}"
                )
            }
        }
    }
}

impl std::error::Error for Error {}

/// Result of store operations.
pub type Result<T> = std::result::Result<T, Error>;
