//! Reading a traffic class's popularity-size footprint descriptor (the files of JEDI's
//! `FOOTPRINT_DESCRIPTORS/<class>/`), and the LRU hit-ratio curve it predicts.
//!
//! # Files
//!
//! * `pfd.txt.gz`: a header line `requests bytes start end first_requests first_bytes`, then one
//!   line per cell `popularity size stack_distance inter_arrival probability`: the fraction of all
//!   requests that go to an object requested `popularity` times in the original trace, of
//!   (rounded) size `size`, and whose stack distance — the bytes of the distinct objects
//!   requested since the previous request to the same object — falls in the bin starting at
//!   `stack_distance`. A stack distance below 0 marks a first request. The inter-arrival column
//!   is not used (JEDI does not use it either).
//! * `popularity_sz.txt`: blocks of a line `popularity` followed by lines `size weight`: the
//!   joint distribution of popularity and size over objects.
//! * `request_rate.txt` (optional): `unix_time, requests` per interval.
//!
//! # Units
//!
//! JEDI records sizes in KB and writes stack distances divided by 1000, but not every published
//! class follows it: eu-7's sizes are bytes (read as KB its mean object would be 72 MB of web
//! content) and its stack distances are not divided (multiplied by 1000 they would exceed the
//! class's unique bytes 770-fold). Both are therefore decided from the data, each by a rule that
//! the six published classes pass with a wide margin:
//!
//! * **size unit**: bytes if the mean object (header: first bytes / first requests) is over
//!   64 Ki units, else KiB (1024 bytes, the unit of the d-2 trace JEDI's authors published);
//! * **stack-distance scale**: ×1000 unless that makes the largest stack distance exceed twice
//!   the class's unique bytes (no stack distance can exceed them), else ×1.

use std::io::{BufRead, BufReader, Read};
use std::path::{Path, PathBuf};

use crate::TraceError;

/// How object sizes in the files translate to bytes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SizeUnit {
    /// Decided from the data (see the [module docs](self)).
    Auto,
    /// Sizes are bytes.
    Bytes,
    /// Sizes are KiB (1024 bytes).
    KiB,
}

/// The header line of `pfd.txt`, in the file's units.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Header {
    /// Requests in the original trace.
    pub requests: f64,
    /// Bytes requested (file units).
    pub bytes: f64,
    /// First and last timestamp (seconds).
    pub start: i64,
    /// Last timestamp.
    pub end: i64,
    /// Requests without a previous request to the same object (= objects).
    pub first_requests: f64,
    /// Bytes of those requests (= unique bytes, file units).
    pub first_bytes: f64,
}

/// One (popularity, size) cell of the descriptor: where its requests' stack distances fall.
#[derive(Clone, Debug)]
pub struct Cell {
    /// Requests to the object in the original trace.
    pub popularity: u64,
    /// Object size in bytes.
    pub size: u64,
    /// (bin index into [`Footprint::bins`], probability), for stack distances ≥ 0.
    pub bins: Vec<(u32, f64)>,
}

/// Objects of one popularity: their sizes and weights (from `popularity_sz.txt`).
#[derive(Clone, Debug)]
pub struct PopularityClass {
    /// Requests per object in the original trace.
    pub popularity: u64,
    /// (size in bytes, weight) pairs; weights are fractions of all objects.
    pub sizes: Vec<(u64, f64)>,
}

/// A traffic class's popularity-size footprint descriptor, in bytes.
#[derive(Clone, Debug)]
pub struct Footprint {
    /// Where it was read from.
    pub dir: PathBuf,
    /// The header of `pfd.txt`.
    pub header: Header,
    /// Bytes per size unit of the files (1 or 1024).
    pub unit: u64,
    /// Factor from the stack-distance column to size units (1000 or 1).
    pub sd_scale: u64,
    /// Lower edges of the stack-distance bins, in bytes, ascending; bin `i` is
    /// `[bins[i], bins[i + 1])`, the last one is a single point.
    pub bins: Vec<u64>,
    /// The cells with at least one request that has a previous request.
    pub cells: Vec<Cell>,
    /// Fraction of requests that are first requests.
    pub first_mass: f64,
    /// Bytes of first requests per request, in bytes (for the byte hit ratio).
    pub first_bytes_mass: f64,
    /// The joint popularity-size distribution of objects.
    pub popularity: Vec<PopularityClass>,
    /// Requests per interval of the original trace: (interval seconds, requests) in time order.
    pub request_rate: Vec<(u64, u64)>,
}

