//! Our own iperf: what a bed's links really carry, measured between two hosts over TCP.
//!
//! [`rate`] streams bytes from one host to another for a while and counts the goodput at the
//! receiver, from its first byte to its last (the handshake and slow start's first round trip
//! are outside the window). TCP goodput is below a `tbf` rate by the headers, 1448 payload
//! bytes in 1514 on the wire (95.6%). [`rtt`] bounces one byte back and forth with Nagle off
//! and reports every round trip.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::time::{Duration, Instant};

use serde::Serialize;

use crate::{Bed, Error};

/// One rate measurement.
#[derive(Debug, Clone, Serialize)]
pub struct Rate {
    /// Sending host.
    pub from: String,
    /// Receiving host.
    pub to: String,
    /// Bytes the receiver got inside its window.
    pub bytes: u64,
    /// The receiver's window, first byte to last.
    pub seconds: f64,
    /// Goodput, bits per second.
    pub bps: f64,
}

fn listen(bed: &Bed, host: &str) -> Result<(TcpListener, SocketAddr), Error> {
    let addr = bed.host(host)?.addr;
    let listener = bed
        .spawn_in(host, move || TcpListener::bind((addr, 0)))?
        .join()
        .expect("bind thread")??;
    let local = listener.local_addr()?;
    Ok((listener, local))
}

/// Sends from host `from` to host `to` for `duration` and measures the goodput.
pub fn rate(bed: &Bed, from: &str, to: &str, duration: Duration) -> Result<Rate, Error> {
    // The listening socket is made inside `to`; it stays in that namespace when used here.
    let (listener, addr) = listen(bed, to)?;
    let receiver = std::thread::spawn(move || -> std::io::Result<(u64, f64)> {
        let (mut s, _) = listener.accept()?;
        let mut buf = vec![0u8; 1 << 20];
        let mut bytes = 0u64;
        let mut first: Option<Instant> = None;
        let mut last = Instant::now();
        loop {
            let n = s.read(&mut buf)?;
            if n == 0 {
                break;
            }
            let now = Instant::now();
            if first.is_none() {
                first = Some(now);
            } else {
                bytes += n as u64;
            }
            last = now;
        }
        let secs = first.map_or(0.0, |f| (last - f).as_secs_f64());
        Ok((bytes, secs))
    });
    let sender = bed.spawn_in(from, move || -> std::io::Result<()> {
        let mut s = TcpStream::connect_timeout(&addr, Duration::from_secs(5))?;
        let buf = vec![0x5au8; 256 << 10];
        let end = Instant::now() + duration;
        while Instant::now() < end {
            s.write_all(&buf)?;
        }
        s.shutdown(std::net::Shutdown::Write)
    })?;
    sender.join().expect("sender thread")??;
    let (bytes, seconds) = receiver.join().expect("receiver thread")?;
    let bps = if seconds > 0.0 {
        bytes as f64 * 8.0 / seconds
    } else {
        0.0
    };
    Ok(Rate {
        from: from.into(),
        to: to.into(),
        bytes,
        seconds,
        bps,
    })
}

/// How long [`rtt`] waits for its connection and for each echo before it gives up. Generous:
/// on a lossy link TCP backs off (SYNs at 1, 3 and 7 s; data from 200 ms, doubling), and a
/// 20% loss each way once stalled a round past the 5 s this waited before (the test
/// `a_lossy_link_loses_its_share_of_packets`, 2026-11-28).
const RTT_PATIENCE: Duration = Duration::from_secs(30);

/// `rounds` round trips of one byte from host `from` to host `to` and back.
pub fn rtt(bed: &Bed, from: &str, to: &str, rounds: usize) -> Result<Vec<Duration>, Error> {
    rtt_within(bed, from, to, rounds, RTT_PATIENCE)
}

/// [`rtt`], each step (the connection, each round trip) given up after `patience`: for a
/// probe expected to fail (a cut or partitioned link), which otherwise waits out
/// [`rtt`]'s patience, set for lossy links.
pub fn rtt_within(
    bed: &Bed,
    from: &str,
    to: &str,
    rounds: usize,
    patience: Duration,
) -> Result<Vec<Duration>, Error> {
    let (listener, addr) = listen(bed, to)?;
    let echo = std::thread::spawn(move || -> std::io::Result<()> {
        let (mut s, _) = listener.accept()?;
        s.set_nodelay(true)?;
        let mut b = [0u8; 1];
        loop {
            if s.read(&mut b)? == 0 {
                return Ok(());
            }
            s.write_all(&b)?;
        }
    });
    let pinger = bed.spawn_in(from, move || -> std::io::Result<Vec<Duration>> {
        let mut s = TcpStream::connect_timeout(&addr, patience)?;
        s.set_nodelay(true)?;
        s.set_read_timeout(Some(patience))?;
        let mut out = Vec::with_capacity(rounds);
        let mut b = [7u8; 1];
        for _ in 0..rounds {
            let t = Instant::now();
            s.write_all(&b)?;
            s.read_exact(&mut b)?;
            out.push(t.elapsed());
        }
        Ok(out)
    })?;
    let out = pinger.join().expect("pinger thread")??;
    echo.join().expect("echo thread")?;
    Ok(out)
}

/// The `q`-quantile of `samples` (sorted in place).
pub fn quantile(samples: &mut [Duration], q: f64) -> Duration {
    if samples.is_empty() {
        return Duration::ZERO;
    }
    samples.sort_unstable();
    let i = ((samples.len() - 1) as f64 * q).round() as usize;
    samples[i]
}
