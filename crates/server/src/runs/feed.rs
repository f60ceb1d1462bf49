//! A listener's queue with a byte cap. The publisher never waits on it: an item that would take a
//! listener's backlog past its cap cuts the listener instead (it gets what was queued before, then
//! learns it was cut), so a client that does not read costs at most the cap, and the run goes on at its
//! own pace. A cut stream ends in error, so that the client reconnects with `Last-Event-ID` and replays
//! what the run keeps.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex, PoisonError};

use tokio::sync::Notify;

use super::channel::Event;

/// How many bytes of events one listener may have waiting for its client (more cuts it). One item is
/// always taken when nothing waits, whatever its size.
pub(crate) const LISTENER_BYTES: usize = 256 * 1024;

/// What an item weighs in a listener's backlog.
pub(crate) trait Weigh {
    /// About the bytes the item holds (and will take on the wire).
    fn weight(&self) -> usize;
}

impl Weigh for Arc<Event> {
    fn weight(&self) -> usize {
        self.id.len() + self.name.len() + self.data.len() + 32
    }
}

#[derive(Debug)]
struct Queue<T> {
    items: VecDeque<T>,
    bytes: usize,
    cap: usize,
    /// How many senders there are; none left: what is queued is all there is.
    senders: usize,
    /// The listener fell behind and was cut.
    cut: bool,
    /// The receiver is gone.
    left: bool,
}

#[derive(Debug)]
struct Shared<T> {
    queue: Mutex<Queue<T>>,
    ready: Notify,
}

impl<T> Shared<T> {
    fn lock(&self) -> std::sync::MutexGuard<'_, Queue<T>> {
        self.queue.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// The publishing end.
#[derive(Debug)]
pub(crate) struct Sender<T> {
    shared: Arc<Shared<T>>,
}

/// The listening end.
#[derive(Debug)]
pub(crate) struct Receiver<T> {
    shared: Arc<Shared<T>>,
}

/// Why nothing was received.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Empty {
    /// Nothing yet.
    Waiting,
    /// Nothing more: the sender is gone (or the listener was cut: see [`Receiver::was_cut`]).
    Ended,
}

/// A listener's queue holding at most `cap` bytes of backlog.
pub(crate) fn channel<T>(cap: usize) -> (Sender<T>, Receiver<T>) {
    let shared = Arc::new(Shared {
        queue: Mutex::new(Queue {
            items: VecDeque::new(),
            bytes: 0,
            cap,
            senders: 1,
            cut: false,
            left: false,
        }),
        ready: Notify::new(),
    });
    (Sender { shared: Arc::clone(&shared) }, Receiver { shared })
}

impl<T: Weigh> Sender<T> {
    /// Queues `item`; false when the listener is gone or has just been cut (forget it then).
    pub(crate) fn send(&self, item: T) -> bool {
        let mut queue = self.shared.lock();
        if queue.left || queue.cut {
            return false;
        }
        let weight = item.weight();
        if !queue.items.is_empty() && queue.bytes.saturating_add(weight) > queue.cap {
            queue.cut = true;
            drop(queue);
            self.shared.ready.notify_one();
            return false;
        }
        queue.bytes += weight;
        queue.items.push_back(item);
        drop(queue);
        self.shared.ready.notify_one();
        true
    }
}

impl<T> Sender<T> {
    /// Whether the listener is gone.
    pub(crate) fn is_closed(&self) -> bool {
        let queue = self.shared.lock();
        queue.left || queue.cut
    }
}

impl<T> Clone for Sender<T> {
    fn clone(&self) -> Self {
        self.shared.lock().senders += 1;
        Self { shared: Arc::clone(&self.shared) }
    }
}

impl<T> Drop for Sender<T> {
    fn drop(&mut self) {
        let mut queue = self.shared.lock();
        queue.senders = queue.senders.saturating_sub(1);
        drop(queue);
        self.shared.ready.notify_one();
    }
}

impl<T: Weigh> Receiver<T> {
    /// The next item at once, or why there is none.
    pub(crate) fn try_recv(&mut self) -> Result<T, Empty> {
        let mut queue = self.shared.lock();
        match queue.items.pop_front() {
            Some(item) => {
                queue.bytes = queue.bytes.saturating_sub(item.weight());
                Ok(item)
            }
            None if queue.senders == 0 || queue.cut => Err(Empty::Ended),
            None => Err(Empty::Waiting),
        }
    }

    /// The next item, waiting for it; `None` once there are no more.
    pub(crate) async fn recv(&mut self) -> Option<T> {
        let shared = Arc::clone(&self.shared);
        loop {
            let notified = shared.ready.notified();
            match self.try_recv() {
                Ok(item) => return Some(item),
                Err(Empty::Ended) => return None,
                Err(Empty::Waiting) => notified.await,
            }
        }
    }
}

impl<T> Receiver<T> {
    /// Whether the listener was cut for falling behind (its stream must end in error, to be resumed).
    pub(crate) fn was_cut(&self) -> bool {
        self.shared.lock().cut
    }

    /// Stops listening: the sender sees the listener gone.
    pub(crate) fn close(&mut self) {
        self.shared.lock().left = true;
    }
}

impl<T> Drop for Receiver<T> {
    fn drop(&mut self) {
        let mut queue = self.shared.lock();
        queue.left = true;
        // What was queued goes now, not with the sender.
        queue.items.clear();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn event(bytes: usize) -> Arc<Event> {
        Arc::new(Event { id: String::new(), name: String::new(), data: "x".repeat(bytes - 32) })
    }

    #[tokio::test]
    async fn a_listener_that_falls_behind_is_cut_after_what_it_was_given() {
        let (tx, mut rx) = channel(100);
        assert!(tx.send(event(40)));
        assert!(tx.send(event(40)));
        assert!(!tx.send(event(40)), "past the cap: cut");
        assert!(tx.is_closed());
        assert!(!tx.send(event(40)), "a cut listener takes nothing more");
        assert_eq!(rx.recv().await.map(|e| e.weight()), Some(40));
        assert_eq!(rx.recv().await.map(|e| e.weight()), Some(40));
        assert!(rx.recv().await.is_none());
        assert!(rx.was_cut());
    }

    #[tokio::test]
    async fn a_reader_keeps_up_whatever_the_total_and_one_item_always_fits() {
        let (tx, mut rx) = channel(100);
        for _ in 0..1000 {
            assert!(tx.send(event(60)));
            assert!(rx.recv().await.is_some());
        }
        assert!(tx.send(event(1000)), "an item larger than the cap goes alone");
        assert_eq!(rx.try_recv().map(|e| e.weight()), Ok(1000));
        assert_eq!(rx.try_recv().err(), Some(Empty::Waiting));
        let other = tx.clone();
        drop(tx);
        assert_eq!(rx.try_recv().err(), Some(Empty::Waiting), "a sender is left");
        drop(other);
        assert!(rx.recv().await.is_none());
        assert!(!rx.was_cut(), "an ended sender is no cut");
    }

    #[tokio::test]
    async fn a_receiver_that_left_is_seen_and_a_waiting_one_wakes() {
        let (tx, mut rx) = channel::<Arc<Event>>(100);
        let waiting = tokio::spawn(async move { rx.recv().await.map(|e| e.weight()) });
        tokio::task::yield_now().await;
        assert!(tx.send(event(50)));
        assert_eq!(waiting.await.unwrap(), Some(50));
        let (tx, rx) = channel::<Arc<Event>>(100);
        drop(rx);
        assert!(tx.is_closed());
        assert!(!tx.send(event(50)));
    }
}