/// Where stack distances are placed within their bin.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum WithinBin {
    /// Uniformly over the bin, except in the first bin (stack distances from 0), where an
    /// object comes back after an exponentially distributed distance truncated to the bin,
    /// whose mean is its mean gap in the original trace (requests / popularity) times the mean
    /// request size — so that a popular object keeps its share of the requests (the default;
    /// see [`Footprint::first_bin_mean`]).
    Uniform,
    /// At the bin's lower edge, as JEDI does: the first bin (stack distance 0) becomes an
    /// immediate repeat of the same object.
    Floor,
}

fn io_err(path: &Path, error: std::io::Error) -> TraceError {
    TraceError::Io {
        path: path.to_path_buf(),
        error,
    }
}

fn line_err(path: &Path, line: u64, msg: impl Into<String>) -> TraceError {
    TraceError::Line {
        path: path.to_path_buf(),
        line,
        msg: msg.into(),
    }
}

/// Parses a non-negative finite number (the files write integers as `1e9` or `1000000000.0`).
fn number(path: &Path, line: u64, field: &str, what: &str) -> Result<f64, TraceError> {
    match field.parse::<f64>() {
        Ok(v) if v.is_finite() => Ok(v),
        _ => Err(line_err(
            path,
            line,
            format!("{what} is not a number: {field:?}"),
        )),
    }
}

fn count(path: &Path, line: u64, field: &str, what: &str) -> Result<u64, TraceError> {
    let v = number(path, line, field, what)?;
    if v < 0.0 || v > u32::MAX as f64 * 1024.0 {
        return Err(line_err(
            path,
            line,
            format!("{what} out of range: {field}"),
        ));
    }
    Ok(v.round() as u64)
}

/// One raw line of `pfd.txt`: popularity, size (file units), stack distance column, probability.
struct Raw {
    popularity: u64,
    size: u64,
    sd: f64,
    pr: f64,
}

fn read_pfd(path: &Path) -> Result<(Header, Vec<Raw>), TraceError> {
    let file = std::fs::File::open(path).map_err(|e| io_err(path, e))?;
    let reader: Box<dyn Read> = if path.extension().is_some_and(|e| e == "gz") {
        Box::new(flate2::read::MultiGzDecoder::new(file))
    } else {
        Box::new(file)
    };
    let mut lines = BufReader::with_capacity(1 << 16, reader).lines();
    let first = match lines.next() {
        Some(l) => l.map_err(|e| io_err(path, e))?,
        None => return Err(line_err(path, 1, "empty file: no header line")),
    };
    let f: Vec<&str> = first.split_whitespace().collect();
    if f.len() != 6 {
        return Err(line_err(
            path,
            1,
            format!(
                "header needs 6 fields (requests bytes start end first_requests first_bytes), got {}",
                f.len()
            ),
        ));
    }
    let header = Header {
        requests: number(path, 1, f[0], "requests")?,
        bytes: number(path, 1, f[1], "bytes")?,
        start: number(path, 1, f[2], "start time")? as i64,
        end: number(path, 1, f[3], "end time")? as i64,
        first_requests: number(path, 1, f[4], "first requests")?,
        first_bytes: number(path, 1, f[5], "first bytes")?,
    };
    if header.requests < 1.0 || header.first_requests < 1.0 || header.first_bytes <= 0.0 {
        return Err(line_err(
            path,
            1,
            "header: requests, first requests and first bytes must be positive",
        ));
    }
    let mut raws = Vec::new();
    for (i, l) in lines.enumerate() {
        let n = i as u64 + 2;
        let l = l.map_err(|e| io_err(path, e))?;
        let f: Vec<&str> = l.split_whitespace().collect();
        if f.is_empty() {
            continue;
        }
        if f.len() != 5 {
            return Err(line_err(
                path,
                n,
                format!("needs 5 fields (popularity size stack_distance inter_arrival probability), got {}", f.len()),
            ));
        }
        let pr = number(path, n, f[4], "probability")?;
        if !(0.0..=1.0).contains(&pr) {
            return Err(line_err(
                path,
                n,
                format!("probability out of [0, 1]: {}", f[4]),
            ));
        }
        raws.push(Raw {
            popularity: count(path, n, f[0], "popularity")?,
            size: count(path, n, f[1], "size")?,
            sd: number(path, n, f[2], "stack distance")?,
            pr,
        });
    }
    Ok((header, raws))
}

