//! What the tier's two HTTP servers (the gateway and the emulator) share: the accept loop and
//! percent-decoding of request paths.

use std::future::Future;
use std::time::Duration;

use tokio::net::{TcpListener, TcpStream};

/// Accepts connections on `listener` until `shutdown`, handing each (with `TCP_NODELAY`) to
/// `serve`, which spawns what serves it. An accept error (out of file descriptors and the
/// like) backs off for 10 ms instead of spinning.
pub(crate) async fn accept_loop(
    listener: TcpListener,
    shutdown: impl Future<Output = ()>,
    mut serve: impl FnMut(TcpStream),
) {
    tokio::pin!(shutdown);
    loop {
        let (stream, _) = tokio::select! {
            _ = &mut shutdown => return,
            r = listener.accept() => match r {
                Ok(c) => c,
                Err(_) => {
                    tokio::time::sleep(Duration::from_millis(10)).await;
                    continue;
                }
            },
        };
        let _ = stream.set_nodelay(true);
        serve(stream);
    }
}

/// `s` with its `%XX` escapes decoded; `None` for a bad escape or bytes that are not UTF-8.
pub(crate) fn percent_decode(s: &str) -> Option<String> {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'%' {
            let hex = std::str::from_utf8(b.get(i + 1..i + 3)?).ok()?;
            out.push(u8::from_str_radix(hex, 16).ok()?);
            i += 3;
        } else {
            out.push(b[i]);
            i += 1;
        }
    }
    String::from_utf8(out).ok()
}
