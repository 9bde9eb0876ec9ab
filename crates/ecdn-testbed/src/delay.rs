//! The delayer: a one-way delay for a host's packets, in user space.
//!
//! `tc`'s netem would do this in the kernel, but kernels built without it (this project's CI
//! machines among them) have only rate qdiscs. So a host's arriving packets go to an NFQUEUE,
//! one per sending host (`iptables -j NFQUEUE --queue-bypass` in the host's namespace), and
//! this loop holds each packet for its delay before it tells the kernel to let it go. The loop only sees the
//! packet's id (the queue is set to copy metadata, no payload) and answers with one batch
//! verdict for every packet whose time has come, so its cost is a few system calls per batch.
//!
//! Packets leave in the order they came: a packet's release time is the later of its own
//! (`now + delay ± jitter`) and the previous packet's, as netem does when it also shapes rate.
//! If the delayer stops, `bypass` lets packets through undelayed; nothing is lost.
//!
//! The netlink messages are those of `linux/netfilter/nfnetlink_queue.h`.

use std::collections::VecDeque;
use std::io;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Delay and jitter that a running delayer reads for every packet, so a fault verb can change
/// them without restarting it.
#[derive(Debug, Default)]
pub struct DelayParams {
    delay_us: AtomicU64,
    jitter_us: AtomicU64,
}

impl DelayParams {
    /// Sets the one-way delay and its jitter.
    pub fn set(&self, delay: Duration, jitter: Duration) {
        self.delay_us
            .store(delay.as_micros() as u64, Ordering::Relaxed);
        self.jitter_us
            .store(jitter.as_micros() as u64, Ordering::Relaxed);
    }

    fn get(&self) -> (u64, u64) {
        (
            self.delay_us.load(Ordering::Relaxed),
            self.jitter_us.load(Ordering::Relaxed),
        )
    }
}

/// What a delayer measured of itself, to tell whether it kept up: a delayer that cannot keep
/// up delays packets more than asked (they wait in the kernel's queue before it reads them),
/// and a run through it measures the bed, not the system ([`DelayStats::saturated_seconds`]).
#[derive(Debug, Default)]
pub struct DelayStats {
    /// Packets held and released.
    pub packets: AtomicU64,
    /// Packets released more than [`LATE`] after their time.
    pub late: AtomicU64,
    /// The latest of them, µs after its time.
    pub max_late_us: AtomicU64,
    /// Times the kernel dropped queue messages (ENOBUFS): those packets went on undelayed.
    pub overflows: AtomicU64,
    /// Seconds in which the loop was busy (not waiting for packets) more than [`BUSY`] of the
    /// time, released more than [`LATE_SHARE`] of its packets late (of at least
    /// [`MIN_PACKETS`]), or overflowed.
    pub saturated_seconds: AtomicU64,
    /// The busiest second's busy fraction, in thousandths.
    pub max_busy_permille: AtomicU64,
    /// Time the loop was busy over every second measured, µs: the CPU the delayer took from
    /// the machine (at its real-time priority, from the processes under test first).
    pub busy_us: AtomicU64,
    /// The CPU time the delayer's thread took, user and system, µs (`getrusage`'s
    /// `RUSAGE_THREAD`). More than [`DelayStats::busy_us`]: letting a packet go runs the rest
    /// of the kernel's receive path for it (TCP, the socket's wake-up, the acknowledgment it
    /// sends through the links) in the delayer's system call, and the wake-ups cost too.
    pub cpu_us: AtomicU64,
    /// Seconds measured.
    pub seconds: AtomicU64,
}

/// A packet released this much after its time is late.
pub const LATE: Duration = Duration::from_millis(1);
/// A loop busy more than this fraction of a second did not keep up with its packets.
pub const BUSY: f64 = 0.9;
/// A second with more than this share of its packets late did not carry the link's delay ...
pub const LATE_SHARE: f64 = 0.05;
/// ... if it carried at least this many: a few late packets of a quiet second (a
/// coordinator's link, a node out of the map) are the scheduler's hiccups, not a load the
/// delayer fell behind on (seen on the bed: 4 of about 40 packets 5 ms late, 0% busy).
pub const MIN_PACKETS: u64 = 100;