/// A size in bytes, at least 1 and at most 4 GiB − 1: traces hold 32-bit sizes, and tc-0 has
/// objects of 4.2 GB (a handful; they are clamped).
fn clamp_size(units: u64, unit: u64) -> u64 {
    units.max(1).saturating_mul(unit).min(u32::MAX as u64)
}

fn read_popularity(path: &Path, unit: u64) -> Result<Vec<PopularityClass>, TraceError> {
    let file = std::fs::File::open(path).map_err(|e| io_err(path, e))?;
    let mut out: Vec<PopularityClass> = Vec::new();
    for (i, l) in BufReader::new(file).lines().enumerate() {
        let n = i as u64 + 1;
        let l = l.map_err(|e| io_err(path, e))?;
        let f: Vec<&str> = l.split_whitespace().collect();
        match f.len() {
            0 => {}
            1 => out.push(PopularityClass {
                popularity: count(path, n, f[0], "popularity")?,
                sizes: Vec::new(),
            }),
            2 => {
                let Some(class) = out.last_mut() else {
                    return Err(line_err(path, n, "a size line before any popularity line"));
                };
                let size = clamp_size(count(path, n, f[0], "size")?, unit);
                let w = number(path, n, f[1], "weight")?;
                if w < 0.0 {
                    return Err(line_err(path, n, "negative weight"));
                }
                class.sizes.push((size, w));
            }
            k => {
                return Err(line_err(
                    path,
                    n,
                    format!("expected 1 or 2 fields, got {k}"),
                ))
            }
        }
    }
    out.retain(|c| c.popularity > 0 && c.sizes.iter().any(|&(_, w)| w > 0.0));
    if out.is_empty() {
        return Err(line_err(path, 1, "no popularity with a positive weight"));
    }
    Ok(out)
}

fn read_request_rate(path: &Path) -> Result<Vec<(u64, u64)>, TraceError> {
    let text = match std::fs::read_to_string(path) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(io_err(path, e)),
    };
    let mut points = Vec::new();
    for (i, l) in text.lines().enumerate() {
        let f: Vec<&str> = l
            .split(',')
            .map(str::trim)
            .filter(|s| !s.is_empty())
            .collect();
        if f.is_empty() {
            continue;
        }
        if f.len() != 2 {
            return Err(line_err(path, i as u64 + 1, "expected `time, requests`"));
        }
        let t = count(path, i as u64 + 1, f[0], "time")?;
        let r = count(path, i as u64 + 1, f[1], "requests")?;
        points.push((t, r));
    }
    // Interval length: the time to the next point (the last one repeats the one before).
    let mut out = Vec::with_capacity(points.len());
    for i in 0..points.len() {
        let len = if i + 1 < points.len() {
            points[i + 1].0.saturating_sub(points[i].0)
        } else if i > 0 {
            points[i].0.saturating_sub(points[i - 1].0)
        } else {
            300
        };
        if len > 0 && points[i].1 > 0 {
            out.push((len, points[i].1));
        }
    }
    Ok(out)
}

