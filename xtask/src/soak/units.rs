//! Durations (`500ms`, `60s`, `10m`) and byte counts (`64MiB`, `1GiB`) on the command line.

use std::time::Duration;

/// A duration: a whole number with `ms`, `s`, `m` or `h` (a bare number is seconds).
pub fn duration(text: &str) -> Result<Duration, String> {
    let (n, unit) = split(text)?;
    let ms = match unit {
        "ms" => Some(n),
        "" | "s" => n.checked_mul(1000),
        "m" | "min" => n.checked_mul(60_000),
        "h" => n.checked_mul(3_600_000),
        _ => return Err(format!("{text:?}: the unit is ms, s, m or h")),
    };
    ms.map(Duration::from_millis)
        .ok_or_else(|| format!("{text:?} is too long"))
}

/// A byte count: a whole number with `B`, `KiB`, `MiB` or `GiB` (powers of 1024; `K`, `M`,
/// `G` alike; a bare number is bytes).
pub fn bytes(text: &str) -> Result<u64, String> {
    let (n, unit) = split(text)?;
    let shift = match unit.to_ascii_lowercase().as_str() {
        "" | "b" => 0,
        "k" | "kib" => 10,
        "m" | "mib" => 20,
        "g" | "gib" => 30,
        _ => return Err(format!("{text:?}: the unit is B, KiB, MiB or GiB")),
    };
    n.checked_mul(1 << shift)
        .ok_or_else(|| format!("{text:?} is too large"))
}

/// The leading whole number and the rest.
fn split(text: &str) -> Result<(u64, &str), String> {
    let text = text.trim();
    let digits = text
        .find(|c: char| !c.is_ascii_digit())
        .unwrap_or(text.len());
    let n = text[..digits]
        .parse()
        .map_err(|_| format!("{text:?} does not start with a whole number"))?;
    Ok((n, text[digits..].trim()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations() {
        assert_eq!(duration("500ms"), Ok(Duration::from_millis(500)));
        assert_eq!(duration("60s"), Ok(Duration::from_secs(60)));
        assert_eq!(duration("3"), Ok(Duration::from_secs(3)));
        assert_eq!(duration("10m"), Ok(Duration::from_secs(600)));
        assert!(duration("1.5s").is_err());
        assert!(duration("5 fortnights").is_err());
        assert!(duration("s").is_err());
    }

    #[test]
    fn byte_counts() {
        assert_eq!(bytes("64MiB"), Ok(64 << 20));
        assert_eq!(bytes("1GiB"), Ok(1 << 30));
        assert_eq!(bytes("2k"), Ok(2048));
        assert_eq!(bytes("4096"), Ok(4096));
        assert!(bytes("1TB").is_err());
    }
}
