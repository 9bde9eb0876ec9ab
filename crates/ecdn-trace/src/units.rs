//! Byte sizes and durations as people type them: `64MiB`, `1.5GiB`, `4096`, `300s`.
//! Binary prefixes (KiB, MiB, GiB, TiB) and their short forms (K, M, G, T, KB, MB, ...) are all
//! powers of two, as in libCacheSim.

/// Parses a byte size such as `64MiB`, `1GiB`, `512KiB`, `1.5M` or `4096`.
pub fn parse_size(s: &str) -> Result<u64, String> {
    let t = s.trim();
    let split = t
        .find(|c: char| !(c.is_ascii_digit() || c == '.' || c == '_'))
        .unwrap_or(t.len());
    let (num, unit) = t.split_at(split);
    let num: String = num.chars().filter(|&c| c != '_').collect();
    if num.is_empty() {
        return Err(format!("invalid size {s:?}: expected a number like 64MiB"));
    }
    let mult: u64 = match unit.trim().to_ascii_lowercase().as_str() {
        "" | "b" => 1,
        "k" | "kb" | "kib" => 1 << 10,
        "m" | "mb" | "mib" => 1 << 20,
        "g" | "gb" | "gib" => 1 << 30,
        "t" | "tb" | "tib" => 1 << 40,
        other => {
            return Err(format!(
                "invalid size {s:?}: unknown unit {other:?} (use B, KiB, MiB, GiB or TiB)"
            ))
        }
    };
    if let Ok(n) = num.parse::<u64>() {
        return n
            .checked_mul(mult)
            .ok_or_else(|| format!("invalid size {s:?}: too large"));
    }
    let f: f64 = num
        .parse()
        .map_err(|_| format!("invalid size {s:?}: {num:?} is not a number"))?;
    let v = f * mult as f64;
    if !v.is_finite() || v < 0.0 || v >= u64::MAX as f64 {
        return Err(format!("invalid size {s:?}: out of range"));
    }
    Ok(v.round() as u64)
}

/// Formats bytes with the largest binary unit that keeps the number ≥ 1: `64MiB`, `1.5GiB`.
pub fn format_size(bytes: u64) -> String {
    const UNITS: [(&str, u64); 4] = [
        ("TiB", 1 << 40),
        ("GiB", 1 << 30),
        ("MiB", 1 << 20),
        ("KiB", 1 << 10),
    ];
    for (name, m) in UNITS {
        if bytes >= m {
            if bytes.is_multiple_of(m) {
                return format!("{}{name}", bytes / m);
            }
            let v = bytes as f64 / m as f64;
            return format!("{}{name}", trim_float(v));
        }
    }
    format!("{bytes}B")
}

fn trim_float(v: f64) -> String {
    let s = format!("{v:.2}");
    s.trim_end_matches('0').trim_end_matches('.').to_string()
}

/// Parses a duration in seconds: `300`, `300s`, `5m`, `2h`, `1d`.
pub fn parse_seconds(s: &str) -> Result<f64, String> {
    let t = s.trim();
    let (num, mult) = if let Some(n) = t.strip_suffix("ms") {
        (n, 0.001)
    } else if let Some(n) = t.strip_suffix('s') {
        (n, 1.0)
    } else if let Some(n) = t.strip_suffix('m') {
        (n, 60.0)
    } else if let Some(n) = t.strip_suffix('h') {
        (n, 3600.0)
    } else if let Some(n) = t.strip_suffix('d') {
        (n, 86400.0)
    } else {
        (t, 1.0)
    };
    let v: f64 = num
        .trim()
        .parse()
        .map_err(|_| format!("invalid duration {s:?}: expected e.g. 300s, 5m, 2h"))?;
    if !v.is_finite() || v < 0.0 {
        return Err(format!("invalid duration {s:?}"));
    }
    Ok(v * mult)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes() {
        assert_eq!(parse_size("64MiB").unwrap(), 64 << 20);
        assert_eq!(parse_size("1GiB").unwrap(), 1 << 30);
        assert_eq!(parse_size("1.5K").unwrap(), 1536);
        assert_eq!(parse_size("4096").unwrap(), 4096);
        assert_eq!(parse_size(" 2 mb").unwrap(), 2 << 20);
        assert!(parse_size("abc").is_err());
        assert!(parse_size("12XB").is_err());
        assert!(parse_size("99999999999TiB").is_err());
        assert_eq!(format_size(64 << 20), "64MiB");
        assert_eq!(format_size(1536), "1.5KiB");
        assert_eq!(format_size(100), "100B");
    }

    #[test]
    fn durations() {
        assert_eq!(parse_seconds("300s").unwrap(), 300.0);
        assert_eq!(parse_seconds("5m").unwrap(), 300.0);
        assert_eq!(parse_seconds("2").unwrap(), 2.0);
        assert!(parse_seconds("x").is_err());
        assert!(parse_seconds("-1").is_err());
    }
}