impl Footprint {
    /// Reads `dir/pfd.txt.gz` (or `dir/pfd.txt`), `dir/popularity_sz.txt` and, if present,
    /// `dir/request_rate.txt`.
    pub fn load(dir: &Path, unit: SizeUnit) -> Result<Footprint, TraceError> {
        let gz = dir.join("pfd.txt.gz");
        let pfd_path = if gz.exists() { gz } else { dir.join("pfd.txt") };
        let (header, raws) = read_pfd(&pfd_path)?;
        let unit = match unit {
            SizeUnit::Bytes => 1,
            SizeUnit::KiB => 1024,
            SizeUnit::Auto => {
                if header.first_bytes / header.first_requests > 65_536.0 {
                    1
                } else {
                    1024
                }
            }
        };
        let max_sd = raws.iter().map(|r| r.sd).fold(0.0, f64::max);
        let sd_scale = if max_sd * 1000.0 <= 2.0 * header.first_bytes {
            1000
        } else {
            1
        };
        let to_bytes = (sd_scale * unit) as f64;
        // The bin grid: every distinct non-negative stack distance.
        let mut edges: Vec<u64> = raws
            .iter()
            .filter(|r| r.sd >= 0.0)
            .map(|r| (r.sd * to_bytes).round() as u64)
            .collect();
        edges.sort_unstable();
        edges.dedup();
        if edges.is_empty() {
            return Err(line_err(
                &pfd_path,
                2,
                "no stack distance ≥ 0: nothing is ever re-requested",
            ));
        }
        let mut first_mass = 0.0;
        let mut first_bytes_mass = 0.0;
        let mut cells: Vec<Cell> = Vec::new();
        let mut index: std::collections::HashMap<(u64, u64), usize> = Default::default();
        for r in &raws {
            let size = clamp_size(r.size, unit);
            if r.sd < 0.0 {
                first_mass += r.pr;
                first_bytes_mass += r.pr * size as f64;
                continue;
            }
            let bin = edges
                .binary_search(&((r.sd * to_bytes).round() as u64))
                .expect("every edge is in the grid") as u32;
            let i = *index.entry((r.popularity, size)).or_insert_with(|| {
                cells.push(Cell {
                    popularity: r.popularity,
                    size,
                    bins: Vec::new(),
                });
                cells.len() - 1
            });
            cells[i].bins.push((bin, r.pr));
        }
        if !raws.iter().any(|r| r.sd < 0.0) {
            // First requests are left out of the file (eu-7): the header counts them.
            first_mass = header.first_requests / header.requests;
            first_bytes_mass = header.first_bytes * unit as f64 / header.requests;
        }
        for c in &mut cells {
            c.bins.sort_unstable_by_key(|&(b, _)| b);
            c.bins.dedup_by(|b, a| {
                if a.0 == b.0 {
                    a.1 += b.1;
                    true
                } else {
                    false
                }
            });
        }
        cells.retain(|c| c.bins.iter().any(|&(_, p)| p > 0.0));
        cells.sort_unstable_by_key(|c| (c.popularity, c.size));
        let popularity = read_popularity(&dir.join("popularity_sz.txt"), unit)?;
        let request_rate = read_request_rate(&dir.join("request_rate.txt"))?;
        Ok(Footprint {
            dir: dir.to_path_buf(),
            header,
            unit,
            sd_scale,
            bins: edges,
            cells,
            first_mass,
            first_bytes_mass,
            popularity,
            request_rate,
        })
    }

    /// The largest stack distance, in bytes: the generator's stack holds at least this much.
    pub fn max_stack_distance(&self) -> u64 {
        *self.bins.last().expect("at least one bin")
    }

