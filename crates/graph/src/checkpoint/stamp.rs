//! Stamps of a checkpoint: its id, its time, and channel versions as strings.

use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// A version as a checkpoint stores it: `"{version:032}.{tag % 10^16:016}"`.
pub(crate) fn version_string(version: u64, tag: u64) -> String {
    Digits::version(version, tag).as_str().to_owned()
}

/// The same, shared (made in one allocation).
pub(crate) fn version_shared(version: u64, tag: u64) -> Arc<str> {
    Arc::from(Digits::version(version, tag).as_str())
}

/// A version counter as `versions_seen` stores it: `"{counter:032}"`.
pub(crate) fn counter_string(counter: u64) -> String {
    Digits::counter(counter).as_str().to_owned()
}

/// The same, shared (made in one allocation).
pub(crate) fn counter_shared(counter: u64) -> Arc<str> {
    Arc::from(Digits::counter(counter).as_str())
}

/// The two-digit numbers 00 to 99, back to back.
const PAIRS: &[u8; 200] = b"0001020304050607080910111213141516171819\
2021222324252627282930313233343536373839\
4041424344454647484950515253545556575859\
6061626364656667686970717273747576777879\
8081828384858687888990919293949596979899";

/// Decimal numbers padded with zeros, written on the stack (as `{n:0width$}` would, without the
/// formatting machinery or a heap buffer: this runs several times per checkpoint).
struct Digits {
    buf: [u8; 64],
    len: usize,
}

impl Digits {
    fn new() -> Self {
        Self { buf: [b'0'; 64], len: 0 }
    }

    fn version(version: u64, tag: u64) -> Self {
        let mut out = Self::new();
        out.padded(version, 32);
        out.byte(b'.');
        out.padded(tag % 10_000_000_000_000_000, 16);
        out
    }

    fn counter(counter: u64) -> Self {
        let mut out = Self::new();
        out.padded(counter, 32);
        out
    }

    /// Appends `n` in decimal, left-padded with zeros to `width` digits (what does not fit in the
    /// buffer is dropped; the stamps of this module fit).
    fn padded(&mut self, mut n: u64, width: usize) {
        let count = n.checked_ilog10().map_or(1, |log| log as usize + 1);
        let end = self.len + width.max(count);
        if end <= self.buf.len() {
            // Written in place from the end, two digits per division; the zeros of the padding are there.
            let mut at = end;
            while n >= 100 {
                let pair = (n % 100) as usize * 2;
                n /= 100;
                at -= 2;
                self.buf[at..at + 2].copy_from_slice(&PAIRS[pair..pair + 2]);
            }
            if n >= 10 {
                let pair = n as usize * 2;
                at -= 2;
                self.buf[at..at + 2].copy_from_slice(&PAIRS[pair..pair + 2]);
            } else {
                self.buf[at - 1] = b'0' + n as u8;
            }
            self.len = end;
            return;
        }
        // 20 digits hold any u64; two are made per division.
        let mut digits = [b'0'; 20];
        let mut start = digits.len();
        while n >= 100 {
            let pair = (n % 100) as usize * 2;
            n /= 100;
            start -= 2;
            digits[start] = PAIRS[pair];
            digits[start + 1] = PAIRS[pair + 1];
        }
        if n >= 10 {
            let pair = n as usize * 2;
            start -= 2;
            digits[start] = PAIRS[pair];
            digits[start + 1] = PAIRS[pair + 1];
        } else {
            start -= 1;
            digits[start] = b'0' + n as u8;
        }
        let count = digits.len() - start;
        // The buffer is zeros past `len`: padding only moves the end.
        self.len = (self.len + width.saturating_sub(count)).min(self.buf.len());
        let take = count.min(self.buf.len() - self.len);
        self.buf[self.len..self.len + take].copy_from_slice(&digits[start..start + take]);
        self.len += take;
    }

    fn byte(&mut self, b: u8) {
        if self.len < self.buf.len() {
            self.buf[self.len] = b;
            self.len += 1;
        }
    }

    fn text(&mut self, s: &str) {
        for b in s.bytes() {
            self.byte(b);
        }
    }

    fn as_str(&self) -> &str {
        // Only ASCII digits and punctuation are written.
        std::str::from_utf8(&self.buf[..self.len]).unwrap_or_default()
    }
}

