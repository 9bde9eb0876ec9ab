//! What slicing (`super::slices`) keeps and reads below the request path: a node's slicing
//! state ([`Slices`]: the slice size, the lengths of sliced objects, the outcomes of sliced
//! answers), the origin's answer to a slice's range and the header a stored slice carries,
//! which the fill (`super::fill`) and partial hits (`cluster::c2dn::partial`) read too.

use hyper::header::{self, HeaderName, HeaderValue};
use hyper::StatusCode;
use std::collections::HashMap;
use std::sync::Mutex;

use ecdn_placement::slices::Slicing;

use super::lock::lock;

/// The most sliced objects whose length a node remembers; past it the table starts over.
const DIRECTORY_MAX: usize = 1 << 16;

/// A node's slicing: the cluster's slice size and the lengths of the sliced objects it served.
#[derive(Default)]
pub(super) struct Slices {
    pub(super) slicing: Slicing,
    /// URL id → object length, for objects found sliced.
    directory: Mutex<HashMap<u64, u64>>,
    /// What the latest sliced answers came to, by request id (`/_ecdn/sliced/ID`).
    finished: Mutex<std::collections::VecDeque<(HeaderValue, Sliced)>>,
}

/// What one sliced answer came to, known once its last slice was sent: the per-request miss
/// the simulator counts (a request misses if any of its slices did).
#[derive(Clone, Copy, Debug, Default)]
pub(super) struct Sliced {
    /// Slices sent.
    pub(super) slices: u64,
    /// Of those, filled from the origin (whole or in part).
    pub(super) missed: u64,
    /// Of those, partial hits (some chunks from the caches, the rest from the origin).
    pub(super) partial: u64,
    /// Bytes fetched from the origin for them.
    pub(super) origin_bytes: u64,
}

/// Sliced answers whose outcome a node keeps for `/_ecdn/sliced/ID`.
const FINISHED_MAX: usize = 4096;

impl Slices {
    pub(super) fn new(slicing: Slicing) -> Slices {
        Slices {
            slicing,
            directory: Mutex::default(),
            finished: Mutex::default(),
        }
    }

    /// Whether slicing is on.
    pub(super) fn on(&self) -> bool {
        self.slicing.size() > 0
    }

    /// The length of the object at `primary` if it is known to be sliced.
    pub(super) fn known(&self, primary: &str) -> Option<u64> {
        lock(&self.directory)
            .get(&ecdn_trace::hash_id(primary.as_bytes()))
            .copied()
    }

    /// What the sliced answer to request `id` came to, if it finished lately.
    pub(super) fn finished(&self, id: &str) -> Option<Sliced> {
        lock(&self.finished)
            .iter()
            .rev()
            .find(|(r, _)| r.as_bytes() == id.as_bytes())
            .map(|(_, s)| *s)
    }

    pub(super) fn record(&self, id: Option<HeaderValue>, s: Sliced) {
        let Some(id) = id else { return };
        let mut f = lock(&self.finished);
        if f.len() >= FINISHED_MAX {
            f.pop_front();
        }
        f.push_back((id, s));
    }

    pub(super) fn remember(&self, primary: &str, length: Option<u64>) {
        let id = ecdn_trace::hash_id(primary.as_bytes());
        let mut d = lock(&self.directory);
        match length {
            Some(n) => {
                if d.len() >= DIRECTORY_MAX {
                    d.clear();
                }
                d.insert(id, n);
            }
            None => {
                d.remove(&id);
            }
        }
    }
}

impl Sliced {
    /// As `/_ecdn/sliced/ID` answers it.
    pub(super) fn json(&self) -> serde_json::Value {
        serde_json::json!({
            "slices": self.slices,
            "missed": self.missed,
            "partial": self.partial,
            "origin_bytes": self.origin_bytes,
        })
    }
}

/// The header a stored slice carries: `FIRST-LAST/LENGTH`, the object bytes it holds and the
/// object's length (the origin's `Content-Range` without its unit).
pub(super) const SLICE_HEADER: HeaderName = HeaderName::from_static("x-ecdn-slice");

/// The header of an answer made of slices (`super::slices`): how many. What it came to is
/// known at its end ([`Sliced`], `/_ecdn/sliced/ID`), not when its head is sent.
pub(super) const SLICED_HEADER: HeaderName = HeaderName::from_static("x-ecdn-sliced");

/// A slice's fill: which slice, of which size.
#[derive(Clone, Copy, Debug)]
pub(super) struct SliceFill {
    pub(super) index: u64,
    pub(super) size: u64,
}

impl SliceFill {
    /// The object bytes the slice holds, as far as an object of unknown length goes.
    fn first(&self) -> u64 {
        self.index.saturating_mul(self.size)
    }

    /// The `Range` the origin is asked for.
    pub(super) fn range_header(&self) -> HeaderValue {
        let first = self.first();
        let last = first.saturating_add(self.size - 1);
        HeaderValue::from_str(&format!("bytes={first}-{last}")).expect("digits are a header value")
    }
}

/// What the origin's answer to a slice's range is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum SliceHead {
    /// The slice of a larger object: now a `200` of the slice's bytes with [`SLICE_HEADER`].
    Slice,
    /// The whole object (slice 0 only): now a `200` of the whole object.
    Whole,
    /// Neither (an error, or a range that is not the slice's): not stored, passed on as it is.
    Other,
}

/// `FIRST-LAST/LENGTH` of a `Content-Range: bytes FIRST-LAST/LENGTH` (a known length only).
fn content_range(v: &HeaderValue) -> Option<(u64, u64, u64)> {
    let (r, length) = crate::multipart::parse_content_range(v.to_str().ok()?).ok()?;
    Some((r.start, r.end - 1, length?))
}

