//! Channel versions in LangGraph's string format: `"{counter:032}.{tag:016}"`.
//!
//! The zero-padded counter makes versions sort as strings in counter order; the random tag keeps the
//! versions of two forks of one checkpoint apart, so a saver that stores values per `(channel, version)`
//! never mixes them up.

use super::{ChannelVersion, CheckpointError};

/// The counter of a version: the integer before the first `.` (or the whole string when it has no `.`,
/// as LangGraph's plain integer versions have). `None` when that part is not a non-negative integer.
pub fn version_counter(version: &str) -> Option<u64> {
    let counter = version.split('.').next().unwrap_or(version);
    if counter.is_empty() || !counter.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    counter.parse().ok()
}

/// The version that follows `current` (`None`: the first version, counter 1), with a fresh random tag;
/// an error naming the version when its counter cannot be read.
pub fn try_next_version(current: Option<&str>) -> Result<ChannelVersion, CheckpointError> {
    let counter = match current {
        None => 0,
        Some(v) => version_counter(v).ok_or_else(|| {
            CheckpointError::Invalid(format!("channel version '{v}' has no readable counter"))
        })?,
    };
    Ok(format_version(counter.saturating_add(1), rand::random::<f64>()).into())
}

/// The version that follows `current` (`None`: the first version, counter 1), with a fresh random tag.
///
/// Versions are made only by this function, so an unreadable `current` means corrupt data; it counts as
/// counter 0 here (the result is then version 1). Use [`try_next_version`] to reject it instead.
pub fn get_next_version(current: Option<&str>) -> ChannelVersion {
    let counter = current.and_then(version_counter).unwrap_or(0);
    format_version(counter.saturating_add(1), rand::random::<f64>()).into()
}

/// The version that follows `current` in the engine's form, `"{counter:032}.{tag:016}"` with a random
/// 16-digit integer tag (`None`, or a version whose counter cannot be read: counter 1): the default of
/// [`Checkpointer::get_next_version`](super::Checkpointer::get_next_version).
pub fn default_next_version(current: Option<&str>) -> ChannelVersion {
    let counter = current.and_then(version_counter).unwrap_or(0);
    crate::checkpoint::stamp::version_shared(counter.saturating_add(1), rand::random::<u64>() >> 12)
}

fn format_version(counter: u64, tag: f64) -> String {
    format!("{counter:032}.{tag:016}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn first_version_has_counter_one_padded_to_32_digits() {
        let v = get_next_version(None);
        assert_eq!(version_counter(&v), Some(1));
        assert_eq!(v.split('.').next().map(str::len), Some(32));
        assert!(v.starts_with("00000000000000000000000000000001."));
    }

    #[test]
    fn next_version_increments_counter_of_langgraph_string() {
        let v = get_next_version(Some("00000000000000000000000000000004.0.17838869576699468"));
        assert_eq!(version_counter(&v), Some(5));
    }

    #[test]
    fn next_version_accepts_plain_integer_versions() {
        assert_eq!(version_counter(&get_next_version(Some("41"))), Some(42));
    }

    #[test]
    fn versions_sort_as_strings_in_counter_order() {
        let mut v = get_next_version(None);
        for _ in 0..12 {
            let next = get_next_version(Some(&v));
            assert!(next > v, "{next} should sort after {v}");
            v = next;
        }
    }

    #[test]
    fn tag_is_formatted_like_python_float_padded_to_16() {
        assert_eq!(format_version(3, 0.5), "00000000000000000000000000000003.00000000000000.5");
    }

    #[test]
    fn counter_parser_rejects_non_numeric_prefix() {
        assert_eq!(version_counter("abc.1"), None);
        assert_eq!(version_counter(""), None);
        assert_eq!(version_counter("-3.2"), None);
    }

    #[test]
    fn try_next_version_names_unreadable_version() {
        let err = try_next_version(Some("zz.1")).unwrap_err();
        assert!(err.to_string().contains("'zz.1'"), "{err}");
    }

    #[test]
    fn default_next_version_has_the_engines_integer_tag() {
        let v = default_next_version(Some("00000000000000000000000000000004.0000000000000001"));
        assert_eq!(version_counter(&v), Some(5));
        let (counter, tag) = v.split_once('.').unwrap();
        assert_eq!((counter.len(), tag.len()), (32, 16));
        assert!(tag.bytes().all(|b| b.is_ascii_digit()), "{v}");
        assert_eq!(version_counter(&default_next_version(None)), Some(1));
        assert_eq!(version_counter(&default_next_version(Some("7"))), Some(8));
    }

    #[test]
    fn get_next_version_restarts_at_one_for_unreadable_counter() {
        assert_eq!(version_counter(&get_next_version(Some("zz"))), Some(1));
    }
}
