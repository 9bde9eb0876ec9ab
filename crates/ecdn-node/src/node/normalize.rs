//! Request-path normalisation, applied before routing, to both the cache key and the request
//! sent to the origin, so that two URLs that normalise equally share one cache entry.
//!
//! Exactly this, and nothing more (conservative on purpose):
//!
//! 1. Every `%XX` escape must be valid (two hex digits), else the request is rejected.
//! 2. An escaped *unreserved* character (RFC 3986 §2.3: `A-Z a-z 0-9 - . _ ~`) is decoded
//!    (`%7e` → `~`, `%41` → `A`); every other escape is kept, with its hex digits upper-cased
//!    (`%2f` → `%2F`, RFC 3986 §6.2.2.1). In particular `%2F` is never turned into `/`.
//! 3. An escaped control character (`%00`–`%1F`, `%7F`) is rejected. Raw control characters
//!    (and spaces) never get this far: the HTTP parser already refuses them in the request line.
//! 4. Dot segments are resolved (RFC 3986 §5.2.4), after step 2, so `%2e%2e` counts as `..`:
//!    `/a/./b/../c` → `/a/c`, `/a/b/..` → `/a/`. A `..` that would climb above the root
//!    (`/../etc/passwd`, `/a/../..`) is rejected instead of being clamped.
//!
//! Left alone: empty segments (`//`), case (other than in escapes), a trailing `/`, `+`,
//! and the query string, which is kept byte for byte. A path that does not start with `/`
//! (the `*` of `OPTIONS *`) is passed through unchanged.

/// Why a path was refused (answered with `400`).
#[derive(Debug, PartialEq, Eq)]
pub enum PathError {
    /// `%` not followed by two hex digits.
    BadEscape,
    /// An escaped control character (`%00`–`%1F`, `%7F`).
    ControlCharacter,
    /// A `..` segment above the root.
    AboveRoot,
}

impl std::fmt::Display for PathError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            PathError::BadEscape => "malformed percent-escape in path",
            PathError::ControlCharacter => "control character in path",
            PathError::AboveRoot => "path climbs above the root",
        })
    }
}

fn hex(b: u8) -> Option<u8> {
    match b {
        b'0'..=b'9' => Some(b - b'0'),
        b'a'..=b'f' => Some(b - b'a' + 10),
        b'A'..=b'F' => Some(b - b'A' + 10),
        _ => None,
    }
}

fn is_unreserved(b: u8) -> bool {
    b.is_ascii_alphanumeric() || matches!(b, b'-' | b'.' | b'_' | b'~')
}

/// Steps 1–3: escapes.
fn normalize_escapes(path: &str) -> Result<String, PathError> {
    let bytes = path.as_bytes();
    let mut out = String::with_capacity(path.len());
    let mut i = 0;
    while i < bytes.len() {
        let b = bytes[i];
        if b.is_ascii_control() {
            return Err(PathError::ControlCharacter);
        }
        if b != b'%' {
            // `path` is a `&str`: copy whole characters.
            let len = path[i..].chars().next().map_or(1, char::len_utf8);
            out.push_str(&path[i..i + len]);
            i += len;
            continue;
        }
        let (Some(hi), Some(lo)) = (
            bytes.get(i + 1).copied().and_then(hex),
            bytes.get(i + 2).copied().and_then(hex),
        ) else {
            return Err(PathError::BadEscape);
        };
        let v = hi << 4 | lo;
        if v.is_ascii_control() {
            return Err(PathError::ControlCharacter);
        }
        if is_unreserved(v) {
            out.push(char::from(v));
        } else {
            out.push('%');
            out.push(char::from(b"0123456789ABCDEF"[usize::from(hi)]));
            out.push(char::from(b"0123456789ABCDEF"[usize::from(lo)]));
        }
        i += 3;
    }
    Ok(out)
}

/// Step 4: dot segments, on a path starting with `/`.
fn remove_dot_segments(path: &str) -> Result<String, PathError> {
    let segments: Vec<&str> = path[1..].split('/').collect();
    let last = segments.len() - 1;
    let mut out: Vec<&str> = Vec::with_capacity(segments.len());
    for (i, seg) in segments.into_iter().enumerate() {
        match seg {
            "." => {}
            ".." => {
                if out.pop().is_none() {
                    return Err(PathError::AboveRoot);
                }
            }
            s => {
                out.push(s);
                continue;
            }
        }
        // A final `.` or `..` leaves a directory: keep the trailing slash.
        if i == last {
            out.push("");
        }
    }
    Ok(format!("/{}", out.join("/")))
}

/// Whether `path` is normal already: it starts with `/` and has no escape, no control
/// character and no dot segment, so [`normalize_path`] would neither change nor refuse it.
/// Most requests' paths are; checking costs no allocation.
pub fn is_normal(path: &str) -> bool {
    path.starts_with('/')
        && !path.bytes().any(|b| b == b'%' || b.is_ascii_control())
        && !path[1..].split('/').any(|s| s == "." || s == "..")
}

/// The normalised form of a request path (see the module documentation).
pub fn normalize_path(path: &str) -> Result<String, PathError> {
    if !path.starts_with('/') || is_normal(path) {
        return Ok(path.to_string());
    }
    remove_dot_segments(&normalize_escapes(path)?)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn normalisation() {
        let ok = |p: &str| normalize_path(p).unwrap();
        assert_eq!(ok("/"), "/");
        assert_eq!(ok("/a/./b/../c"), "/a/c");
        assert_eq!(ok("/obj/./42/../42"), "/obj/42");
        assert_eq!(ok("/a/b/.."), "/a/");
        assert_eq!(ok("/a/b/."), "/a/b/");
        assert_eq!(ok("/a/.."), "/");
        assert_eq!(ok("/a//b/"), "/a//b/");
        assert_eq!(ok("/%7e%7E/%41%2d%5F"), "/~~/A-_");
        assert_eq!(ok("/a%2fb%3a%c3%a9"), "/a%2Fb%3A%C3%A9");
        assert_eq!(ok("/a/%2e%2E/b"), "/b");
        assert_eq!(ok("/é"), "/é");
        assert_eq!(ok("*"), "*");
        assert_eq!(ok("/..a/.b./..."), "/..a/.b./...");
        let err = |p: &str| normalize_path(p).unwrap_err();
        assert_eq!(err("/../etc/passwd"), PathError::AboveRoot);
        assert_eq!(err("/a/../../b"), PathError::AboveRoot);
        assert_eq!(err("/%2e%2e/x"), PathError::AboveRoot);
        assert_eq!(err("/.."), PathError::AboveRoot);
        assert_eq!(err("/a%00b"), PathError::ControlCharacter);
        assert_eq!(err("/a%7Fb"), PathError::ControlCharacter);
        assert_eq!(err("/a%0a"), PathError::ControlCharacter);
        assert_eq!(err("/a\0b"), PathError::ControlCharacter);
        assert_eq!(err("/a%zz"), PathError::BadEscape);
        assert_eq!(err("/a%4"), PathError::BadEscape);
        // What `is_normal` passes, the normalisation leaves as it is.
        for p in [
            "/",
            "/obj/42",
            "/a//b/",
            "/é",
            "/..a/.b./...",
            "/a/b/",
            "/a.b/c-d_e~f+g",
        ] {
            assert!(is_normal(p), "{p}");
            assert_eq!(ok(p), p);
        }
        for p in ["/a/./b", "/a/..", "/.", "/%41", "/a\0b", "*", "/a/b/."] {
            assert!(!is_normal(p), "{p}");
        }
    }
}
