//! A stream that owns the runnable it streams from (a runnable built for one call).

use futures::StreamExt as _;
use futures::stream::{self, BoxStream};

use crate::error::Result;

/// Streams the chunks that `make` draws from `owner`, keeping `owner` alive inside the returned stream.
///
/// `make`'s stream borrows `owner`, so it cannot be returned next to it; instead a driver future owns
/// both and hands chunks over a one-slot channel, and the returned stream polls the driver and the
/// channel together. Dropping the returned stream drops the driver, `owner` and `make`'s stream.
/// (`owner` is lent mutably so that it can also carry values `make` moves out, such as an input stream.)
pub(crate) fn stream_owned<'a, R, T, F>(owner: R, make: F) -> BoxStream<'a, Result<T>>
where
    R: Send + 'a,
    T: Send + 'a,
    F: for<'r> FnOnce(&'r mut R) -> BoxStream<'r, Result<T>> + Send + 'a,
{
    let (sender, mut receiver) = tokio::sync::mpsc::channel(1);
    let driver = async move {
        let mut owner = owner;
        let mut chunks = make(&mut owner);
        while let Some(chunk) = chunks.next().await {
            if sender.send(chunk).await.is_err() {
                break;
            }
        }
    };
    let received = stream::poll_fn(move |cx| receiver.poll_recv(cx)).map(Some);
    // The driver yields `None` when done; the channel then closes once its last chunk is received.
    let done = stream::once(driver).map(|()| None);
    stream::select(received, done).filter_map(std::future::ready).boxed()
}