    /// Mean of the stack distance in the first bin for `cell`'s objects, or `None` where the
    /// first bin is spread uniformly ([`WithinBin::Uniform`]): the object's mean gap in the
    /// original trace, requests / popularity, times the mean request size, if that is below
    /// half the bin. The descriptor says only that these distances are below the first bin
    /// edge (200 MB for most classes); spread uniformly, d-2's most popular object (19% of the
    /// requests, every 5th request) would come back every 150th.
    pub fn first_bin_mean(&self, cell: &Cell) -> Option<f64> {
        let width = self.bin_end(0) as f64;
        let mean_request = self.header.bytes / self.header.requests * self.unit as f64;
        let mean = self.header.requests / cell.popularity.max(1) as f64 * mean_request;
        (self.bins[0] == 0 && mean < width / 2.0).then_some(mean)
    }

    /// The upper edge of bin `i` (its lower edge for the last bin).
    pub fn bin_end(&self, i: usize) -> u64 {
        self.bins.get(i + 1).copied().unwrap_or(self.bins[i])
    }

    /// The object and byte hit ratio an LRU cache of `capacity` bytes reaches on traffic with
    /// this descriptor: the mass of requests whose stack distance plus the object's own size is
    /// at most `capacity` (the bytes of the other objects requested since it, and itself, fit),
    /// stack distances placed in their bin as `within` says.
    pub fn lru_hit_ratio(&self, capacity: u64, within: WithinBin) -> (f64, f64) {
        let (mut hit, mut total, mut hit_b, mut total_b) =
            (0.0, self.first_mass, 0.0, self.first_bytes_mass);
        for c in &self.cells {
            // Hit iff the stack distance is at most `room`.
            let room = capacity.checked_sub(c.size);
            let first_mean = self.first_bin_mean(c);
            for &(b, p) in &c.bins {
                let (lo, hi) = (self.bins[b as usize], self.bin_end(b as usize));
                let f = match (room, within) {
                    (None, _) => 0.0,
                    (Some(r), _) if r >= hi => 1.0,
                    (Some(r), WithinBin::Floor) => (r >= lo) as u8 as f64,
                    (Some(r), WithinBin::Uniform) if hi == lo => (r >= lo) as u8 as f64,
                    (Some(r), WithinBin::Uniform) if lo == 0 && first_mean.is_some() => {
                        let m = first_mean.expect("checked");
                        // Exponential with mean m truncated to [0, hi): P(d ≤ r).
                        (-(r as f64 / m)).exp_m1() / (-(hi as f64 / m)).exp_m1()
                    }
                    (Some(r), WithinBin::Uniform) => {
                        // d uniform in [lo, hi): P(d ≤ r).
                        (r.saturating_sub(lo) as f64 + 1.0).min((hi - lo) as f64) / (hi - lo) as f64
                            * (r >= lo) as u8 as f64
                    }
                };
                hit += p * f;
                total += p;
                hit_b += p * f * c.size as f64;
                total_b += p * c.size as f64;
            }
        }
        (hit / total, hit_b / total_b)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A descriptor directory with the given files.
    fn dir(pfd: &str, popularity: &str) -> tempfile::TempDir {
        let d = tempfile::tempdir().unwrap();
        std::fs::write(d.path().join("pfd.txt"), pfd).unwrap();
        std::fs::write(d.path().join("popularity_sz.txt"), popularity).unwrap();
        d
    }

    const HEADER: &str = "100 10000 0 100 10 1000\n";
    const POP: &str = "1\n100 0.5\n10\n100 0.5\n";

    fn err(pfd: &str, popularity: &str) -> String {
        let d = dir(pfd, popularity);
        Footprint::load(d.path(), SizeUnit::Auto)
            .unwrap_err()
            .to_string()
    }

    #[test]
    fn reads_a_minimal_descriptor() {
        let d = dir(
            &format!("{HEADER}10 100 0 0 0.45\n10 100 2 0 0.45\n1 100 -1 -1 0.1\n"),
            POP,
        );
        let fp = Footprint::load(d.path(), SizeUnit::Auto).unwrap();
        // Mean object 100 units: KiB; stack distance 2 (×1000) ≤ twice the unique bytes.
        assert_eq!((fp.unit, fp.sd_scale), (1024, 1000));
        assert_eq!(fp.bins, [0, 2000 * 1024]);
        assert_eq!(fp.cells.len(), 1);
        assert_eq!(fp.cells[0].size, 100 * 1024);
        assert!((fp.first_mass - 0.1).abs() < 1e-12);
        assert_eq!(fp.popularity.len(), 2);
        assert!(fp.request_rate.is_empty());
        // Half the re-requests fall in [0, 2000 KiB), the other half at 2000 KiB.
        let (ohr, _) = fp.lru_hit_ratio(2000 * 1024 + 100 * 1024, WithinBin::Uniform);
        assert!((ohr - 0.9).abs() < 1e-9, "{ohr}");
        let (ohr, _) = fp.lru_hit_ratio(1000 * 1024 + 100 * 1024, WithinBin::Uniform);
        assert!((ohr - 0.45 / 2.0).abs() < 1e-3, "{ohr}");
        assert_eq!(fp.lru_hit_ratio(50 * 1024, WithinBin::Uniform).0, 0.0);
    }

    #[test]
    fn malformed_files_are_clear_errors() {
        let line = |l: &str| format!("{HEADER}{l}\n");
        for (pfd, pop, want) in [
            ("", POP, "empty file"),
            ("1 2 3\n", POP, "header needs 6 fields"),
            ("x 1 0 1 1 1\n", POP, "requests is not a number"),
            ("100 10 0 1 0 0\n", POP, "must be positive"),
            (&line("10 100 0 0"), POP, "line 2: needs 5 fields"),
            (&line("10 100 0 0 1.5"), POP, "probability out of [0, 1]"),
            (&line("10 100 0 0 nan"), POP, "probability is not a number"),
            (&line("-10 100 0 0 0.5"), POP, "popularity out of range"),
            (&line("10 100 -1 -1 0.5"), POP, "no stack distance"),
            (
                &line("10 100 0 0 0.5"),
                "100 0.5\n",
                "a size line before any popularity",
            ),
            (&line("10 100 0 0 0.5"), "10\n100 -1\n", "negative weight"),
            (
                &line("10 100 0 0 0.5"),
                "10\n100 0 7\n",
                "expected 1 or 2 fields",
            ),
            (
                &line("10 100 0 0 0.5"),
                "10\n100 0\n",
                "no popularity with a positive weight",
            ),
        ] {
            let e = err(pfd, pop);
            assert!(e.contains(want), "{pfd:?} / {pop:?}: {e}");
        }
        let missing = tempfile::tempdir().unwrap();
        let e = Footprint::load(missing.path(), SizeUnit::Auto)
            .unwrap_err()
            .to_string();
        assert!(e.contains("pfd.txt"), "{e}");
    }

    #[test]
    fn reads_gzip_and_request_rates() {
        use std::io::Write;
        let d = dir("", POP);
        std::fs::remove_file(d.path().join("pfd.txt")).unwrap();
        let f = std::fs::File::create(d.path().join("pfd.txt.gz")).unwrap();
        let mut gz = flate2::write::GzEncoder::new(f, flate2::Compression::fast());
        writeln!(gz, "{HEADER}10 100 0 0 1").unwrap();
        gz.finish().unwrap();
        std::fs::write(d.path().join("request_rate.txt"), "1000, 600\n1360, 1200\n").unwrap();
        let fp = Footprint::load(d.path(), SizeUnit::Bytes).unwrap();
        assert_eq!(fp.unit, 1);
        assert_eq!(fp.request_rate, [(360, 600), (360, 1200)]);
        std::fs::write(d.path().join("request_rate.txt"), "1000 600\n").unwrap();
        let e = Footprint::load(d.path(), SizeUnit::Bytes)
            .unwrap_err()
            .to_string();
        assert!(e.contains("time, requests"), "{e}");
    }
}
