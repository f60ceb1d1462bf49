//! A bound on how far a producer runs ahead of its consumer: the producer counts what it queues, the
//! consumer what it takes, and the producer waits for room before it makes more.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

use tokio::sync::Notify;

/// The shared count of a queue's units (items or bytes) that a producer has sent and its consumer has not
/// yet taken. Sending never fails and never waits: a producer calls [`ready`](QueueGate::ready) at its
/// await points, which waits while `limit` units are queued, so a queue holds at most `limit` plus what
/// one producer sends between two such points. Cheap to clone; clones share the count.
#[derive(Debug, Clone)]
pub struct QueueGate {
    inner: Arc<Inner>,
}

#[derive(Debug)]
struct Inner {
    queued: AtomicUsize,
    limit: usize,
    /// The consumer left: nobody will take anything again, so nobody waits.
    closed: AtomicBool,
    room: Notify,
}

impl QueueGate {
    /// A gate that makes producers wait while `limit` units (at least one) are queued.
    pub fn new(limit: usize) -> Self {
        let inner = Inner {
            queued: AtomicUsize::new(0),
            limit: limit.max(1),
            closed: AtomicBool::new(false),
            room: Notify::new(),
        };
        Self { inner: Arc::new(inner) }
    }

    /// Counts `units` a producer queued.
    pub fn add(&self, units: usize) {
        self.inner.queued.fetch_add(units, Ordering::AcqRel);
    }

    /// Counts `units` the consumer took; producers waiting are woken once the queue is down to half its
    /// limit (not at every item, so that a producer and its consumer do not take turns item by item).
    pub fn take(&self, units: usize) {
        let before = self.inner.queued.fetch_sub(units, Ordering::AcqRel);
        let low = self.inner.limit / 2;
        if before > low && before.saturating_sub(units) <= low {
            self.inner.room.notify_waiters();
        }
    }

    /// The consumer left: producers no longer wait.
    pub fn close(&self) {
        self.inner.closed.store(true, Ordering::Release);
        self.inner.room.notify_waiters();
    }

    /// The units queued now.
    pub fn queued(&self) -> usize {
        self.inner.queued.load(Ordering::Acquire)
    }

    /// The most units queued before producers wait.
    pub fn limit(&self) -> usize {
        self.inner.limit
    }

    /// Waits while the queue is full and its consumer is still there; at once otherwise.
    pub async fn ready(&self) {
        loop {
            // Made before the check: a wake-up between the check and the wait is not lost.
            let room = self.inner.room.notified();
            if self.inner.closed.load(Ordering::Acquire) || self.queued() < self.inner.limit {
                return;
            }
            room.await;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[tokio::test]
    async fn a_full_queue_holds_its_producer_until_the_consumer_takes_half() {
        let gate = QueueGate::new(4);
        gate.add(4);
        let producer = gate.clone();
        let waiting = tokio::spawn(async move { producer.ready().await });
        tokio::time::sleep(Duration::from_millis(20)).await;
        assert!(!waiting.is_finished(), "full: the producer waits");
        gate.take(1);
        tokio::time::sleep(Duration::from_millis(20)).await;
        assert!(!waiting.is_finished(), "three queued: still above half");
        gate.take(1);
        tokio::time::timeout(Duration::from_secs(5), waiting).await.unwrap().unwrap();
        assert_eq!(gate.queued(), 2);
    }

    #[tokio::test]
    async fn a_consumer_that_left_holds_nobody() {
        let gate = QueueGate::new(1);
        gate.add(3);
        let producer = gate.clone();
        let waiting = tokio::spawn(async move { producer.ready().await });
        tokio::time::sleep(Duration::from_millis(20)).await;
        assert!(!waiting.is_finished());
        gate.close();
        tokio::time::timeout(Duration::from_secs(5), waiting).await.unwrap().unwrap();
        gate.ready().await;
    }
}