/// A new checkpoint's id (see `new_checkpoint_id`) and time (see `now_rfc3339`), from one reading of the
/// clock.
pub(crate) fn checkpoint_stamps() -> (String, String) {
    let now = since_epoch();
    (checkpoint_id_at(now), rfc3339_at(now))
}

fn since_epoch() -> Duration {
    SystemTime::now().duration_since(UNIX_EPOCH).unwrap_or_default()
}

/// The current time as RFC 3339 with microseconds, in UTC (`2024-01-01T00:00:00.000000+00:00`).
pub(crate) fn now_rfc3339() -> String {
    rfc3339_at(since_epoch())
}

fn rfc3339_at(now: Duration) -> String {
    let secs = now.as_secs();
    // `{y:04}-{m:02}-{d:02}T{h:02}:{min:02}:{s:02}`, made once per second of the clock.
    let prefix = SECOND_TEXT.with(|cached| {
        let (at, text) = cached.get();
        if at == Some(secs) {
            return text;
        }
        let text = second_text(secs);
        cached.set((Some(secs), text));
        text
    });
    let mut out = Digits::new();
    for b in prefix {
        out.byte(b);
    }
    out.byte(b'.');
    out.padded(u64::from(now.subsec_micros()), 6);
    out.text("+00:00");
    out.as_str().to_owned()
}

/// Length of `YYYY-MM-DDTHH:MM:SS`.
const SECOND_LEN: usize = 19;

thread_local! {
    /// The last second formatted on this thread and its text.
    static SECOND_TEXT: std::cell::Cell<(Option<u64>, [u8; SECOND_LEN])> =
        const { std::cell::Cell::new((None, [0; SECOND_LEN])) };
}

/// `secs` since the epoch as `YYYY-MM-DDTHH:MM:SS` (UTC; past `jiff`'s range, its last second).
fn second_text(secs: u64) -> [u8; SECOND_LEN] {
    let at = i64::try_from(secs)
        .ok()
        .and_then(|secs| jiff::Timestamp::from_second(secs).ok())
        .unwrap_or(jiff::Timestamp::MAX);
    let written = format!("{:.0}", jiff::tz::TimeZone::UTC.to_datetime(at));
    let mut text = [b'0'; SECOND_LEN];
    let len = written.len().min(SECOND_LEN);
    text[..len].copy_from_slice(&written.as_bytes()[..len]);
    text
}

/// The last id's millisecond and 74 random-or-counter bits, so that ids increase within the process.
static LAST_ID: Mutex<(u64, u128)> = Mutex::new((0, 0));

const RANDOM_BITS: u128 = (1 << 74) - 1;

/// The millisecond and bits of the id after `last`: `(ms, random)` at a later millisecond, else the
/// last bits plus one (moving to the next millisecond when they are used up).
fn next_id_parts(last: (u64, u128), ms: u64, random: u128) -> (u64, u128) {
    if ms > last.0 {
        (ms, random)
    } else if last.1 < RANDOM_BITS {
        (last.0, last.1 + 1)
    } else {
        (last.0 + 1, 0)
    }
}

/// A fresh checkpoint id: a UUID v7 (48-bit Unix milliseconds, then 74 bits that are random at a new
/// millisecond and count up within one), hyphenated; ids made in one process strictly increase, also
/// when the clock steps back. Random bits come from the thread-local generator: no system call per id.
#[cfg(test)]
pub(crate) fn new_checkpoint_id() -> String {
    checkpoint_id_at(since_epoch())
}

