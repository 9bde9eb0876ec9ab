//! A connection's writes gathered until its task has nothing left to do: one TLS record and
//! one system call for a batch of responses.
//!
//! HTTP/2 writes a connection's frames as it encodes them, and the `h2` crate flushes its
//! writer whenever it has queued a DATA frame of more than 256 bytes (it keeps the payload
//! aside and must write it before it encodes the next frame), so ten 1 KiB responses answered
//! at one poll of their connection were ten writes and ten flushes (measured: one `writev`
//! per response). Over TLS each write is a TLS record of its own (its header, its tag, a call
//! of the cipher) and a system call of its own, since `tokio-rustls` sends what a write
//! produced before it returns. nginx gathers a connection's output and sends it once per
//! event.
//!
//! [`gather`] puts a [`Gathered`] transport between the HTTP connection and its byte stream
//! (TLS, or TCP for h2c; plain HTTP/1.1 writes a response's head and body in one `writev`
//! already, so is not gathered), and gives a [`Sender`] to whoever polls the connection
//! ([`super::h2_streams::Batched`]). Writes that fit in [`GATHER`] bytes with what is held
//! already are copied aside and acknowledged at once, and so are flushes; the sender sends
//! what is held, in one write, when the connection's poll is over. A write that does not fit
//! goes to the stream at once, after what is held and in the same vectored write, so large
//! bodies are not copied here and the order of bytes is kept. Over TLS with HTTP/2
//! ([`Records::Whole`]) it goes in whole records: the stream is given a multiple of [`GATHER`]
//! bytes, and the tail is taken as the next write and held. Without that, each 16 KiB DATA
//! frame (a 9-byte head and 16,384 bytes of payload, one write) was two TLS records, the second
//! of 9 bytes. HTTP/1.1 writes a body whole, with nothing after it to join its tail, so there a
//! held tail would be one more record and one more system call per response (measured: three
//! `writev`s per 100 KiB response instead of two): [`Records::AsWritten`] sends the whole write.
//! Shutting the stream down sends what is held first. Reads pass through.

use std::io::{self, IoSlice};
use std::pin::Pin;
use std::sync::{Arc, Mutex, MutexGuard};
use std::task::{ready, Context, Poll};

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};

/// The most bytes held: one TLS record's plaintext (RFC 8446 §5.1), so a held batch is one
/// record.
pub(super) const GATHER: usize = 16 * 1024;

/// The most slices one vectored write passes on (`h2` and hyper pass at most 64, Linux takes
/// 1,024).
const MAX_SLICES: usize = 64;

/// How a write too large to hold goes to the stream (see the module documentation).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Records {
    /// In multiples of [`GATHER`] bytes, the tail held (TLS with HTTP/2).
    Whole,
    /// Whole, as written (HTTP/1.1 over TLS; h2c, which has no records).
    AsWritten,
}

/// The byte stream and what is held for it.
struct Held<I> {
    io: I,
    records: Records,
    /// Bytes acknowledged to the writer and not yet sent: `bytes[sent..]`.
    bytes: Vec<u8>,
    sent: usize,
    /// Why the last send failed: every later write or flush fails the same way.
    failed: Option<io::ErrorKind>,
}

/// `io` with its writes gathered, and the sender that sends them (see the module
/// documentation): the sender must be polled after every poll of the connection that writes
/// to the transport, or what it holds is never sent.
pub(super) fn gather<I>(io: I, records: Records) -> (Gathered<I>, Sender)
where
    I: AsyncWrite + Unpin + Send + 'static,
{
    let held = Arc::new(Mutex::new(Held {
        io,
        records,
        bytes: Vec::new(),
        sent: 0,
        failed: None,
    }));
    (Gathered(held.clone()), Sender(held))
}

/// The transport an HTTP connection reads and writes (see the module documentation).
pub(super) struct Gathered<I>(Arc<Mutex<Held<I>>>);

/// Sends what a [`Gathered`] transport holds.
#[derive(Clone)]
pub(super) struct Sender(Arc<dyn SendHeld>);

impl Sender {
    /// Sends everything held, and flushes the stream. Pending while the stream takes no more
    /// (the task is woken when it does); an error is kept for the connection's next write.
    pub(super) fn poll_send(&self, cx: &mut Context<'_>) -> Poll<()> {
        self.0.poll_send(cx)
    }
}

