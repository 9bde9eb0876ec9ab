//! Link specs: what a host's link to the bridge looks like, in `tc`'s words.
//!
//! A spec is a comma-separated list. Its first item may be a bare rate; the others are
//! `key=value`:
//!
//! ```text
//! 1gbit                      1 Gbit/s each way, no delay, no loss
//! 100mbit,delay=20ms         a WAN client: 100 Mbit/s, 20 ms one-way delay each way
//! rate=10gbit,loss=1%        10 Gbit/s with 1% of the packets lost each way
//! delay=5ms,jitter=1ms       unlimited rate, 5 ± 1 ms each way
//! ```
//!
//! Each value applies to both directions of the host's link: `rate` caps what the host sends
//! and what it receives, `delay` delays both, `loss` drops that share of the packets each way.
//! So two hosts with `delay=5ms` each see a round-trip time of 20 ms between them.

use std::fmt;
use std::time::Duration;

use serde::Serialize;

/// One host's link, both directions.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct LinkSpec {
    /// Bits per second each way; `None` is the bridge's own speed.
    pub rate_bps: Option<u64>,
    /// One-way delay each way.
    #[serde(serialize_with = "micros")]
    pub delay: Duration,
    /// Spread of the delay: each packet's delay is uniform in `delay ± jitter`. Packets keep
    /// their order (a later packet never leaves before an earlier one).
    #[serde(serialize_with = "micros")]
    pub jitter: Duration,
    /// Packets lost each way, in parts per million.
    pub loss_ppm: u32,
}

fn micros<S: serde::Serializer>(d: &Duration, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_u64(d.as_micros() as u64)
}

impl LinkSpec {
    /// Parses a spec (see the module doc).
    pub fn parse(text: &str) -> Result<LinkSpec, String> {
        let mut spec = LinkSpec::default();
        for (i, item) in text.split(',').map(str::trim).enumerate() {
            if item.is_empty() {
                return Err(format!("link spec {text:?}: empty item"));
            }
            let (key, value) = match item.split_once('=') {
                Some((k, v)) => (k.trim(), v.trim()),
                None if i == 0 => ("rate", item),
                None => return Err(format!("link spec {text:?}: {item:?} is not key=value")),
            };
            match key {
                "rate" => spec.rate_bps = parse_rate(value)?,
                "delay" => spec.delay = parse_duration(value)?,
                "jitter" => spec.jitter = parse_duration(value)?,
                "loss" => spec.loss_ppm = parse_loss(value)?,
                _ => {
                    return Err(format!(
                        "link spec {text:?}: unknown key {key:?} (rate, delay, jitter, loss)"
                    ))
                }
            }
        }
        if spec.jitter > spec.delay {
            return Err(format!(
                "link spec {text:?}: jitter is larger than the delay"
            ));
        }
        Ok(spec)
    }

    /// Whether packets of this link go through the userspace delayer.
    pub fn needs_delayer(&self) -> bool {
        !self.delay.is_zero()
    }
}

impl fmt::Display for LinkSpec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut items = Vec::new();
        match self.rate_bps {
            Some(r) => items.push(format!("rate={}", rate_text(r))),
            None => items.push("rate=unlimited".to_string()),
        }
        if !self.delay.is_zero() {
            items.push(format!("delay={}", duration_text(self.delay)));
        }
        if !self.jitter.is_zero() {
            items.push(format!("jitter={}", duration_text(self.jitter)));
        }
        if self.loss_ppm > 0 {
            items.push(format!("loss={}%", self.loss_ppm as f64 / 10_000.0));
        }
        f.write_str(&items.join(","))
    }
}

/// `1gbit`, `250mbit`, `64kbit`, `8000bit`, or `unlimited`.
pub fn parse_rate(value: &str) -> Result<Option<u64>, String> {
    let v = value.to_ascii_lowercase();
    if v == "unlimited" || v == "none" {
        return Ok(None);
    }
    let units = [("gbit", 1e9), ("mbit", 1e6), ("kbit", 1e3), ("bit", 1.0)];
    for (unit, scale) in units {
        if let Some(number) = v.strip_suffix(unit) {
            let n: f64 = number
                .parse()
                .map_err(|_| format!("rate {value:?}: {number:?} is not a number"))?;
            let bps = n * scale;
            if !(bps.is_finite() && (8000.0..=1e12).contains(&bps)) {
                return Err(format!("rate {value:?}: out of 8kbit..1000gbit"));
            }
            return Ok(Some(bps.round() as u64));
        }
    }
    Err(format!(
        "rate {value:?}: needs a unit (gbit, mbit, kbit, bit) or `unlimited`"
    ))
}

