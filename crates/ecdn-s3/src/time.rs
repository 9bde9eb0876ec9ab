//! The times S3 writes and reads: a signature's `20130524T000000Z`, a listing's
//! `2013-05-24T00:00:00.000Z` and an HTTP date (`Fri, 24 May 2013 00:00:00 GMT`), all UTC,
//! from and to seconds since 1970 (days to civil dates by Howard Hinnant's algorithms).

use crate::error::{Code, S3Error};

/// A request's `x-amz-date` (or `X-Amz-Date`), as sent and in seconds since 1970.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AmzDate {
    pub text: String,
    pub unix: u64,
}

/// Parses `YYYYMMDDTHHMMSSZ`.
pub fn parse_amz_date(s: &str) -> Result<AmzDate, S3Error> {
    let bad = || {
        S3Error::new(
            Code::AccessDenied,
            format!("the request's date {s:?} is not YYYYMMDDTHHMMSSZ"),
        )
    };
    let b = s.as_bytes();
    if !s.is_ascii() || b.len() != 16 || b[8] != b'T' || b[15] != b'Z' {
        return Err(bad());
    }
    let num = |r: std::ops::Range<usize>| -> Option<u64> {
        let part = &s[r];
        part.bytes()
            .all(|c| c.is_ascii_digit())
            .then(|| part.parse().ok())
            .flatten()
    };
    let (y, mo, d) = (num(0..4), num(4..6), num(6..8));
    let (h, mi, se) = (num(9..11), num(11..13), num(13..15));
    let (Some(y), Some(mo), Some(d), Some(h), Some(mi), Some(se)) = (y, mo, d, h, mi, se) else {
        return Err(bad());
    };
    if !(1970..=9999).contains(&y) || !(1..=12).contains(&mo) || d < 1 || d > days_in(y, mo) {
        return Err(bad());
    }
    if h > 23 || mi > 59 || se > 60 {
        return Err(bad());
    }
    let days = days_from_civil(y as i64, mo as u32, d as u32);
    Ok(AmzDate {
        text: s.to_string(),
        unix: days as u64 * 86_400 + h * 3600 + mi * 60 + se,
    })
}

fn days_in(y: u64, m: u64) -> u64 {
    match m {
        2 if (y.is_multiple_of(4) && !y.is_multiple_of(100)) || y.is_multiple_of(400) => 29,
        2 => 28,
        4 | 6 | 9 | 11 => 30,
        _ => 31,
    }
}

/// Days since 1970-01-01 of a civil date.
fn days_from_civil(y: i64, m: u32, d: u32) -> i64 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let mp = (m as i64 + 9) % 12;
    let doy = (153 * mp + 2) / 5 + d as i64 - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

/// The civil date of a day since 1970-01-01: (year, month, day).
fn civil_from_days(z: i64) -> (i64, u32, u32) {
    let z = z + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let y = yoe + era * 400;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    (if m <= 2 { y + 1 } else { y }, m, d)
}

fn parts(unix_ms: u64) -> (i64, u32, u32, u64, u64, u64, u64) {
    let secs = unix_ms / 1000;
    let (y, m, d) = civil_from_days((secs / 86_400) as i64);
    let s = secs % 86_400;
    (y, m, d, s / 3600, s / 60 % 60, s % 60, unix_ms % 1000)
}

/// A listing's time: `2013-05-24T00:00:00.000Z`.
pub fn iso8601(unix_ms: u64) -> String {
    let (y, m, d, h, mi, s, ms) = parts(unix_ms);
    format!("{y:04}-{m:02}-{d:02}T{h:02}:{mi:02}:{s:02}.{ms:03}Z")
}

/// An HTTP date: `Fri, 24 May 2013 00:00:00 GMT`.
pub fn http_date(unix_ms: u64) -> String {
    const DAYS: [&str; 7] = ["Thu", "Fri", "Sat", "Sun", "Mon", "Tue", "Wed"];
    const MONTHS: [&str; 12] = [
        "Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec",
    ];
    let (y, m, d, h, mi, s, _) = parts(unix_ms);
    let wd = DAYS[(unix_ms / 1000 / 86_400 % 7) as usize];
    format!(
        "{wd}, {d:02} {} {y:04} {h:02}:{mi:02}:{s:02} GMT",
        MONTHS[m as usize - 1]
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dates_round_trip_and_bad_ones_are_refused() {
        let d = parse_amz_date("20130524T000000Z").unwrap();
        assert_eq!(d.unix, 1_369_353_600);
        assert_eq!(iso8601(d.unix * 1000 + 7), "2013-05-24T00:00:00.007Z");
        assert_eq!(http_date(d.unix * 1000), "Fri, 24 May 2013 00:00:00 GMT");
        assert_eq!(
            parse_amz_date("20240229T235959Z").unwrap().unix,
            1_709_251_199
        );
        assert_eq!(http_date(0), "Thu, 01 Jan 1970 00:00:00 GMT");
        for bad in [
            "",
            "20130524T000000",
            "20130524 000000Z",
            "20130229T000000Z",
            "20131324T000000Z",
            "2013052AT000000Z",
            "20130524T250000Z",
            "+0130524T000000Z",
            "19690101T000000Z",
            // Not ASCII, with `T` and `Z` where they go: refused, not cut inside a character.
            "201\u{e9}052T000000Z",
        ] {
            assert!(parse_amz_date(bad).is_err(), "{bad}");
        }
        // Every day from 1970 to 2100 round trips.
        for day in 0..47_847 {
            let (y, m, d) = civil_from_days(day);
            assert_eq!(days_from_civil(y, m, d), day);
        }
    }
}
