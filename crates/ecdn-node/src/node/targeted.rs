//! Targeted cache-control fields (RFC 9213): `CDN-Cache-Control`, and a field aimed at this
//! node alone (`Ecdn-Cache-Control` unless [`NodeConfig::targeted_cache_control`] names
//! another), which an origin uses to tell the CDN something other than what it tells browsers.
//!
//! * **Which applies**: the first field of [`NodeConfig::targeted_cache_control`] (the node's
//!   own, then `CDN-Cache-Control`) that is present and valid. A valid field is a structured
//!   dictionary (RFC 8941) of directives: lower-case keys, each alone or with an integer, a
//!   token or a string. An invalid one is ignored, as if absent.
//! * **What it does**: for this cache it takes the place of `Cache-Control` and `Expires`
//!   (RFC 9213 §2.2): storing, freshness, `stale-*`, `must-revalidate`, `public` all read it.
//!   The client still gets the origin's `Cache-Control` and `Expires`.
//! * **Not forwarded**: every targeted field the node honours is removed from the origin's
//!   answer as it arrives ([`apply`]); the directives that apply are kept with the stored
//!   response under [`EFFECTIVE`], an internal field that is dropped from any origin answer
//!   (it cannot be forged) and from every answer the node sends (its delivery step).
//!
//! [`NodeConfig::targeted_cache_control`]: super::NodeConfig::targeted_cache_control

use hyper::header::{HeaderMap, HeaderName, HeaderValue};

/// The internal field holding the targeted directives that apply to a stored response.
pub const EFFECTIVE: HeaderName = HeaderName::from_static("x-ecdn-effective-cache-control");

/// The default node-targeted field.
pub const OWN_FIELD: &str = "ecdn-cache-control";
/// The field aimed at every CDN.
pub const CDN_FIELD: &str = "cdn-cache-control";

/// Rewrites an origin's answer headers: removes the targeted fields in `fields` (and any
/// [`EFFECTIVE`] the origin sent), and records the first valid one's directives under
/// [`EFFECTIVE`].
pub fn apply(headers: &mut HeaderMap, fields: &[HeaderName]) {
    headers.remove(&EFFECTIVE);
    let chosen = fields.iter().find_map(|name| {
        let lines: Vec<&str> = headers
            .get_all(name)
            .iter()
            .map(|v| v.to_str().ok())
            .collect::<Option<_>>()?;
        if lines.is_empty() {
            return None;
        }
        let joined = lines.join(", ");
        valid_dictionary(&joined).then_some(joined)
    });
    for name in fields {
        headers.remove(name);
    }
    if let Some(v) = chosen.and_then(|v| HeaderValue::from_str(&v).ok()) {
        headers.insert(EFFECTIVE, v);
    }
}

/// Whether `v` is a structured-field dictionary whose members are a key alone or `key=`
/// an integer, a token or a string (parameters are allowed and ignored; inner lists are not
/// directives and make the field invalid).
pub fn valid_dictionary(v: &str) -> bool {
    dictionary_end(v.trim_matches([' ', '\t'])).is_some()
}

/// [`valid_dictionary`]'s parse: `Some` when all of `v` is one.
fn dictionary_end(v: &str) -> Option<()> {
    let mut rest = v;
    loop {
        // A member, then its parameters `;key[=item]`.
        rest = key_and_item(rest)?;
        while let Some(p) = rest.strip_prefix(';') {
            rest = key_and_item(p.trim_start_matches(' '))?;
        }
        rest = rest.trim_start_matches([' ', '\t']);
        if rest.is_empty() {
            return Some(());
        }
        rest = rest.strip_prefix(',')?.trim_start_matches([' ', '\t']);
        if rest.is_empty() {
            return None; // a trailing comma
        }
    }
}

/// `key[=bare-item]` at the start of `s`; what follows it.
fn key_and_item(s: &str) -> Option<&str> {
    let rest = key(s)?;
    match rest.strip_prefix('=') {
        Some(value) => bare_item(value),
        None => Some(rest),
    }
}

