//! One syntax for sizes, shared by the flags, the config file and RESP's `CONFIG SET`: plain
//! bytes, or a number with a unit in any case — `k`, `m`, `g` in powers of 1000 and `kb`,
//! `mb`, `gb` in powers of 1024, as Redis's `memtoll` reads them (so `CONFIG SET maxmemory`
//! means what it means to Redis), and the binary units `KiB`, `MiB`, `GiB`. A `B` alone is
//! bytes. `64MiB`, `1gb`, `500m` and `4096` are sizes; `1.5g`, `-1` and `1tb` are not.

use std::fmt;
use std::str::FromStr;

/// A size in bytes, parsed from the shared syntax (see the module docs).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Default)]
pub struct Size(pub u64);

/// What a size looks like, for error messages.
pub const SYNTAX: &str = "bytes, or a number with k/m/g (powers of 1000, as Redis), kb/mb/gb \
                          or KiB/MiB/GiB (powers of 1024)";

impl Size {
    /// The size in bytes as a `usize` (saturating on a 32-bit target).
    pub fn bytes(self) -> usize {
        usize::try_from(self.0).unwrap_or(usize::MAX)
    }

    /// Parses the bytes of a protocol argument (`CONFIG SET`).
    pub fn parse_bytes(a: &[u8]) -> Option<Size> {
        std::str::from_utf8(a).ok()?.parse().ok()
    }
}

impl FromStr for Size {
    type Err = String;

    fn from_str(s: &str) -> Result<Size, String> {
        let bad = || format!("`{s}` is not a size: {SYNTAX}");
        let t = s.trim();
        let digits = t.trim_end_matches(|c: char| c.is_ascii_alphabetic());
        let unit: u64 = match t[digits.len()..].to_ascii_lowercase().as_str() {
            "" | "b" => 1,
            "k" => 1_000,
            "m" => 1_000_000,
            "g" => 1_000_000_000,
            "kb" | "kib" => 1 << 10,
            "mb" | "mib" => 1 << 20,
            "gb" | "gib" => 1 << 30,
            _ => return Err(bad()),
        };
        if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
            return Err(bad());
        }
        let n: u64 = digits.parse().map_err(|_| bad())?;
        n.checked_mul(unit)
            .map(Size)
            .ok_or_else(|| format!("`{s}` is too large"))
    }
}

/// The shortest exact form: `64MiB`, `1GiB`, `500000000`.
impl fmt::Display for Size {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let n = self.0;
        for (shift, unit) in [(30, "GiB"), (20, "MiB"), (10, "KiB")] {
            if n != 0 && n.trailing_zeros() >= shift {
                return write!(f, "{}{unit}", n >> shift);
            }
        }
        write!(f, "{n}")
    }
}

/// In the config file a size is a string in the syntax above or a plain number of bytes.
impl<'de> serde::Deserialize<'de> for Size {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Size, D::Error> {
        #[derive(serde::Deserialize)]
        #[serde(untagged)]
        enum Either {
            Bytes(u64),
            Text(String),
        }
        match Either::deserialize(d)? {
            Either::Bytes(n) => Ok(Size(n)),
            Either::Text(t) => t.parse().map_err(serde::de::Error::custom),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::Size;

    fn size(s: &str) -> Option<u64> {
        s.parse::<Size>().ok().map(|s| s.0)
    }

    #[test]
    fn units_as_redis_and_iec_read_them() {
        assert_eq!(size("4096"), Some(4096));
        assert_eq!(size("0"), Some(0));
        assert_eq!(size("12b"), Some(12));
        assert_eq!(size("1k"), Some(1000));
        assert_eq!(size("1KB"), Some(1024));
        assert_eq!(size("1KiB"), Some(1024));
        assert_eq!(size("500m"), Some(500_000_000));
        assert_eq!(size("64MiB"), Some(64 << 20));
        assert_eq!(size("64mb"), Some(64 << 20));
        assert_eq!(size("2g"), Some(2_000_000_000));
        assert_eq!(size("1GB"), Some(1 << 30));
        assert_eq!(size("16gib"), Some(16 << 30));
        assert_eq!(size(" 8MiB "), Some(8 << 20));
    }

    #[test]
    fn what_is_not_a_size() {
        for bad in [
            "",
            "k",
            "MiB",
            "-1",
            "+1",
            "1.5g",
            "1tb",
            "1 MiB",
            "x",
            "1mi",
            "99999999999gb",
        ] {
            assert_eq!(size(bad), None, "{bad:?}");
        }
        let e = "1.5g".parse::<Size>().unwrap_err();
        assert!(e.contains("powers of 1024"), "{e}");
    }

    #[test]
    fn display_is_exact_and_parses_back() {
        for n in [0u64, 1, 1000, 1024, 64 << 20, 1 << 30, 3 << 29, 500_000_000] {
            let shown = Size(n).to_string();
            assert_eq!(size(&shown), Some(n), "{shown}");
        }
        assert_eq!(Size(64 << 20).to_string(), "64MiB");
        assert_eq!(Size(1536).to_string(), "1536");
    }

    #[test]
    fn the_config_file_takes_numbers_and_strings() {
        #[derive(serde::Deserialize)]
        struct F {
            a: Size,
            b: Size,
        }
        let f: F = toml::from_str("a = 1048576\nb = \"1MiB\"").unwrap();
        assert_eq!((f.a, f.b), (Size(1 << 20), Size(1 << 20)));
        assert!(toml::from_str::<F>("a = 1\nb = \"1.5MiB\"").is_err());
    }
}