/// One second of a delayer's loop, measured.
struct Second {
    start: Instant,
    waited: Duration,
    packets: u64,
    late: u64,
    overflows: u64,
}

impl Second {
    fn new(start: Instant) -> Second {
        Second {
            start,
            waited: Duration::ZERO,
            packets: 0,
            late: 0,
            overflows: 0,
        }
    }

    /// Closes the second if it is over, into `stats`.
    fn roll(&mut self, now: Instant, stats: &DelayStats) {
        let wall = now.saturating_duration_since(self.start);
        if wall < Duration::from_secs(1) {
            return;
        }
        let busy = 1.0 - self.waited.as_secs_f64() / wall.as_secs_f64();
        stats.busy_us.fetch_add(
            wall.saturating_sub(self.waited).as_micros() as u64,
            Ordering::Relaxed,
        );
        let permille = (busy.clamp(0.0, 1.0) * 1000.0) as u64;
        stats
            .max_busy_permille
            .fetch_max(permille, Ordering::Relaxed);
        stats.seconds.fetch_add(1, Ordering::Relaxed);
        stats.cpu_us.store(thread_cpu_us(), Ordering::Relaxed);
        let late =
            self.packets >= MIN_PACKETS && self.late as f64 > LATE_SHARE * self.packets as f64;
        if busy > BUSY || late || self.overflows > 0 {
            stats.saturated_seconds.fetch_add(1, Ordering::Relaxed);
        }
        *self = Second::new(now);
    }
}

const NETLINK_NETFILTER: i32 = 12;
const NFNL_SUBSYS_QUEUE: u16 = 3;
const NFQNL_MSG_PACKET: u16 = 0;
const NFQNL_MSG_CONFIG: u16 = 2;
const NFQNL_MSG_VERDICT_BATCH: u16 = 3;
const NFQA_PACKET_HDR: u16 = 1;
const NFQA_VERDICT_HDR: u16 = 2;
const NFQA_CFG_CMD: u16 = 1;
const NFQA_CFG_PARAMS: u16 = 2;
const NFQA_CFG_QUEUE_MAXLEN: u16 = 3;
const NFQA_CFG_MASK: u16 = 4;
const NFQA_CFG_FLAGS: u16 = 5;
const NFQNL_CFG_CMD_BIND: u8 = 1;
const NFQNL_COPY_META: u8 = 1;
const NFQA_CFG_F_FAIL_OPEN: u32 = 1;
const NFQA_CFG_F_GSO: u32 = 4;
const NF_ACCEPT: u32 = 1;
const NLMSG_ERROR: u16 = 2;
const NLM_F_REQUEST: u16 = 1;
const NLM_F_ACK: u16 = 4;

/// A netlink socket bound to NFQUEUEs of the namespace it was opened in.
struct Queue {
    fd: i32,
    seq: u32,
    /// ENOBUFS seen so far.
    overflows: u64,
}

impl Drop for Queue {
    fn drop(&mut self) {
        // SAFETY: the descriptor is ours and closed once.
        unsafe { libc::close(self.fd) };
    }
}

fn os_err<T>(rc: T, what: &str) -> io::Result<T>
where
    T: PartialOrd + Default,
{
    if rc < T::default() {
        let e = io::Error::last_os_error();
        Err(io::Error::new(e.kind(), format!("{what}: {e}")))
    } else {
        Ok(rc)
    }
}