/// [`Sender`]'s view of a [`Held`] stream of any type.
trait SendHeld: Send + Sync {
    fn poll_send(&self, cx: &mut Context<'_>) -> Poll<()>;
}

impl<I: AsyncWrite + Unpin + Send> SendHeld for Mutex<Held<I>> {
    fn poll_send(&self, cx: &mut Context<'_>) -> Poll<()> {
        let mut held = lock(self);
        if held.failed.is_some() {
            return Poll::Ready(());
        }
        let sent = match held.poll_send_held(cx) {
            Poll::Ready(Ok(())) => Pin::new(&mut held.io).poll_flush(cx),
            other => other,
        };
        match ready!(sent) {
            Ok(()) => {}
            Err(e) => held.failed = Some(e.kind()),
        }
        Poll::Ready(())
    }
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    // Nothing a panic could leave half done here matters more than the connection.
    m.lock().unwrap_or_else(|e| e.into_inner())
}

impl<I> Held<I> {
    fn unsent(&self) -> usize {
        self.bytes.len() - self.sent
    }

    fn check(&self) -> io::Result<()> {
        match self.failed {
            Some(kind) => Err(io::Error::new(kind, "an earlier send failed")),
            None => Ok(()),
        }
    }

    /// Takes `bufs` (`len` bytes) aside; the caller checked that they fit. The buffer grows
    /// as batches need, doubling, and never beyond [`GATHER`]: a connection that only ever
    /// sends small answers one at a time keeps a small one.
    fn hold(&mut self, bufs: &[IoSlice<'_>], len: usize) -> usize {
        let need = self.bytes.len() + len;
        if need > self.bytes.capacity() {
            let grown = (2 * self.bytes.capacity()).clamp(need, GATHER.max(need));
            self.bytes.reserve_exact(grown - self.bytes.len());
        }
        let mut n = 0;
        for b in bufs {
            self.bytes.extend_from_slice(b);
            n += b.len();
        }
        n
    }

    /// Records that `n` more held bytes were sent.
    fn sent(&mut self, n: usize) {
        self.sent += n;
        if self.sent == self.bytes.len() {
            self.bytes.clear();
            self.sent = 0;
        }
    }
}

impl<I: AsyncWrite + Unpin> Held<I> {
    /// Sends everything held.
    fn poll_send_held(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        while self.unsent() > 0 {
            let n = ready!(Pin::new(&mut self.io).poll_write(cx, &self.bytes[self.sent..]))?;
            if n == 0 {
                return Poll::Ready(Err(io::ErrorKind::WriteZero.into()));
            }
            self.sent(n);
        }
        Poll::Ready(Ok(()))
    }

    /// A write too large to hold: what is held and `bufs` go to the stream in one vectored
    /// write (repeated while it takes only held bytes). Counts the bytes of `bufs` taken.
    fn poll_write_through(
        &mut self,
        cx: &mut Context<'_>,
        bufs: &[IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        while self.unsent() > 0 {
            let held = self.unsent();
            let mut slices = [IoSlice::new(&[]); MAX_SLICES];
            slices[0] = IoSlice::new(&self.bytes[self.sent..]);
            let count = 1 + bufs.len().min(MAX_SLICES - 1);
            slices[1..count].copy_from_slice(&bufs[..count - 1]);
            let n = ready!(Pin::new(&mut self.io).poll_write_vectored(cx, &slices[..count]))?;
            if n == 0 {
                return Poll::Ready(Err(io::ErrorKind::WriteZero.into()));
            }
            if n <= held {
                self.sent(n);
            } else {
                self.sent(held);
                return Poll::Ready(Ok(n - held));
            }
        }
        Pin::new(&mut self.io).poll_write_vectored(cx, bufs)
    }
}

/// Puts into `out` the slices of the first `n` bytes of `bufs` (at most [`MAX_SLICES`]
/// slices); returns how many. `n` is at most the bytes of `bufs`.
fn first_bytes<'a>(bufs: &'a [IoSlice<'a>], n: usize, out: &mut [IoSlice<'a>]) -> usize {
    let mut left = n;
    let mut count = 0;
    for b in bufs {
        if left == 0 || count == out.len() {
            break;
        }
        let take = b.len().min(left);
        out[count] = IoSlice::new(&b[..take]);
        count += 1;
        left -= take;
    }
    count
}

impl<I: AsyncWrite + Unpin> AsyncWrite for Gathered<I> {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        self.poll_write_vectored(cx, &[IoSlice::new(buf)])
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        let mut held = lock(&self.0);
        held.check()?;
        let len: usize = bufs.iter().map(|b| b.len()).sum();
        let unsent = held.unsent();
        if unsent + len <= GATHER {
            return Poll::Ready(Ok(held.hold(bufs, len)));
        }
        if held.records == Records::AsWritten {
            return held.poll_write_through(cx, bufs);
        }
        // Whole records only: what is held and the first bytes of `bufs` up to a multiple of
        // GATHER go now; the rest comes back as the writer's next write and is held (it fits).
        let through = (unsent + len) / GATHER * GATHER - unsent;
        if through == 0 {
            // Exactly one record is held: send it, and hold this write.
            ready!(held.poll_send_held(cx))?;
            return Poll::Ready(Ok(held.hold(bufs, len)));
        }
        let mut slices = [IoSlice::new(&[]); MAX_SLICES];
        let count = first_bytes(bufs, through, &mut slices);
        held.poll_write_through(cx, &slices[..count])
    }