fn checkpoint_id_at(now: Duration) -> String {
    let ms = u64::try_from(now.as_millis()).unwrap_or(u64::MAX) & ((1 << 48) - 1);
    let random = rand::random::<u128>() & RANDOM_BITS;
    let (ms, bits) = {
        let mut last = LAST_ID.lock().unwrap_or_else(PoisonError::into_inner);
        *last = next_id_parts(*last, ms, random);
        *last
    };
    let value =
        (u128::from(ms) << 80) | (0x7 << 76) | ((bits >> 62) << 64) | (0b10 << 62) | (bits & ((1 << 62) - 1));
    let mut buf = uuid::Uuid::encode_buffer();
    uuid::Uuid::from_u128(value).hyphenated().encode_lower(&mut buf).to_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn padded_numbers_match_the_format_macro() {
        for n in [0u64, 7, 10, 999, 123_456_789, u64::MAX] {
            assert_eq!(counter_string(n), format!("{n:032}"));
            let tag = n.wrapping_mul(2_654_435_761);
            assert_eq!(version_string(n, tag), format!("{n:032}.{:016}", tag % 10_000_000_000_000_000));
        }
        for (n, width) in [(12_345, 2), (0, 0), (7, 40), (u64::MAX, 32), (u64::MAX, 20), (5, 1)] {
            let mut out = Digits::new();
            out.padded(n, width);
            assert_eq!(out.as_str(), format!("{n:0width$}"));
        }
        // What does not fit the buffer is dropped, without a panic.
        let mut out = Digits::new();
        out.len = 60;
        out.padded(12_345, 8);
        assert_eq!(&out.as_str()[60..], "0001");
        assert_eq!(&*version_shared(42, 7), version_string(42, 7));
        assert_eq!(&*counter_shared(42), counter_string(42));
    }

    #[test]
    fn timestamps_are_rfc3339_with_microseconds() {
        let (id, stamped) = checkpoint_stamps();
        let made = crate::checkpoint::checkpoint_time(&id).unwrap().duration_since(UNIX_EPOCH).unwrap();
        // One clock reading: the id is at the stamp's millisecond, or later when another thread made an
        // id at a later millisecond meanwhile (ids made in one process strictly increase).
        let stamped_at = jiff::Timestamp::strptime("%Y-%m-%dT%H:%M:%S%.f%:z", &stamped).unwrap();
        let stamped_ms = u128::try_from(stamped_at.as_millisecond()).unwrap();
        assert!(
            (stamped_ms..stamped_ms + 50).contains(&made.as_millis()),
            "one clock reading: id at {} ms, stamp {stamped}",
            made.as_millis()
        );
        assert_eq!(
            rfc3339_at(Duration::from_micros(1_704_067_200_000_007)),
            "2024-01-01T00:00:00.000007+00:00"
        );
        let ts = now_rfc3339();
        assert_eq!(ts.len(), 32, "{ts}");
        assert_eq!(&ts[4..5], "-");
        assert_eq!(&ts[10..11], "T");
        assert!(ts.ends_with("+00:00"), "{ts}");
        // The text of a second is cached per thread: moving between seconds, back and forth, stays exact.
        for (micros, text) in [
            (1_704_067_199_500_000, "2023-12-31T23:59:59.500000+00:00"),
            (1_704_067_200_000_001, "2024-01-01T00:00:00.000001+00:00"),
            (1_704_067_200_999_999, "2024-01-01T00:00:00.999999+00:00"),
            (1_704_067_199_000_000, "2023-12-31T23:59:59.000000+00:00"),
            (951_825_600_000_000, "2000-02-29T12:00:00.000000+00:00"),
            (0, "1970-01-01T00:00:00.000000+00:00"),
        ] {
            assert_eq!(rfc3339_at(Duration::from_micros(micros)), text);
        }
        assert_eq!(&second_text(u64::MAX), b"9999-12-30T22:00:00");
    }

    #[test]
    fn checkpoint_ids_are_increasing_uuid_v7_of_now() {
        let before = SystemTime::now();
        let ids: Vec<String> = (0..5000).map(|_| new_checkpoint_id()).collect();
        assert!(ids.windows(2).all(|w| w[0] < w[1]));
        for id in [&ids[0], &ids[4999]] {
            let parsed = uuid::Uuid::parse_str(id).unwrap();
            assert_eq!(parsed.get_version_num(), 7);
            assert_eq!(parsed.get_variant(), uuid::Variant::RFC4122);
            assert_eq!(*id, parsed.to_string());
            let made = crate::checkpoint::checkpoint_time(id).unwrap();
            let lag = made.duration_since(before).unwrap_or_default();
            assert!(lag < std::time::Duration::from_secs(5), "{lag:?}");
        }
    }

    #[test]
    fn id_bits_count_up_within_a_millisecond_and_when_the_clock_steps_back() {
        assert_eq!(next_id_parts((5, 9), 6, 3), (6, 3));
        assert_eq!(next_id_parts((5, 9), 5, 3), (5, 10));
        assert_eq!(next_id_parts((5, 9), 4, 300), (5, 10));
        assert_eq!(next_id_parts((5, RANDOM_BITS), 5, 3), (6, 0));
    }
}