impl Queue {
    /// Opens a netlink socket in the calling thread's namespace and binds it to queues `nums`.
    fn open(nums: impl Iterator<Item = u16>) -> io::Result<Queue> {
        // SAFETY: plain socket calls on a descriptor this function owns.
        let fd = os_err(
            unsafe {
                libc::socket(
                    libc::AF_NETLINK,
                    libc::SOCK_RAW | libc::SOCK_CLOEXEC,
                    NETLINK_NETFILTER,
                )
            },
            "netlink socket",
        )?;
        let mut q = Queue {
            fd,
            seq: 0,
            overflows: 0,
        };
        // SAFETY: a zeroed sockaddr_nl is valid; the kernel picks the port id.
        let mut addr: libc::sockaddr_nl = unsafe { std::mem::zeroed() };
        addr.nl_family = libc::AF_NETLINK as u16;
        os_err(
            unsafe {
                libc::bind(
                    fd,
                    &addr as *const _ as *const libc::sockaddr,
                    std::mem::size_of::<libc::sockaddr_nl>() as u32,
                )
            },
            "bind netlink",
        )?;
        // A big receive buffer: a burst of packets must not overflow it.
        let size: i32 = 8 << 20;
        unsafe {
            libc::setsockopt(
                fd,
                libc::SOL_SOCKET,
                libc::SO_RCVBUFFORCE,
                &size as *const _ as *const libc::c_void,
                4,
            );
        }
        // Bind each queue, then: copy only metadata, hold up to 64k packets, accept (not drop)
        // when full, and take GSO packets whole.
        for num in nums {
            let mut cmd = [0u8; 4];
            cmd[0] = NFQNL_CFG_CMD_BIND;
            cmd[2..4].copy_from_slice(&(libc::AF_INET as u16).to_be_bytes());
            q.request(num, NFQNL_MSG_CONFIG, &[(NFQA_CFG_CMD, &cmd)])?;
            let mut params = [0u8; 5];
            params[4] = NFQNL_COPY_META;
            let flags = (NFQA_CFG_F_FAIL_OPEN | NFQA_CFG_F_GSO).to_be_bytes();
            q.request(
                num,
                NFQNL_MSG_CONFIG,
                &[
                    (NFQA_CFG_PARAMS, &params),
                    (NFQA_CFG_QUEUE_MAXLEN, &65536u32.to_be_bytes()),
                    (NFQA_CFG_MASK, &flags),
                    (NFQA_CFG_FLAGS, &flags),
                ],
            )?;
        }
        Ok(q)
    }

    fn message(&mut self, num: u16, kind: u16, flags: u16, attrs: &[(u16, &[u8])]) -> Vec<u8> {
        self.seq = self.seq.wrapping_add(1);
        let mut m = Vec::with_capacity(64);
        m.extend_from_slice(&[0; 4]); // length, filled below
        m.extend_from_slice(&((NFNL_SUBSYS_QUEUE << 8) | kind).to_ne_bytes());
        m.extend_from_slice(&(NLM_F_REQUEST | flags).to_ne_bytes());
        m.extend_from_slice(&self.seq.to_ne_bytes());
        m.extend_from_slice(&0u32.to_ne_bytes());
        // nfgenmsg: family AF_UNSPEC, version 0, the queue number big-endian.
        m.extend_from_slice(&[0, 0]);
        m.extend_from_slice(&num.to_be_bytes());
        for (kind, value) in attrs {
            let len = 4 + value.len();
            m.extend_from_slice(&(len as u16).to_ne_bytes());
            m.extend_from_slice(&kind.to_ne_bytes());
            m.extend_from_slice(value);
            m.resize(m.len().next_multiple_of(4), 0);
        }
        let len = m.len() as u32;
        m[0..4].copy_from_slice(&len.to_ne_bytes());
        m
    }

    fn send(&self, m: &[u8]) -> io::Result<()> {
        // SAFETY: the buffer is valid for its length; the socket is connected to the kernel.
        os_err(
            unsafe { libc::send(self.fd, m.as_ptr() as *const libc::c_void, m.len(), 0) },
            "netlink send",
        )
        .map(|_| ())
    }

    /// Sends a config message and waits for the kernel's acknowledgement.
    fn request(&mut self, num: u16, kind: u16, attrs: &[(u16, &[u8])]) -> io::Result<()> {
        let m = self.message(num, kind, NLM_F_ACK, attrs);
        self.send(&m)?;
        let mut buf = vec![0u8; 8192];
        loop {
            let n = self.recv(&mut buf, Duration::from_secs(3600))?;
            for (kind, body) in messages(&buf[..n]) {
                if kind == NLMSG_ERROR && body.len() >= 4 {
                    let errno = i32::from_ne_bytes(body[0..4].try_into().unwrap());
                    return if errno == 0 {
                        Ok(())
                    } else {
                        Err(io::Error::new(
                            io::Error::from_raw_os_error(-errno).kind(),
                            format!("NFQUEUE config: {}", io::Error::from_raw_os_error(-errno)),
                        ))
                    };
                }
            }
        }
    }

