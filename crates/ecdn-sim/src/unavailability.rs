//! Server unavailability for cluster simulations: a per-window record (the format of C2DN's
//! published Akamai trace: one line per window, comma-separated ids of the servers unavailable
//! in it, separated by commas or spaces, an empty line when all are available) and single events `SERVER@SECONDS[-SECONDS]`.

use std::path::Path;

/// How long one line of an unavailability record lasts.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Window {
    /// Trace seconds.
    Seconds(f64),
    /// Requests.
    Requests(u64),
}

impl Window {
    /// Parses `300s` / `5m` (trace time) or `50000` (requests).
    pub fn parse(s: &str) -> Result<Window, String> {
        let t = s.trim();
        if t.chars().last().is_some_and(|c| c.is_ascii_alphabetic()) {
            let v = ecdn_trace::units::parse_seconds(t)?;
            if v <= 0.0 {
                return Err(format!("window {s:?} must be positive"));
            }
            return Ok(Window::Seconds(v));
        }
        match t.replace('_', "").parse::<u64>() {
            Ok(0) | Err(_) => Err(format!(
                "invalid window {s:?}: a duration like 300s or a positive request count"
            )),
            Ok(n) => Ok(Window::Requests(n)),
        }
    }

    /// Index of the window a request falls in (`index` counts requests from 0; `time` is
    /// seconds since the trace's first request).
    #[inline]
    pub fn index(&self, index: u64, time: f64) -> usize {
        match *self {
            Window::Seconds(w) => (time.max(0.0) / w) as usize,
            Window::Requests(n) => (index / n) as usize,
        }
    }
}

/// One server down from `start` (inclusive) to `end` (exclusive), in trace seconds since the
/// first request.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct FailEvent {
    pub server: usize,
    pub start: f64,
    pub end: f64,
}

impl FailEvent {
    /// Parses `SERVER@SECONDS` (down from then on) or `SERVER@START-END`; times accept units
    /// (`3@600s`, `3@10m-20m`).
    pub fn parse(s: &str) -> Result<FailEvent, String> {
        let (server, when) = s
            .split_once('@')
            .ok_or_else(|| format!("invalid failure {s:?}: expected SERVER@SECONDS"))?;
        let server: usize = server
            .trim()
            .parse()
            .map_err(|_| format!("invalid failure {s:?}: {server:?} is not a server id"))?;
        let (start, end) = match when.split_once('-') {
            Some((a, b)) => (
                ecdn_trace::units::parse_seconds(a)?,
                ecdn_trace::units::parse_seconds(b)?,
            ),
            None => (ecdn_trace::units::parse_seconds(when)?, f64::INFINITY),
        };
        if end <= start {
            return Err(format!(
                "invalid failure {s:?}: the end must come after the start"
            ));
        }
        Ok(FailEvent { server, start, end })
    }
}

/// Which servers are unavailable when.
#[derive(Clone, Debug, Default)]
pub struct Unavailability {
    /// Per-window record and its window length.
    pub record: Vec<Vec<usize>>,
    pub window: Option<Window>,
    pub events: Vec<FailEvent>,
    /// Servers that come back from an unavailability with an empty cache, as a server whose
    /// disk was replaced while it was away. The others return with what they held when they
    /// left (C2DN App. 10.3, "Server addition": a returning server gets its data buckets back
    /// by consistent hashing, and its former parity buckets as the write budget allows, so
    /// whatever its cache kept of them serves again). Empty by default.
    pub returns_empty: Vec<usize>,
}

impl Unavailability {
    /// Reads a record file; server ids must be below `servers`.
    pub fn read_record(path: &Path, servers: usize) -> Result<Vec<Vec<usize>>, String> {
        let text = std::fs::read_to_string(path).map_err(|e| format!("{}: {e}", path.display()))?;
        Self::parse_record(&text, servers).map_err(|e| format!("{}: {e}", path.display()))
    }

    /// Parses a record (see the module docs).
    pub fn parse_record(text: &str, servers: usize) -> Result<Vec<Vec<usize>>, String> {
        let mut out = Vec::new();
        for (i, line) in text.lines().enumerate() {
            let mut ids = Vec::new();
            // Ids are separated by commas or whitespace (the published record uses spaces).
            for f in line
                .split(|c: char| c == ',' || c.is_whitespace())
                .filter(|f| !f.is_empty())
            {
                let id: usize = f
                    .parse()
                    .map_err(|_| format!("line {}: {f:?} is not a server id", i + 1))?;
                if id >= servers {
                    return Err(format!(
                        "line {}: server {id} does not exist (the cluster has {servers})",
                        i + 1
                    ));
                }
                if !ids.contains(&id) {
                    ids.push(id);
                }
            }
            ids.sort_unstable();
            out.push(ids);
        }
        Ok(out)
    }

    /// True if nothing is ever unavailable.
    pub fn is_empty(&self) -> bool {
        self.events.is_empty() && self.record.iter().all(|w| w.is_empty())
    }

    /// The unavailable servers at request `index`, `time` seconds after the first request,
    /// written into `out` (sorted, deduplicated).
    pub fn at(&self, index: u64, time: f64, out: &mut Vec<usize>) {
        out.clear();
        if let Some(w) = self.window {
            if let Some(set) = self.record.get(w.index(index, time)) {
                out.extend_from_slice(set);
            }
        }
        for e in &self.events {
            if time >= e.start && time < e.end {
                out.push(e.server);
            }
        }
        out.sort_unstable();
        out.dedup();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_records_and_events() {
        let r = Unavailability::parse_record("\n3\n1, 2\n\n2,1,2\n7 8 9\n", 10).unwrap();
        assert_eq!(
            r,
            vec![
                vec![],
                vec![3],
                vec![1, 2],
                vec![],
                vec![1, 2],
                vec![7, 8, 9]
            ]
        );
        assert!(Unavailability::parse_record("1\n12\n", 10)
            .unwrap_err()
            .contains("line 2"));
        assert!(Unavailability::parse_record("x\n", 10).is_err());
        assert_eq!(
            FailEvent::parse("3@600").unwrap(),
            FailEvent {
                server: 3,
                start: 600.0,
                end: f64::INFINITY
            }
        );
        assert_eq!(FailEvent::parse("1@10m-20m").unwrap().end, 1200.0);
        for bad in ["3", "x@5", "3@", "3@20-10"] {
            assert!(FailEvent::parse(bad).is_err(), "{bad}");
        }
        assert_eq!(Window::parse("300s").unwrap(), Window::Seconds(300.0));
        assert_eq!(Window::parse("50000").unwrap(), Window::Requests(50_000));
        assert!(Window::parse("0").is_err());
    }

    #[test]
    fn combines_record_and_events() {
        let u = Unavailability {
            record: vec![vec![], vec![2], vec![]],
            window: Some(Window::Requests(10)),
            events: vec![FailEvent {
                server: 5,
                start: 100.0,
                end: 200.0,
            }],
            returns_empty: Vec::new(),
        };
        let mut out = Vec::new();
        u.at(5, 0.0, &mut out);
        assert!(out.is_empty());
        u.at(15, 150.0, &mut out);
        assert_eq!(out, vec![2, 5]);
        u.at(25, 250.0, &mut out);
        assert!(out.is_empty());
        u.at(95, 0.0, &mut out);
        assert!(
            out.is_empty(),
            "past the record's end everything is available"
        );
    }
}