/// Reads the origin's answer to slice `sl`'s range and makes it what is stored and served:
/// see [`SliceHead`].
pub(super) fn answer_head(parts: &mut hyper::http::response::Parts, sl: SliceFill) -> SliceHead {
    if parts.status == StatusCode::OK {
        return if sl.index == 0 {
            SliceHead::Whole
        } else {
            SliceHead::Other
        };
    }
    if parts.status != StatusCode::PARTIAL_CONTENT {
        return SliceHead::Other;
    }
    let Some((first, last, length)) = parts
        .headers
        .get(header::CONTENT_RANGE)
        .and_then(content_range)
    else {
        return SliceHead::Other;
    };
    let whole = sl.index == 0 && first == 0 && last + 1 == length && length <= sl.size;
    let slice = length > sl.size
        && first == sl.first()
        && last + 1 == length.min(first.saturating_add(sl.size));
    if !(whole || slice) || content_length(&parts.headers).is_some_and(|n| n != last - first + 1) {
        return SliceHead::Other;
    }
    parts.status = StatusCode::OK;
    parts.headers.remove(header::CONTENT_RANGE);
    parts
        .headers
        .insert(header::CONTENT_LENGTH, HeaderValue::from(last - first + 1));
    if whole {
        return SliceHead::Whole;
    }
    parts.headers.insert(
        SLICE_HEADER,
        HeaderValue::from_str(&format!("{first}-{last}/{length}")).expect("digits"),
    );
    SliceHead::Slice
}

/// `FIRST-LAST/LENGTH` of a [`SLICE_HEADER`] value.
pub(super) fn parse_slice(v: &HeaderValue) -> Option<(u64, u64, u64)> {
    let (range, length) = v.to_str().ok()?.split_once('/')?;
    let (first, last) = range.split_once('-')?;
    Some((
        first.parse().ok()?,
        last.parse().ok()?,
        length.parse().ok()?,
    ))
}

/// The slice a stored response is, from its stored headers.
pub(super) fn stored_slice(headers: &[(HeaderName, HeaderValue)]) -> Option<(u64, u64, u64)> {
    let (_, v) = headers.iter().find(|(n, _)| n == SLICE_HEADER)?;
    parse_slice(v)
}

/// The origin's `Content-Length`.
fn content_length(h: &hyper::HeaderMap) -> Option<u64> {
    h.get(header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.trim().parse().ok())
}

#[cfg(test)]
mod tests {
    use super::*;
    use hyper::Response;

    fn parts(status: StatusCode, range: Option<&str>, len: u64) -> hyper::http::response::Parts {
        let mut b = Response::builder()
            .status(status)
            .header(header::CONTENT_LENGTH, len);
        if let Some(r) = range {
            b = b.header(header::CONTENT_RANGE, r);
        }
        b.body(()).unwrap().into_parts().0
    }

    #[test]
    fn the_origins_answer_to_a_slice_range_is_a_slice_the_whole_object_or_neither() {
        let sl = |index| SliceFill { index, size: 100 };
        // A slice of a larger object.
        let mut p = parts(StatusCode::PARTIAL_CONTENT, Some("bytes 100-199/250"), 100);
        assert_eq!(answer_head(&mut p, sl(1)), SliceHead::Slice);
        assert_eq!(p.status, StatusCode::OK);
        assert_eq!(p.headers[SLICE_HEADER], "100-199/250");
        assert!(p.headers.get(header::CONTENT_RANGE).is_none());
        // The last, short slice.
        let mut p = parts(StatusCode::PARTIAL_CONTENT, Some("bytes 200-249/250"), 50);
        assert_eq!(answer_head(&mut p, sl(2)), SliceHead::Slice);
        assert_eq!(p.headers[header::CONTENT_LENGTH], "50");
        // An object of at most one slice, whole in slice 0's range; or a 200.
        let mut p = parts(StatusCode::PARTIAL_CONTENT, Some("bytes 0-79/80"), 80);
        assert_eq!(answer_head(&mut p, sl(0)), SliceHead::Whole);
        assert_eq!(p.status, StatusCode::OK);
        assert!(p.headers.get(SLICE_HEADER).is_none());
        assert_eq!(
            answer_head(&mut parts(StatusCode::OK, None, 80), sl(0)),
            SliceHead::Whole
        );
        // Neither: a 200 for a later slice, a range that is not the slice's, a length that
        // disagrees, an error.
        for (status, range, len, index) in [
            (StatusCode::OK, None, 250, 1),
            (
                StatusCode::PARTIAL_CONTENT,
                Some("bytes 100-149/250"),
                50,
                1,
            ),
            (
                StatusCode::PARTIAL_CONTENT,
                Some("bytes 100-199/250"),
                99,
                1,
            ),
            (StatusCode::PARTIAL_CONTENT, Some("bytes 100-199/x"), 100, 1),
            (StatusCode::NOT_FOUND, None, 0, 0),
            (StatusCode::RANGE_NOT_SATISFIABLE, None, 0, 3),
        ] {
            let mut p = parts(status, range, len);
            assert_eq!(
                answer_head(&mut p, sl(index)),
                SliceHead::Other,
                "{range:?}"
            );
        }
    }

    #[test]
    fn a_slice_asks_for_its_range() {
        let s = SliceFill {
            index: 3,
            size: 1 << 20,
        };
        assert_eq!(s.range_header(), "bytes=3145728-4194303");
    }
}