    /// Waits up to `timeout` for messages; 0 bytes when none came.
    fn recv(&mut self, buf: &mut [u8], timeout: Duration) -> io::Result<usize> {
        let mut pfd = libc::pollfd {
            fd: self.fd,
            events: libc::POLLIN,
            revents: 0,
        };
        // ppoll, not poll: to the microsecond, so the loop neither wakes a millisecond early
        // and spins nor sleeps past a packet's time.
        let ts = libc::timespec {
            tv_sec: timeout.as_secs() as libc::time_t,
            tv_nsec: timeout.subsec_nanos() as libc::c_long,
        };
        // SAFETY: one valid pollfd, a valid timespec, no signal mask.
        let ready = unsafe { libc::ppoll(&mut pfd, 1, &ts, std::ptr::null()) };
        if ready < 0 {
            let e = io::Error::last_os_error();
            return if e.kind() == io::ErrorKind::Interrupted {
                Ok(0)
            } else {
                Err(e)
            };
        }
        if ready == 0 {
            return Ok(0);
        }
        // SAFETY: the buffer is valid for its length.
        let n = unsafe {
            libc::recv(
                self.fd,
                buf.as_mut_ptr() as *mut libc::c_void,
                buf.len(),
                libc::MSG_DONTWAIT,
            )
        };
        if n < 0 {
            let e = io::Error::last_os_error();
            // ENOBUFS: the kernel dropped messages for us; with fail-open the packets went on.
            return match e.raw_os_error() {
                Some(libc::ENOBUFS) => {
                    self.overflows += 1;
                    Ok(0)
                }
                Some(libc::EAGAIN) | Some(libc::EINTR) => Ok(0),
                _ => Err(e),
            };
        }
        Ok(n as usize)
    }

    /// Lets every packet of queue `num` with an id up to `id` go.
    fn accept_through(&mut self, num: u16, id: u32) -> io::Result<()> {
        let mut hdr = [0u8; 8];
        hdr[0..4].copy_from_slice(&NF_ACCEPT.to_be_bytes());
        hdr[4..8].copy_from_slice(&id.to_be_bytes());
        let m = self.message(num, NFQNL_MSG_VERDICT_BATCH, 0, &[(NFQA_VERDICT_HDR, &hdr)]);
        self.send(&m)
    }
}

/// The netlink messages in one datagram: (type, body after the 16-byte header), read in
/// place; a torn or bogus length ends them.
fn messages(buf: &[u8]) -> impl Iterator<Item = (u16, &[u8])> {
    let mut rest = buf;
    std::iter::from_fn(move || {
        if rest.len() < 16 {
            return None;
        }
        let len = u32::from_ne_bytes(rest[0..4].try_into().unwrap()) as usize;
        if len < 16 || len > rest.len() {
            return None;
        }
        let kind = u16::from_ne_bytes(rest[4..6].try_into().unwrap());
        let body = &rest[16..len];
        rest = &rest[len.next_multiple_of(4).min(rest.len())..];
        Some((kind, body))
    })
}

/// The packet id of an NFQUEUE packet message's body (after nfgenmsg), if it has one.
fn packet_id(body: &[u8]) -> Option<u32> {
    let mut attrs = body.get(4..)?;
    while attrs.len() >= 4 {
        let len = u16::from_ne_bytes(attrs[0..2].try_into().unwrap()) as usize;
        let kind = u16::from_ne_bytes(attrs[2..4].try_into().unwrap()) & 0x3fff;
        if len < 4 || len > attrs.len() {
            return None;
        }
        if kind == NFQA_PACKET_HDR && len >= 8 {
            return Some(u32::from_be_bytes(attrs[4..8].try_into().unwrap()));
        }
        attrs = &attrs[len.next_multiple_of(4).min(attrs.len())..];
    }
    None
}

/// The CPU time the calling thread took so far, user and system, µs (0 if it cannot be read).
fn thread_cpu_us() -> u64 {
    // SAFETY: a zeroed rusage is a valid out-parameter for getrusage.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: RUSAGE_THREAD of the calling thread into a valid rusage.
    if unsafe { libc::getrusage(libc::RUSAGE_THREAD, &mut usage) } != 0 {
        return 0;
    }
    let us = |t: libc::timeval| t.tv_sec as u64 * 1_000_000 + t.tv_usec as u64;
    us(usage.ru_utime) + us(usage.ru_stime)
}

