//! How the peer client reaches a peer: a TCP connection, and over it a TLS handshake when the
//! cluster runs mutual TLS ([`crate::mtls::PeerTls`]). The peer's certificate must be the
//! cluster CA's and name the IP address connected to; the client presents its process's
//! certificate. A handshake that fails is the request's error (the peer refused the
//! certificate, or presented one the CA did not sign), with rustls's reason in its message.

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};

use hyper::rt::{Read, ReadBufCursor, Write};
use hyper::Uri;
use hyper_util::client::legacy::connect::{Connected, Connection, HttpConnector};
use hyper_util::rt::TokioIo;
use rustls::pki_types::ServerName;
use tokio::net::TcpStream;
use tokio_rustls::client::TlsStream;

use crate::mtls::PeerTls;

type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// The peer client's connector: TCP (`tcp`'s settings), then TLS when `tls` is given.
#[derive(Clone)]
pub struct PeerConnector {
    pub(crate) tcp: HttpConnector,
    pub(crate) tls: Option<PeerTls>,
}

/// A connection to a peer: plain or TLS.
pub enum PeerStream {
    Plain(TokioIo<TcpStream>),
    Tls(Box<TokioIo<TlsStream<TcpStream>>>),
}

impl tower_service::Service<Uri> for PeerConnector {
    type Response = PeerStream;
    type Error = BoxError;
    type Future = Pin<Box<dyn Future<Output = Result<PeerStream, BoxError>> + Send>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), BoxError>> {
        self.tcp.poll_ready(cx).map_err(Into::into)
    }

    fn call(&mut self, uri: Uri) -> Self::Future {
        let host = uri.host().map(|h| h.trim_matches(['[', ']']).to_string());
        let tcp = self.tcp.call(uri);
        // The connector of now: a reloaded certificate serves the next connection.
        let tls = self.tls.as_ref().map(PeerTls::connector);
        Box::pin(async move {
            let tcp = tcp.await?;
            let Some(tls) = tls else {
                return Ok(PeerStream::Plain(tcp));
            };
            // Peers are addressed by IP: the certificate must name that address.
            let ip: std::net::IpAddr = host
                .as_deref()
                .and_then(|h| h.parse().ok())
                .ok_or("a peer is addressed by its IP address")?;
            let stream = tls
                .connect(ServerName::IpAddress(ip.into()), tcp.into_inner())
                .await?;
            Ok(PeerStream::Tls(Box::new(TokioIo::new(stream))))
        })
    }
}

impl Connection for PeerStream {
    fn connected(&self) -> Connected {
        match self {
            PeerStream::Plain(s) => s.connected(),
            PeerStream::Tls(s) => s.inner().get_ref().0.connected(),
        }
    }
}

impl Read for PeerStream {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: ReadBufCursor<'_>,
    ) -> Poll<std::io::Result<()>> {
        match self.get_mut() {
            PeerStream::Plain(s) => Pin::new(s).poll_read(cx, buf),
            PeerStream::Tls(s) => Pin::new(s.as_mut()).poll_read(cx, buf),
        }
    }
}

impl Write for PeerStream {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<std::io::Result<usize>> {
        match self.get_mut() {
            PeerStream::Plain(s) => Pin::new(s).poll_write(cx, buf),
            PeerStream::Tls(s) => Pin::new(s.as_mut()).poll_write(cx, buf),
        }
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[std::io::IoSlice<'_>],
    ) -> Poll<std::io::Result<usize>> {
        match self.get_mut() {
            PeerStream::Plain(s) => Pin::new(s).poll_write_vectored(cx, bufs),
            PeerStream::Tls(s) => Pin::new(s.as_mut()).poll_write_vectored(cx, bufs),
        }
    }

    fn is_write_vectored(&self) -> bool {
        match self {
            PeerStream::Plain(s) => s.is_write_vectored(),
            PeerStream::Tls(s) => s.is_write_vectored(),
        }
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        match self.get_mut() {
            PeerStream::Plain(s) => Pin::new(s).poll_flush(cx),
            PeerStream::Tls(s) => Pin::new(s.as_mut()).poll_flush(cx),
        }
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        match self.get_mut() {
            PeerStream::Plain(s) => Pin::new(s).poll_shutdown(cx),
            PeerStream::Tls(s) => Pin::new(s.as_mut()).poll_shutdown(cx),
        }
    }
}