    fn is_write_vectored(&self) -> bool {
        true
    }

    /// Acknowledged at once: the [`Sender`] sends what is held after the connection's poll.
    fn poll_flush(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<io::Result<()>> {
        Poll::Ready(lock(&self.0).check())
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let mut held = lock(&self.0);
        held.check()?;
        ready!(held.poll_send_held(cx))?;
        Pin::new(&mut held.io).poll_shutdown(cx)
    }
}

impl<I: AsyncRead + Unpin> AsyncRead for Gathered<I> {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        Pin::new(&mut lock(&self.0).io).poll_read(cx, buf)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    /// Small writes and flushes wait for the sender; a large write goes out at once behind
    /// what is held; shutting down sends what is left; the bytes arrive whole and in order.
    #[tokio::test]
    async fn small_writes_wait_for_the_sender_and_order_is_kept() {
        let (near, mut far) = tokio::io::duplex(1 << 20);
        let (mut gathered, sender) = gather(near, Records::Whole);
        gathered.write_all(b"one ").await.unwrap();
        gathered.write_all(b"two ").await.unwrap();
        gathered.flush().await.unwrap();
        let mut buf = [0u8; 64];
        let nothing =
            tokio::time::timeout(std::time::Duration::from_millis(20), far.read(&mut buf));
        assert!(
            nothing.await.is_err(),
            "held bytes were sent before the sender ran"
        );
        std::future::poll_fn(|cx| sender.poll_send(cx)).await;
        let n = far.read(&mut buf).await.unwrap();
        assert_eq!(&buf[..n], b"one two ");

        let large = vec![b'x'; GATHER + 1];
        gathered.write_all(b"three ").await.unwrap();
        gathered.write_all(&large).await.unwrap();
        gathered.write_all(b" four").await.unwrap();
        gathered.shutdown().await.unwrap();
        let mut rest = Vec::new();
        far.read_to_end(&mut rest).await.unwrap();
        let mut want = b"three ".to_vec();
        want.extend_from_slice(&large);
        want.extend_from_slice(b" four");
        assert_eq!(rest, want);
    }

    /// The held buffer grows with the batches, to at most one record's plaintext.
    #[tokio::test]
    async fn the_buffer_grows_as_batches_need_and_no_further() {
        let (near, _far) = tokio::io::duplex(1 << 20);
        let (mut gathered, _sender) = gather(near, Records::Whole);
        gathered.write_all(&[1u8; 1300]).await.unwrap();
        let small = lock(&gathered.0).bytes.capacity();
        assert!((1300..4096).contains(&small), "{small}");
        for _ in 0..11 {
            gathered.write_all(&[1u8; 1300]).await.unwrap();
        }
        let held = lock(&gathered.0);
        assert_eq!(held.unsent(), 12 * 1300);
        assert!(held.bytes.capacity() <= GATHER, "{}", held.bytes.capacity());
    }

    /// A stream that takes everything and records the size of every write.
    #[derive(Default)]
    struct Recorder {
        writes: Vec<usize>,
        bytes: Vec<u8>,
    }

    impl AsyncWrite for Recorder {
        fn poll_write(
            self: Pin<&mut Self>,
            cx: &mut Context<'_>,
            buf: &[u8],
        ) -> Poll<io::Result<usize>> {
            self.poll_write_vectored(cx, &[IoSlice::new(buf)])
        }