/// `20ms`, `500us`, `1s`, `0`.
pub fn parse_duration(value: &str) -> Result<Duration, String> {
    if value == "0" {
        return Ok(Duration::ZERO);
    }
    let units = [("ms", 1e-3), ("us", 1e-6), ("s", 1.0)];
    for (unit, scale) in units {
        if let Some(number) = value.strip_suffix(unit) {
            let n: f64 = number
                .parse()
                .map_err(|_| format!("duration {value:?}: {number:?} is not a number"))?;
            if !(n.is_finite() && n >= 0.0 && n * scale <= 10.0) {
                return Err(format!("duration {value:?}: out of 0..10s"));
            }
            return Ok(Duration::from_secs_f64(n * scale));
        }
    }
    Err(format!("duration {value:?}: needs a unit (ms, us, s)"))
}

fn parse_loss(value: &str) -> Result<u32, String> {
    let number = value
        .strip_suffix('%')
        .ok_or_else(|| format!("loss {value:?}: write it as a percentage, e.g. 1%"))?;
    let pct: f64 = number
        .parse()
        .map_err(|_| format!("loss {value:?}: {number:?} is not a number"))?;
    if !(0.0..=100.0).contains(&pct) {
        return Err(format!("loss {value:?}: out of 0..100%"));
    }
    Ok((pct * 10_000.0).round() as u32)
}

/// A rate the way `tc` and the spec write it.
pub fn rate_text(bps: u64) -> String {
    for (unit, scale) in [
        ("gbit", 1_000_000_000),
        ("mbit", 1_000_000),
        ("kbit", 1_000),
    ] {
        if bps >= scale && bps.is_multiple_of(scale) {
            return format!("{}{unit}", bps / scale);
        }
    }
    format!("{bps}bit")
}

fn duration_text(d: Duration) -> String {
    let us = d.as_micros();
    if us.is_multiple_of(1000) {
        format!("{}ms", us / 1000)
    } else {
        format!("{us}us")
    }
}

/// A host of a bed: its name and its link. Written `NAME=SPEC` on the command line.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct HostSpec {
    /// 1 to 8 characters of `[a-z0-9]`; the host's namespace is named after it.
    pub name: String,
    /// The host's link to the bridge.
    pub link: LinkSpec,
}

impl HostSpec {
    /// A host named `name` with link `link`, the name checked.
    pub fn new(name: &str, link: LinkSpec) -> Result<HostSpec, String> {
        let ok = !name.is_empty()
            && name.len() <= 8
            && name
                .bytes()
                .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit());
        if !ok {
            return Err(format!("host name {name:?}: use 1 to 8 of [a-z0-9]"));
        }
        Ok(HostSpec {
            name: name.to_string(),
            link,
        })
    }

    /// Parses `NAME=SPEC` (`client=100mbit,delay=20ms`); `NAME` alone has an unshaped link.
    pub fn parse(text: &str) -> Result<HostSpec, String> {
        match text.split_once('=') {
            Some((name, spec)) if !name.contains(',') => {
                HostSpec::new(name, LinkSpec::parse(spec)?)
            }
            _ => HostSpec::new(text, LinkSpec::default()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn specs_parse_and_print_back() {
        let s = LinkSpec::parse("1gbit").unwrap();
        assert_eq!(s.rate_bps, Some(1_000_000_000));
        assert_eq!(s.to_string(), "rate=1gbit");
        let s = LinkSpec::parse("100mbit,delay=20ms,jitter=2ms,loss=1%").unwrap();
        assert_eq!(s.rate_bps, Some(100_000_000));
        assert_eq!(s.delay, Duration::from_millis(20));
        assert_eq!(s.jitter, Duration::from_millis(2));
        assert_eq!(s.loss_ppm, 10_000);
        assert_eq!(LinkSpec::parse(&s.to_string()).unwrap(), s);
        let s = LinkSpec::parse("delay=250us,loss=0.5%").unwrap();
        assert_eq!(s.rate_bps, None);
        assert_eq!(s.loss_ppm, 5000);
        assert_eq!(LinkSpec::parse(&s.to_string()).unwrap(), s);
    }

    #[test]
    fn bad_specs_say_why() {
        for (bad, why) in [
            ("", "empty item"),
            ("1gb", "needs a unit"),
            ("fastbit", "not a number"),
            ("1gbit,20ms", "not key=value"),
            ("speed=1gbit", "unknown key"),
            ("delay=5ms,jitter=6ms", "jitter is larger"),
            ("loss=1", "percentage"),
            ("loss=120%", "out of 0..100%"),
            ("delay=-1ms", "out of 0..10s"),
            ("1bit", "out of 8kbit"),
        ] {
            let err = LinkSpec::parse(bad).unwrap_err();
            assert!(err.contains(why), "{bad:?}: {err}");
        }
    }

    #[test]
    fn host_names_are_checked() {
        let h = HostSpec::parse("client=100mbit,delay=20ms").unwrap();
        assert_eq!(h.name, "client");
        assert_eq!(h.link.delay, Duration::from_millis(20));
        assert_eq!(HostSpec::parse("origin").unwrap().link, LinkSpec::default());
        assert!(HostSpec::parse("Client=1gbit").is_err());
        assert!(HostSpec::parse("averylongname=1gbit").is_err());
    }
}
