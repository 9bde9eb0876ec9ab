//! A coordinator task's future with its panics caught ([`catch_panic`]): an etcd-mode term that
//! panics (a bug) ends as an error the campaign loop logs and recovers from, instead of
//! ending the task, and with it the coordinator's campaigns, silently.

use std::any::Any;
use std::future::Future;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::task::Poll;

/// Runs `fut` to its end; a panic in any of its polls becomes `Err` with the panic's message
/// (the future is dropped then).
pub(super) async fn catch_panic<F: Future>(fut: F) -> Result<F::Output, String> {
    let mut fut = Box::pin(fut);
    std::future::poll_fn(
        move |cx| match catch_unwind(AssertUnwindSafe(|| fut.as_mut().poll(cx))) {
            Ok(Poll::Ready(v)) => Poll::Ready(Ok(v)),
            Ok(Poll::Pending) => Poll::Pending,
            Err(payload) => Poll::Ready(Err(message(payload.as_ref()))),
        },
    )
    .await
}

/// A panic's message, when it has one.
fn message(payload: &(dyn Any + Send)) -> String {
    payload
        .downcast_ref::<String>()
        .cloned()
        .or_else(|| payload.downcast_ref::<&str>().map(|s| s.to_string()))
        .unwrap_or_else(|| "a panic without a message".into())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A future that panics after it has waited is caught with its message; one that ends
    /// normally gives its value.
    #[tokio::test]
    async fn a_panic_after_an_await_is_an_error_with_its_message() {
        let panics = async {
            tokio::task::yield_now().await;
            let n: usize = "7".parse().unwrap();
            if n == 7 {
                panic!("term {n} broke");
            }
            n
        };
        assert_eq!(catch_panic(panics).await, Err("term 7 broke".to_string()));
        let fine = async {
            tokio::task::yield_now().await;
            41 + 1
        };
        assert_eq!(catch_panic(fine).await, Ok(42));
    }
}
