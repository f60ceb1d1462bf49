//! RFC 3339 timestamps (UTC, microseconds) for store items and the server's records, by `jiff`.

use std::time::SystemTime;

use jiff::Timestamp;
use jiff::tz::TimeZone;

/// `t` as `2025-01-02T03:04:05.678901+00:00` (Python's `isoformat()` of an aware UTC datetime), the
/// microseconds truncated. A time beyond `jiff`'s range (about years -9999 to 9999) is written as the
/// nearest time within it.
pub fn format_rfc3339(t: SystemTime) -> String {
    let at = Timestamp::try_from(t).unwrap_or(if t < SystemTime::UNIX_EPOCH {
        Timestamp::MIN
    } else {
        Timestamp::MAX
    });
    format!("{:.6}+00:00", TimeZone::UTC.to_datetime(at))
}

/// Parses an RFC 3339 timestamp, `YYYY-MM-DDTHH:MM:SS[.fraction](Z|±HH:MM)` (as `jiff` reads one: also
/// a space or `t` between date and time); `None` for any other text.
pub fn parse_rfc3339(s: &str) -> Option<SystemTime> {
    let since_epoch = s.parse::<Timestamp>().ok()?.as_duration();
    // Checked: a platform's `SystemTime` may not reach every year `jiff` does.
    if since_epoch.is_negative() {
        SystemTime::UNIX_EPOCH.checked_sub(since_epoch.unsigned_abs())
    } else {
        SystemTime::UNIX_EPOCH.checked_add(since_epoch.unsigned_abs())
    }
}

/// Serde adapter: a `SystemTime` as an RFC 3339 string.
pub(crate) mod rfc3339 {
    use std::time::SystemTime;

    use serde::{Deserialize, Deserializer, Serializer};

    /// Writes the time as RFC 3339.
    pub(crate) fn serialize<S: Serializer>(t: &SystemTime, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&super::format_rfc3339(*t))
    }

    /// Reads an RFC 3339 time.
    pub(crate) fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<SystemTime, D::Error> {
        let text = String::deserialize(d)?;
        super::parse_rfc3339(&text)
            .ok_or_else(|| serde::de::Error::custom(format!("'{text}' is not an RFC 3339 timestamp")))
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    #[test]
    fn formats_epoch_and_known_instants() {
        assert_eq!(format_rfc3339(SystemTime::UNIX_EPOCH), "1970-01-01T00:00:00.000000+00:00");
        let t = SystemTime::UNIX_EPOCH + Duration::from_micros(1_735_787_045_678_901);
        assert_eq!(format_rfc3339(t), "2025-01-02T03:04:05.678901+00:00");
        let leap = SystemTime::UNIX_EPOCH + Duration::from_secs(951_782_400);
        assert_eq!(format_rfc3339(leap), "2000-02-29T00:00:00.000000+00:00");
    }

    #[test]
    fn parse_inverts_format() {
        for micros in [0_u64, 1, 951_782_400_000_000, 1_735_787_045_678_901, 4_102_444_799_999_999] {
            let t = SystemTime::UNIX_EPOCH + Duration::from_micros(micros);
            assert_eq!(parse_rfc3339(&format_rfc3339(t)), Some(t));
        }
        let before = SystemTime::UNIX_EPOCH - Duration::from_micros(1_500_000);
        assert_eq!(format_rfc3339(before), "1969-12-31T23:59:58.500000+00:00");
        assert_eq!(parse_rfc3339(&format_rfc3339(before)), Some(before));
    }

    #[test]
    fn parse_honours_offsets_and_z() {
        let utc = parse_rfc3339("2025-01-02T03:04:05Z").unwrap();
        assert_eq!(parse_rfc3339("2025-01-02T05:04:05+02:00"), Some(utc));
        assert_eq!(parse_rfc3339("2025-01-02T01:04:05.000-02:00"), Some(utc));
    }

    #[test]
    fn times_beyond_the_range_are_clamped_not_panicking() {
        let far = SystemTime::UNIX_EPOCH + Duration::from_secs(400_000_000_000);
        assert_eq!(format_rfc3339(far), "9999-12-30T22:00:00.999999+00:00");
        let Some(long_ago) = SystemTime::UNIX_EPOCH.checked_sub(Duration::from_secs(400_000_000_000)) else {
            return;
        };
        assert_eq!(format_rfc3339(long_ago), "-009999-01-02T01:59:59.000000+00:00");
    }

    #[test]
    fn parse_rejects_malformed_text() {
        for bad in [
            "",
            "2025-01-02",
            "2025-13-02T00:00:00Z",
            "2025-01-02T00:00:00",
            "2025-01-02T00:00:00.Z",
            "x025-01-02T00:00:00Z",
            "2025-02-30T00:00:00Z",
            "2025-01-02T24:00:00Z",
            "2025-01-02T00:00:00+02:60",
            "2025-01-02T00:00:00.1234567891Z",
        ] {
            assert_eq!(parse_rfc3339(bad), None, "{bad}");
        }
    }
}
