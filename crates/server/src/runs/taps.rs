//! Thread taps: who listens to a whole thread (`GET /threads/{thread_id}/stream`). A listener is told of
//! every run made on its thread with a subscription to the run's channel, made while the run is saved
//! and before any worker can start it (so it sees all of the run), and of the thread's own events
//! (`state_update`).

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};

use super::channel::{Event, RunChannel, Subscription};
use super::feed::{self, Weigh};

/// What a thread's listener is told.
#[derive(Debug)]
pub(crate) enum ThreadItem {
    /// A run was made on the thread: its events from the first.
    Run { run_id: String, subscription: Subscription },
    /// An event of the thread itself.
    Event(Arc<Event>),
}

impl Weigh for ThreadItem {
    fn weight(&self) -> usize {
        match self {
            // The run's events weigh in its own subscription.
            ThreadItem::Run { run_id, .. } => run_id.len() + 64,
            ThreadItem::Event(event) => event.weight(),
        }
    }
}

/// The listeners of every thread that has some.
#[derive(Debug, Default)]
pub(crate) struct ThreadTaps {
    by_thread: Mutex<HashMap<String, Vec<feed::Sender<ThreadItem>>>>,
}

impl ThreadTaps {
    /// Listens to the thread from now on.
    #[cfg(test)]
    fn listen(&self, thread_id: &str) -> feed::Receiver<ThreadItem> {
        let (tx, rx) = feed::channel(feed::LISTENER_BYTES);
        self.listen_with(thread_id, tx);
        rx
    }

    /// Listens to the thread from now on, through `tx`.
    pub(crate) fn listen_with(&self, thread_id: &str, tx: feed::Sender<ThreadItem>) {
        self.by_thread
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .entry(thread_id.to_owned())
            .or_default()
            .push(tx);
    }

    /// Sends to each listener of the thread what `item` makes for it, forgetting those that left.
    fn send(&self, thread_id: &str, item: impl Fn() -> ThreadItem) {
        let mut map = self.by_thread.lock().unwrap_or_else(PoisonError::into_inner);
        let Some(listeners) = map.get_mut(thread_id) else { return };
        listeners.retain(|tx| tx.send(item()));
        if listeners.is_empty() {
            map.remove(thread_id);
        }
    }

    /// A run was made on the thread: each listener subscribes to its channel.
    pub(crate) fn run_made(&self, thread_id: &str, run_id: &str, channel: &RunChannel) {
        self.send(thread_id, || ThreadItem::Run {
            run_id: run_id.to_owned(),
            subscription: channel.subscribe(None),
        });
    }

    /// An event of the thread itself (its id made from the time, as a run's are).
    pub(crate) fn publish(&self, thread_id: &str, name: &str, data: String) {
        let event = Arc::new(Event { id: super::channel::id_now(), name: name.to_owned(), data });
        self.send(thread_id, || ThreadItem::Event(Arc::clone(&event)));
    }

    /// Forgets the thread's listeners that left (a thread stream that ends calls it).
    pub(crate) fn prune(&self, thread_id: &str) {
        let mut map = self.by_thread.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(listeners) = map.get_mut(thread_id) {
            listeners.retain(|tx| !tx.is_closed());
            if listeners.is_empty() {
                map.remove(thread_id);
            }
        }
    }

    /// Whether the thread has listeners.
    pub(crate) fn is_heard(&self, thread_id: &str) -> bool {
        self.by_thread
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .get(thread_id)
            .is_some_and(|l| l.iter().any(|tx| !tx.is_closed()))
    }

    /// How many threads have listeners (for tests).
    #[cfg(test)]
    fn threads(&self) -> usize {
        self.by_thread.lock().unwrap_or_else(PoisonError::into_inner).len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn listeners_get_the_runs_of_their_thread_from_the_first_event() {
        let taps = ThreadTaps::default();
        let mut mine = taps.listen("t1");
        let mut other = taps.listen("t2");
        let channel = RunChannel::new(false);
        taps.run_made("t1", "r1", &channel);
        channel.publish("metadata", "{}".into());
        let Some(ThreadItem::Run { run_id, mut subscription }) = mine.recv().await else { panic!("a run") };
        assert_eq!(run_id, "r1");
        let live = subscription.live.as_mut().expect("live");
        assert_eq!(live.recv().await.map(|e| e.name.clone()), Some("metadata".to_owned()));
        taps.publish("t2", "state_update", "{}".into());
        assert!(matches!(other.recv().await, Some(ThreadItem::Event(e)) if e.name == "state_update"));
        assert!(mine.try_recv().is_err(), "t2's event is not t1's");
    }

    #[test]
    fn listeners_that_left_are_forgotten() {
        let taps = ThreadTaps::default();
        drop(taps.listen("t1"));
        assert_eq!(taps.threads(), 1);
        assert!(!taps.is_heard("t1"));
        taps.publish("t1", "state_update", "{}".into());
        assert_eq!(taps.threads(), 0);
        let kept = taps.listen("t2");
        drop(taps.listen("t2"));
        taps.prune("t2");
        assert!(taps.is_heard("t2"), "the listener still there stays");
        drop(kept);
        taps.prune("t2");
        assert_eq!(taps.threads(), 0);
    }
}