/// An sf-key at the start of `s`: `( lcalpha / "*" ) *( lcalpha / DIGIT / "_" / "-" / "." /
/// "*" )`; what follows it.
fn key(s: &str) -> Option<&str> {
    let b = s.as_bytes();
    if !b
        .first()
        .is_some_and(|c| c.is_ascii_lowercase() || *c == b'*')
    {
        return None;
    }
    let end = b
        .iter()
        .position(|c| !(c.is_ascii_lowercase() || c.is_ascii_digit() || b"_-.*".contains(c)))
        .unwrap_or(b.len());
    Some(&s[end..])
}

/// A bare item at the start of `s`: an integer (at most 15 digits, optional `-`), a decimal,
/// a string, a token or a boolean; what follows it.
fn bare_item(s: &str) -> Option<&str> {
    let b = s.as_bytes();
    match b.first()? {
        b'"' => {
            let mut i = 1;
            while i < b.len() {
                match b[i] {
                    b'\\' if matches!(b.get(i + 1), Some(b'"') | Some(b'\\')) => i += 2,
                    b'"' => return Some(&s[i + 1..]),
                    c if (0x20..0x7f).contains(&c) && c != b'\\' => i += 1,
                    _ => return None,
                }
            }
            None
        }
        b'?' => match b.get(1)? {
            b'0' | b'1' => Some(&s[2..]),
            _ => None,
        },
        c if c.is_ascii_digit() || *c == b'-' => {
            let digits = s.strip_prefix('-').unwrap_or(s);
            let int = digits
                .bytes()
                .position(|c| !c.is_ascii_digit())
                .unwrap_or(digits.len());
            if int == 0 || int > 15 {
                return None;
            }
            let after = &digits[int..];
            match after.strip_prefix('.') {
                Some(frac) => {
                    let n = frac
                        .bytes()
                        .position(|c| !c.is_ascii_digit())
                        .unwrap_or(frac.len());
                    (1..=3).contains(&n).then(|| &frac[n..])
                }
                None => Some(after),
            }
        }
        c if c.is_ascii_alphabetic() || *c == b'*' => {
            let end = b
                .iter()
                .position(|c| !(c.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~:/".contains(c)))
                .unwrap_or(b.len());
            Some(&s[end..])
        }
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dictionaries() {
        for ok in [
            "max-age=60",
            "max-age=60, stale-if-error=30",
            "no-store",
            "private, max-age=0",
            "no-cache=\"set-cookie\"",
            "max-age=60;a=1, public",
            "x=?1",
            "x=tok/en",
        ] {
            assert!(valid_dictionary(ok), "{ok}");
        }
        for bad in [
            "",
            "Max-Age=60",
            "max-age=60,",
            "max-age=",
            "max-age=(1 2)",
            "max-age=1234567890123456",
            "max-age=\"open",
            "max-age=60 public",
            ", max-age=60",
        ] {
            assert!(!valid_dictionary(bad), "{bad}");
        }
    }

    #[test]
    fn the_first_valid_field_applies_and_none_is_forwarded() {
        let fields = [
            HeaderName::from_static(OWN_FIELD),
            HeaderName::from_static(CDN_FIELD),
        ];
        let mut h = HeaderMap::new();
        h.insert("cache-control", HeaderValue::from_static("max-age=5"));
        h.insert(OWN_FIELD, HeaderValue::from_static("Max-Age=60"));
        h.insert(CDN_FIELD, HeaderValue::from_static("max-age=600"));
        h.insert(EFFECTIVE, HeaderValue::from_static("max-age=99999"));
        apply(&mut h, &fields);
        assert_eq!(h.get(&EFFECTIVE).unwrap(), "max-age=600");
        assert!(h.get(OWN_FIELD).is_none() && h.get(CDN_FIELD).is_none());
        assert_eq!(h.get("cache-control").unwrap(), "max-age=5");
        let mut h = HeaderMap::new();
        h.insert(EFFECTIVE, HeaderValue::from_static("max-age=99999"));
        apply(&mut h, &fields);
        assert!(h.is_empty(), "an origin's own internal field is dropped");
        let mut h = HeaderMap::new();
        h.append(OWN_FIELD, HeaderValue::from_static("max-age=60"));
        h.append(OWN_FIELD, HeaderValue::from_static("public"));
        apply(&mut h, &fields);
        assert_eq!(h.get(&EFFECTIVE).unwrap(), "max-age=60, public");
    }
}
