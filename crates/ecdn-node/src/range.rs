//! `Range: bytes=...` requests (RFC 9110 §14.1.2), shared by the origin and the node.
//!
//! [`parse`] turns a `Range` field value into the byte ranges to send for a representation of
//! `size` bytes:
//!
//! * [`Ranges::Ignore`]: serve the whole `200`. That is the answer for another range unit, an
//!   invalid `ranges-specifier` (e.g. `bytes=9-3`, `bytes=x-3`; RFC 9110 §14.2 lets a server
//!   ignore such a field), and for range lists this crate refuses as abusive (RFC 9110 §14.2
//!   and §17.15): more than [`MAX_RANGES`] ranges, or several ranges whose total length exceeds
//!   the object size (overlapping or repeated ranges).
//! * [`Ranges::Unsatisfiable`]: `416` with `Content-Range: bytes */size` — no range starts
//!   inside the object (`bytes=100-` on 100 bytes, `bytes=-0`).
//! * [`Ranges::Satisfiable`]: the satisfiable ranges, in request order, each clipped to the
//!   object (ranges starting past the end are dropped, as §14.1.2 says).
//!
//! A zero-length object has no satisfiable range except a non-empty suffix, which selects
//! nothing; that case is [`Ranges::Ignore`] (the empty `200`).

use std::ops::Range;

/// More ranges than this in one request: the `Range` field is ignored.
pub const MAX_RANGES: usize = 16;

/// What to serve for a `Range` field; see the module documentation.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Ranges {
    Ignore,
    Unsatisfiable,
    Satisfiable(Vec<Range<u64>>),
}

/// A non-empty run of ASCII digits.
fn digits(s: &str) -> Option<u64> {
    if s.is_empty() || !s.bytes().all(|c| c.is_ascii_digit()) {
        return None;
    }
    s.parse().ok()
}

/// Parses a `Range` field value against a representation of `size` bytes.
pub fn parse(value: &str, size: u64) -> Ranges {
    let Some((unit, set)) = value.split_once('=') else {
        return Ranges::Ignore;
    };
    if !unit.trim().eq_ignore_ascii_case("bytes") {
        return Ranges::Ignore;
    }
    // Empty list elements are allowed by the list syntax (RFC 9110 §5.6.1).
    let specs: Vec<&str> = set
        .split(',')
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .collect();
    if specs.is_empty() || specs.len() > MAX_RANGES {
        return Ranges::Ignore;
    }
    let mut out = Vec::with_capacity(specs.len());
    let mut empty_suffix = false;
    for spec in specs {
        let Some((first, last)) = spec.split_once('-') else {
            return Ranges::Ignore;
        };
        let (first, last) = (first.trim(), last.trim());
        if first.is_empty() {
            // suffix-range: the last n bytes.
            let Some(n) = digits(last) else {
                return Ranges::Ignore;
            };
            if n > 0 {
                if size == 0 {
                    empty_suffix = true;
                } else {
                    out.push(size.saturating_sub(n)..size);
                }
            }
        } else {
            let Some(first) = digits(first) else {
                return Ranges::Ignore;
            };
            let end = if last.is_empty() {
                size
            } else {
                match digits(last) {
                    Some(last) if last >= first => last.saturating_add(1).min(size),
                    _ => return Ranges::Ignore,
                }
            };
            if first < size {
                out.push(first..end);
            }
        }
    }
    if out.is_empty() {
        return if empty_suffix {
            Ranges::Ignore
        } else {
            Ranges::Unsatisfiable
        };
    }
    let total = out
        .iter()
        .fold(0u64, |t, r| t.saturating_add(r.end - r.start));
    if out.len() > 1 && total > size {
        return Ranges::Ignore;
    }
    Ranges::Satisfiable(out)
}

/// `bytes first-last/size` for a `Content-Range` field.
pub fn content_range(r: &Range<u64>, size: u64) -> String {
    format!("bytes {}-{}/{size}", r.start, r.end - 1)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn one(r: Range<u64>) -> Ranges {
        Ranges::Satisfiable(vec![r])
    }

    #[test]
    fn single_ranges() {
        assert_eq!(parse("bytes=0-9", 100), one(0..10));
        assert_eq!(parse("bytes=90-", 100), one(90..100));
        assert_eq!(parse("bytes=-10", 100), one(90..100));
        assert_eq!(parse("bytes=-1000", 100), one(0..100));
        assert_eq!(parse("bytes=50-1000", 100), one(50..100));
        assert_eq!(parse(" Bytes = 5 - 5 ", 100), one(5..6));
        assert_eq!(parse("bytes=99-99", 100), one(99..100));
        assert_eq!(content_range(&(0..10), 100), "bytes 0-9/100");
    }

    #[test]
    fn unsatisfiable_and_ignored() {
        assert_eq!(parse("bytes=100-", 100), Ranges::Unsatisfiable);
        assert_eq!(parse("bytes=-0", 100), Ranges::Unsatisfiable);
        assert_eq!(parse("bytes=100-200, 300-", 100), Ranges::Unsatisfiable);
        assert_eq!(parse("bytes=0-", 0), Ranges::Unsatisfiable);
        assert_eq!(parse("bytes=-5", 0), Ranges::Ignore);
        assert_eq!(parse("bytes=9-3", 100), Ranges::Ignore);
        assert_eq!(parse("bytes=x-3", 100), Ranges::Ignore);
        assert_eq!(parse("bytes=+1-3", 100), Ranges::Ignore);
        assert_eq!(parse("bytes=5", 100), Ranges::Ignore);
        assert_eq!(parse("bytes=", 100), Ranges::Ignore);
        assert_eq!(parse("bytes=-", 100), Ranges::Ignore);
        assert_eq!(parse("items=0-1", 100), Ranges::Ignore);
        assert_eq!(parse("0-1", 100), Ranges::Ignore);
    }

    #[test]
    fn multiple_ranges_and_limits() {
        assert_eq!(
            parse("bytes=0-1, 5-6,, -1", 100),
            Ranges::Satisfiable(vec![0..2, 5..7, 99..100])
        );
        // Unsatisfiable members are dropped.
        assert_eq!(parse("bytes=0-1,200-300", 100), one(0..2));
        let sixteen = vec!["0-0"; 16].join(",");
        assert!(matches!(
            parse(&format!("bytes={sixteen}"), 100),
            Ranges::Satisfiable(v) if v.len() == 16
        ));
        let seventeen = vec!["0-0"; 17].join(",");
        assert_eq!(parse(&format!("bytes={seventeen}"), 100), Ranges::Ignore);
        // Overlaps summing past the size.
        assert_eq!(parse("bytes=0-99,0-99", 100), Ranges::Ignore);
        assert_eq!(parse("bytes=0-60,40-99", 100), Ranges::Ignore);
        assert_eq!(
            parse("bytes=0-49,40-89", 100),
            Ranges::Satisfiable(vec![0..50, 40..90])
        );
    }
}
