//! Retention: how many old checkpoints a thread keeps while it runs.

use std::time::{Duration, SystemTime};

use super::{CheckpointConfig, CheckpointError, Checkpointer};

/// Which checkpoints of a thread to keep; the run loop applies it after each checkpoint it saves.
///
/// - `keep_last: Some(n)`: keep the newest `n` checkpoints of each namespace (`Some(0)` counts as 1).
/// - `max_age: Some(t)`: drop checkpoints older than `t`. Ages are read from the root namespace's
///   checkpoint ids (UUID v7 carry their creation time; an id that is not a UUID v7 is never counted as
///   old) and turned into a count of checkpoints to keep, which then applies to every namespace as
///   `keep_last` does.
/// - Both: a checkpoint stays only if both rules keep it.
/// - Whatever the rules say, the newest checkpoint of each namespace stays: a thread that waits a week for
///   a human answer does not lose its state.
///
/// The default keeps everything.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct RetentionPolicy {
    /// Keep at most this many checkpoints per namespace.
    pub keep_last: Option<usize>,
    /// Drop checkpoints older than this.
    pub max_age: Option<Duration>,
}

impl RetentionPolicy {
    /// Keeps the newest `n` checkpoints of each namespace.
    pub fn keep_last(n: usize) -> Self {
        Self { keep_last: Some(n), max_age: None }
    }

    /// Drops checkpoints older than `age` (the newest one stays).
    pub fn max_age(age: Duration) -> Self {
        Self { keep_last: None, max_age: Some(age) }
    }

    /// Whether the policy keeps everything.
    pub fn keeps_all(&self) -> bool {
        self.keep_last.is_none() && self.max_age.is_none()
    }

    /// How many of `ids` (checkpoint ids of one namespace, newest first) the policy keeps at `now`, or
    /// `None` when it keeps them all.
    pub fn keep_count(&self, ids_newest_first: &[String], now: SystemTime) -> Option<usize> {
        let by_count = self.keep_last.map(|n| n.max(1));
        let by_age = self.max_age.map(|age| {
            let cutoff = now.checked_sub(age);
            let young = ids_newest_first
                .iter()
                .take_while(|id| match (cutoff, checkpoint_time(id)) {
                    (Some(cutoff), Some(made)) => made >= cutoff,
                    _ => true,
                })
                .count();
            young.max(1)
        });
        match (by_count, by_age) {
            (None, None) => None,
            (Some(n), None) | (None, Some(n)) => Some(n),
            (Some(a), Some(b)) => Some(a.min(b)),
        }
    }

    /// Prunes `thread_id` in `saver` as the policy says (nothing happens when it keeps everything).
    pub async fn apply(&self, saver: &dyn Checkpointer, thread_id: &str) -> Result<(), CheckpointError> {
        if self.keeps_all() {
            return Ok(());
        }
        let keep = if self.max_age.is_some() {
            let ids = saver.list_ids(&CheckpointConfig::thread(thread_id)).await?;
            self.keep_count(&ids, SystemTime::now())
        } else {
            self.keep_count(&[], SystemTime::now())
        };
        match keep {
            Some(n) => saver.prune(thread_id, n).await,
            None => Ok(()),
        }
    }
}

/// When a checkpoint was made, read from its UUID v7 id.
pub fn checkpoint_time(id: &str) -> Option<SystemTime> {
    let uuid = uuid::Uuid::parse_str(id).ok()?;
    if uuid.get_version_num() != 7 {
        return None;
    }
    let (secs, nanos) = uuid.get_timestamp()?.to_unix();
    SystemTime::UNIX_EPOCH.checked_add(Duration::new(secs, nanos))
}

#[cfg(test)]
mod tests {
    use uuid::{NoContext, Timestamp, Uuid};

    use super::*;

    fn id_at(t: SystemTime) -> String {
        let d = t.duration_since(SystemTime::UNIX_EPOCH).unwrap();
        Uuid::new_v7(Timestamp::from_unix(NoContext, d.as_secs(), d.subsec_nanos())).to_string()
    }

    fn ids_aged(now: SystemTime, ages_secs: &[u64]) -> Vec<String> {
        ages_secs.iter().map(|a| id_at(now - Duration::from_secs(*a))).collect()
    }

    #[test]
    fn default_policy_keeps_everything() {
        let now = SystemTime::now();
        assert!(RetentionPolicy::default().keeps_all());
        assert_eq!(RetentionPolicy::default().keep_count(&ids_aged(now, &[1, 2]), now), None);
    }

    #[test]
    fn keep_last_counts_checkpoints() {
        assert_eq!(RetentionPolicy::keep_last(3).keep_count(&[], SystemTime::now()), Some(3));
    }

    #[test]
    fn keep_last_zero_still_keeps_the_newest() {
        assert_eq!(RetentionPolicy::keep_last(0).keep_count(&[], SystemTime::now()), Some(1));
    }

    #[test]
    fn max_age_keeps_checkpoints_younger_than_the_limit() {
        let now = SystemTime::now();
        let ids = ids_aged(now, &[1, 10, 100, 1000]);
        let policy = RetentionPolicy::max_age(Duration::from_secs(60));
        assert_eq!(policy.keep_count(&ids, now), Some(2));
    }

    #[test]
    fn max_age_keeps_the_newest_checkpoint_however_old() {
        let now = SystemTime::now();
        let ids = ids_aged(now, &[5000, 6000]);
        assert_eq!(RetentionPolicy::max_age(Duration::from_secs(60)).keep_count(&ids, now), Some(1));
    }

    #[test]
    fn both_rules_keep_only_what_both_keep() {
        let now = SystemTime::now();
        let ids = ids_aged(now, &[1, 2, 3, 4, 500]);
        let policy = RetentionPolicy { keep_last: Some(2), max_age: Some(Duration::from_secs(60)) };
        assert_eq!(policy.keep_count(&ids, now), Some(2));
        let policy = RetentionPolicy { keep_last: Some(10), max_age: Some(Duration::from_secs(60)) };
        assert_eq!(policy.keep_count(&ids, now), Some(4));
    }

    #[test]
    fn ids_that_are_not_uuid_v7_never_count_as_old() {
        let now = SystemTime::now();
        let mut ids = vec!["not-a-uuid".to_owned(), Uuid::new_v4().to_string()];
        ids.extend(ids_aged(now, &[1000]));
        assert_eq!(RetentionPolicy::max_age(Duration::from_secs(60)).keep_count(&ids, now), Some(2));
    }

    #[test]
    fn checkpoint_time_reads_uuid_v7_timestamp() {
        let t = SystemTime::UNIX_EPOCH + Duration::from_millis(1_700_000_000_123);
        assert_eq!(checkpoint_time(&id_at(t)), Some(t));
        assert_eq!(checkpoint_time(&Uuid::new_v4().to_string()), None);
    }
}