/// Puts the calling thread in `SCHED_FIFO` at a low real-time priority, if it may.
fn realtime() {
    let param = libc::sched_param { sched_priority: 10 };
    // SAFETY: the calling thread's own scheduling, with a valid parameter.
    unsafe {
        libc::pthread_setschedparam(libc::pthread_self(), libc::SCHED_FIFO, &param);
    }
}

/// Holds the packets of `queues` (queue number and its delay) of the calling thread's
/// namespace, each for its delay, until `stop` is set. Call it from a thread that entered the
/// host's namespace; `ready` hears whether the queues could be bound.
pub fn run(
    queues: Vec<(u16, Arc<DelayParams>)>,
    stop: Arc<AtomicBool>,
    ready: std::sync::mpsc::Sender<io::Result<()>>,
    stats: Arc<DelayStats>,
) -> io::Result<()> {
    // Real-time priority: on a machine as busy as the processes on the bed make it, a
    // delayer scheduled like them wakes milliseconds after its packets are due (measured: a
    // tenth of the packets over 1 ms late, up to 18 ms, with the loop busy a fifth of the
    // time). It sleeps in poll between packets, and the kernel's RT throttling keeps a share
    // for everything else. Without the privilege it runs as it is, and its lateness shows in
    // its stats.
    realtime();
    let mut socket = match Queue::open(queues.iter().map(|q| q.0)) {
        Ok(s) => {
            let _ = ready.send(Ok(()));
            s
        }
        Err(e) => {
            let _ = ready.send(Err(io::Error::new(e.kind(), e.to_string())));
            return Err(e);
        }
    };
    // Per queue: its parameters, the held packets (release time, id), the last release time.
    struct Held {
        num: u16,
        params: Arc<DelayParams>,
        fifo: VecDeque<(Instant, u32)>,
        last: Instant,
    }
    let mut held: Vec<Held> = queues
        .into_iter()
        .map(|(num, params)| Held {
            num,
            params,
            fifo: VecDeque::new(),
            last: Instant::now(),
        })
        .collect();
    let mut buf = vec![0u8; 1 << 20];
    let mut rng = 0x9e37_79b9_7f4a_7c15u64;
    let mut second = Second::new(Instant::now());
    while !stop.load(Ordering::Relaxed) {
        let now = Instant::now();
        second.roll(now, &stats);
        // Release what is due, one verdict per queue for the last of them.
        let mut next: Option<Instant> = None;
        for h in &mut held {
            let mut due = None;
            while let Some(&(at, id)) = h.fifo.front() {
                if at > now {
                    next = Some(next.map_or(at, |n| n.min(at)));
                    break;
                }
                let late = now - at;
                if late > LATE {
                    second.late += 1;
                    stats.late.fetch_add(1, Ordering::Relaxed);
                    stats
                        .max_late_us
                        .fetch_max(late.as_micros() as u64, Ordering::Relaxed);
                }
                stats.packets.fetch_add(1, Ordering::Relaxed);
                second.packets += 1;
                due = Some(id);
                h.fifo.pop_front();
            }
            if let Some(id) = due {
                socket.accept_through(h.num, id)?;
            }
        }
        let wait = match next {
            Some(at) => at.saturating_duration_since(now),
            None => Duration::from_millis(50),
        };
        let (waiting, overflows) = (Instant::now(), socket.overflows);
        let n = socket.recv(&mut buf, wait)?;
        second.waited += waiting.elapsed();
        if socket.overflows > overflows {
            second.overflows += socket.overflows - overflows;
            stats
                .overflows
                .fetch_add(socket.overflows - overflows, Ordering::Relaxed);
        }
        if n == 0 {
            continue;
        }
        let arrived = Instant::now();
        for (kind, body) in messages(&buf[..n]) {
            if kind != (NFNL_SUBSYS_QUEUE << 8) | NFQNL_MSG_PACKET || body.len() < 4 {
                continue;
            }
            let num = u16::from_be_bytes([body[2], body[3]]);
            let Some(id) = packet_id(body) else { continue };
            let Some(h) = held.iter_mut().find(|h| h.num == num) else {
                continue;
            };
            let (delay_us, jitter_us) = h.params.get();
            let mut us = delay_us as i64;
            if jitter_us > 0 {
                // xorshift: a uniform draw in [-jitter, +jitter].
                rng ^= rng << 13;
                rng ^= rng >> 7;
                rng ^= rng << 17;
                let span = 2 * jitter_us + 1;
                us += (rng % span) as i64 - jitter_us as i64;
            }
            let at = (arrived + Duration::from_micros(us.max(0) as u64)).max(h.last);
            h.last = at;
            h.fifo.push_back((at, id));
        }
    }
    // Let everything still held go before leaving.
    for h in &held {
        if let Some(&(_, id)) = h.fifo.back() {
            socket.accept_through(h.num, id)?;
        }
    }
    stats.cpu_us.store(thread_cpu_us(), Ordering::Relaxed);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn packet_ids_are_read_from_their_attribute() {
        // nfgenmsg, then an unrelated attribute, then NFQA_PACKET_HDR.
        let mut body = vec![0u8, 0, 0, 0];
        body.extend_from_slice(&8u16.to_ne_bytes());
        body.extend_from_slice(&9u16.to_ne_bytes());
        body.extend_from_slice(&[1, 2, 3, 4]);
        body.extend_from_slice(&11u16.to_ne_bytes());
        body.extend_from_slice(&NFQA_PACKET_HDR.to_ne_bytes());
        body.extend_from_slice(&77u32.to_be_bytes());
        body.extend_from_slice(&[8, 0, 3, 0]);
        assert_eq!(packet_id(&body), Some(77));
        // Truncated or bogus lengths give nothing, never a panic.
        assert_eq!(packet_id(&body[..10]), None);
        let mut bogus = body.clone();
        bogus[4] = 200;
        assert_eq!(packet_id(&bogus), None);
        assert_eq!(packet_id(&[]), None);
    }

    #[test]
    fn a_second_is_saturated_by_its_late_share_only_under_load() {
        let t = Instant::now();
        let closed = |packets: u64, late: u64, waited_ms: u64| {
            let stats = DelayStats::default();
            let mut s = Second::new(t);
            s.packets = packets;
            s.late = late;
            s.waited = Duration::from_millis(waited_ms);
            s.roll(t + Duration::from_millis(500), &stats);
            assert_eq!(stats.seconds.load(Ordering::Relaxed), 0, "not over yet");
            s.roll(t + Duration::from_secs(1), &stats);
            assert_eq!(stats.seconds.load(Ordering::Relaxed), 1);
            stats.saturated_seconds.load(Ordering::Relaxed)
        };
        // 4 of 40 late in a quiet second: the scheduler, not saturation.
        assert_eq!(closed(40, 4, 990), 0);
        // 10% of 1,000 late: saturated; 4% is not.
        assert_eq!(closed(1000, 100, 500), 1);
        assert_eq!(closed(1000, 40, 500), 0);
        // Busy 95% of the second: saturated however few packets were late.
        assert_eq!(closed(1000, 0, 50), 1);
        // Busy time adds up over the seconds.
        let stats = DelayStats::default();
        for waited in [900, 500] {
            let mut s = Second::new(t);
            s.waited = Duration::from_millis(waited);
            s.roll(t + Duration::from_secs(1), &stats);
        }
        assert_eq!(stats.busy_us.load(Ordering::Relaxed), 600_000);
    }

    #[test]
    fn messages_split_a_datagram() {
        let mut dgram = Vec::new();
        for kind in [5u16, 6] {
            dgram.extend_from_slice(&20u32.to_ne_bytes());
            dgram.extend_from_slice(&kind.to_ne_bytes());
            dgram.extend_from_slice(&[0; 10]);
            dgram.extend_from_slice(&[kind as u8; 4]);
        }
        dgram.extend_from_slice(&[1, 2, 3]); // a torn tail is ignored
        let m: Vec<_> = messages(&dgram).collect();
        assert_eq!(m.len(), 2);
        assert_eq!(m[1], (6, &[6u8; 4][..]));
    }
}