        fn poll_write_vectored(
            mut self: Pin<&mut Self>,
            _: &mut Context<'_>,
            bufs: &[IoSlice<'_>],
        ) -> Poll<io::Result<usize>> {
            let n: usize = bufs.iter().map(|b| b.len()).sum();
            self.writes.push(n);
            for b in bufs {
                self.bytes.extend_from_slice(b);
            }
            Poll::Ready(Ok(n))
        }

        fn is_write_vectored(&self) -> bool {
            true
        }

        fn poll_flush(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<io::Result<()>> {
            Poll::Ready(Ok(()))
        }

        fn poll_shutdown(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<io::Result<()>> {
            Poll::Ready(Ok(()))
        }
    }

    /// Frames of a 9-byte head and a 16 KiB payload, each one vectored write as `h2` makes
    /// them: the stream gets whole records (multiples of GATHER) while they are written, and
    /// the sender the tail; every byte arrives once, in order.
    #[tokio::test]
    async fn large_writes_reach_the_stream_in_whole_records() {
        let (mut gathered, sender) = gather(Recorder::default(), Records::Whole);
        let mut want = Vec::new();
        for frame in 0..7u8 {
            let head = [frame; 9];
            let payload = vec![frame.wrapping_add(100); GATHER];
            let mut bufs = [IoSlice::new(&head), IoSlice::new(&payload)];
            let mut bufs = &mut bufs[..];
            // As `write_all_vectored` would: until every byte is taken.
            while !bufs.is_empty() {
                let n = gathered.write_vectored(bufs).await.unwrap();
                assert!(n > 0);
                IoSlice::advance_slices(&mut bufs, n);
            }
            want.extend_from_slice(&head);
            want.extend_from_slice(&payload);
        }
        let before_send = lock(&gathered.0).io.writes.clone();
        assert_eq!(before_send.len(), 7, "{before_send:?}");
        assert!(
            before_send.iter().all(|w| w % GATHER == 0),
            "{before_send:?}"
        );
        std::future::poll_fn(|cx| sender.poll_send(cx)).await;
        let held = lock(&gathered.0);
        assert_eq!(held.io.writes.len(), 8);
        assert_eq!(held.io.writes[7], 7 * 9);
        assert_eq!(held.io.bytes, want);
    }

    /// HTTP/1.1's head, held, and its 100 KiB body: one write to the stream, the head first and
    /// the body's tail included (no record boundary to keep, nothing after it to join).
    #[tokio::test]
    async fn a_body_goes_whole_with_its_head_where_records_are_as_written() {
        let (mut gathered, sender) = gather(Recorder::default(), Records::AsWritten);
        let head = [b'h'; 250];
        let body = vec![b'b'; 100 << 10];
        gathered.write_all(&head).await.unwrap();
        gathered.write_all(&body).await.unwrap();
        std::future::poll_fn(|cx| sender.poll_send(cx)).await;
        let held = lock(&gathered.0);
        assert_eq!(held.io.writes, vec![head.len() + body.len()]);
        assert_eq!(held.io.bytes, [&head[..], &body[..]].concat());
    }

    /// With exactly one record held, a write that does not fit sends it and is held itself.
    #[tokio::test]
    async fn a_full_record_held_is_sent_before_the_next_write_is_held() {
        let (mut gathered, _sender) = gather(Recorder::default(), Records::Whole);
        gathered.write_all(&[1u8; GATHER]).await.unwrap();
        assert!(lock(&gathered.0).io.writes.is_empty());
        gathered.write_all(&[2u8; 100]).await.unwrap();
        let held = lock(&gathered.0);
        assert_eq!(held.io.writes, vec![GATHER]);
        assert_eq!(held.unsent(), 100);
    }

    /// A send that fails fails the connection's next write and flush too.
    #[tokio::test]
    async fn a_failed_send_fails_what_follows() {
        let (near, far) = tokio::io::duplex(64);
        drop(far);
        let (mut gathered, sender) = gather(near, Records::Whole);
        gathered.write_all(b"lost").await.unwrap();
        std::future::poll_fn(|cx| sender.poll_send(cx)).await;
        assert!(gathered.write_all(b"more").await.is_err());
        assert!(gathered.flush().await.is_err());
    }
}
