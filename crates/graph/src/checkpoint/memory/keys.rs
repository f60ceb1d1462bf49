//! Compact forms of what every checkpoint repeats: channel and node names (interned per namespace) and
//! channel versions (two integers when they have the engine's fixed-width form).

use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};
use std::sync::Arc;

use crate::checkpoint::stamp::{counter_string, version_string};

/// How many names `intern_shared` compares by pointer before hashing.
const SCAN: usize = 16;

/// Width of the zero-padded counter of a version.
const COUNTER_DIGITS: usize = 32;
/// Width of the zero-padded tag after the `.`.
const TAG_DIGITS: usize = 16;

/// A channel version as stored: the engine's `"{counter:032}.{tag:016}"` and `"{counter:032}"` forms as
/// integers (no allocation, integer comparison), anything else as its text. [`Ver::render`] gives back
/// exactly the string it was parsed from.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub(super) enum Ver {
    /// `"{counter:032}"`.
    Counter(u64),
    /// `"{counter:032}.{tag:016}"`.
    Tagged(u64, u64),
    /// Any other string.
    Text(Box<str>),
}

impl Ver {
    pub(super) fn parse(text: &str) -> Self {
        let bytes = text.as_bytes();
        let fixed = |digits: &[u8], width: usize| -> Option<u64> {
            if digits.len() != width || !digits.iter().all(u8::is_ascii_digit) {
                return None;
            }
            // At most 20 significant digits fit a u64; the rest must be zeros.
            let (zeros, rest) = digits.split_at(width.saturating_sub(20));
            if zeros.iter().any(|d| *d != b'0') {
                return None;
            }
            let mut n: u64 = 0;
            for d in rest {
                n = n.checked_mul(10)?.checked_add(u64::from(d - b'0'))?;
            }
            Some(n)
        };
        let parsed = match bytes.len() {
            COUNTER_DIGITS => fixed(bytes, COUNTER_DIGITS).map(Ver::Counter),
            len if len == COUNTER_DIGITS + 1 + TAG_DIGITS && bytes[COUNTER_DIGITS] == b'.' => {
                match (
                    fixed(&bytes[..COUNTER_DIGITS], COUNTER_DIGITS),
                    fixed(&bytes[COUNTER_DIGITS + 1..], TAG_DIGITS),
                ) {
                    (Some(counter), Some(tag)) => Some(Ver::Tagged(counter, tag)),
                    _ => None,
                }
            }
            _ => None,
        };
        parsed.unwrap_or_else(|| Ver::Text(text.into()))
    }

    /// The version string.
    pub(super) fn render(&self) -> String {
        match self {
            Ver::Counter(counter) => counter_string(*counter),
            // A parsed tag has 16 digits, so the engine's formatting gives it back unchanged.
            Ver::Tagged(counter, tag) => version_string(*counter, *tag),
            Ver::Text(text) => text.to_string(),
        }
    }

    /// The version's counter (see [`version_counter`](crate::checkpoint::version_counter)).
    pub(super) fn counter(&self) -> Option<u64> {
        match self {
            Ver::Counter(counter) | Ver::Tagged(counter, _) => Some(*counter),
            Ver::Text(text) => crate::checkpoint::version_counter(text),
        }
    }
}

/// FNV-1a: names are short and chosen by the graph's author, not by an adversary over a network.
struct Fnv(u64);

impl Default for Fnv {
    fn default() -> Self {
        Fnv(0xcbf2_9ce4_8422_2325)
    }
}

impl Hasher for Fnv {
    fn finish(&self) -> u64 {
        self.0
    }

    fn write(&mut self, bytes: &[u8]) {
        let mut h = self.0;
        for b in bytes {
            h ^= u64::from(*b);
            h = h.wrapping_mul(0x0100_0000_01b3);
        }
        self.0 = h;
    }
}

/// A map with the FNV hasher.
type FnvMap<K, V> = HashMap<K, V, BuildHasherDefault<Fnv>>;

/// The channel and node names of one namespace, each stored once and referred to by index.
#[derive(Debug, Default, Clone)]
pub(super) struct Names {
    names: Vec<Arc<str>>,
    index: FnvMap<Arc<str>, u32>,
}

impl Names {
    /// The index of `name`, added if new.
    pub(super) fn intern(&mut self, name: &str) -> u32 {
        if let Some(&i) = self.index.get(name) {
            return i;
        }
        let i = u32::try_from(self.names.len()).unwrap_or(u32::MAX);
        let name: Arc<str> = Arc::from(name);
        self.names.push(Arc::clone(&name));
        self.index.insert(name, i);
        i
    }

    /// As [`intern`](Self::intern), recognising a name shared with an earlier call by its pointer first
    /// (a run passes the same shared names in every save), and keeping the shared name when new.
    pub(super) fn intern_shared(&mut self, name: &Arc<str>) -> u32 {
        if let Some(i) = self.names.iter().take(SCAN).position(|n| Arc::ptr_eq(n, name)) {
            return i as u32;
        }
        if let Some(&i) = self.index.get(&**name) {
            return i;
        }
        let i = u32::try_from(self.names.len()).unwrap_or(u32::MAX);
        self.names.push(Arc::clone(name));
        self.index.insert(Arc::clone(name), i);
        i
    }

    /// The index of `name`, if it was ever added.
    pub(super) fn find(&self, name: &str) -> Option<u32> {
        self.index.get(name).copied()
    }

    /// The name at `index` (empty for an index never handed out, which cannot happen).
    pub(super) fn name(&self, index: u32) -> &str {
        self.names.get(index as usize).map_or("", |n| n)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn versions_render_as_they_were_given() {
        for text in [
            "00000000000000000000000000000001.0000000000000042",
            "00000000000000000000000000000007",
            "00000000000000000018446744073709551615.1",
            "00000000000000000000000000000003.00000000000000.5",
            "41",
            "",
            "1.5",
            "0000000000000099999999999999999999",
            "00000000000000000000000000000001.000000000000004x",
        ] {
            assert_eq!(Ver::parse(text).render(), text, "{text}");
        }
        assert_eq!(Ver::parse("00000000000000000000000000000012.0000000000000042"), Ver::Tagged(12, 42));
        assert_eq!(Ver::parse("00000000000000000000000000000012"), Ver::Counter(12));
        // Over u64: kept as text.
        assert!(matches!(Ver::parse("00000000000099999999999999999999"), Ver::Text(_)));
        assert_eq!(Ver::parse("00000000000000000000000000000005.0000000000000001").counter(), Some(5));
        assert_eq!(Ver::parse("41").counter(), Some(41));
        assert_eq!(Ver::parse("x").counter(), None);
    }

    #[test]
    fn names_are_interned_once() {
        let mut names = Names::default();
        let a = names.intern("messages");
        let b = names.intern("count");
        assert_eq!(names.intern("messages"), a);
        assert_ne!(a, b);
        assert_eq!(names.name(b), "count");
        assert_eq!(names.find("count"), Some(b));
        assert_eq!(names.find("other"), None);
    }
}
