//! RFC 3339 timestamps (UTC, microseconds) for store items, without a date crate.

use std::time::{Duration, SystemTime};

/// `t` as `2025-01-02T03:04:05.678901+00:00` (Python's `isoformat()` of an aware UTC datetime).
pub fn format_rfc3339(t: SystemTime) -> String {
    let (secs, micros) = match t.duration_since(SystemTime::UNIX_EPOCH) {
        Ok(d) => (i64::try_from(d.as_secs()).unwrap_or(i64::MAX), d.subsec_micros()),
        Err(e) => {
            let d = e.duration();
            let whole = i64::try_from(d.as_secs()).unwrap_or(i64::MAX);
            match d.subsec_micros() {
                0 => (-whole, 0),
                us => (-whole - 1, 1_000_000 - us),
            }
        }
    };
    let (days, rem) = (secs.div_euclid(86_400), secs.rem_euclid(86_400));
    let (y, m, d) = civil_from_days(days);
    let (hh, mm, ss) = (rem / 3600, rem % 3600 / 60, rem % 60);
    format!("{y:04}-{m:02}-{d:02}T{hh:02}:{mm:02}:{ss:02}.{micros:06}+00:00")
}

/// Parses `YYYY-MM-DDTHH:MM:SS[.fraction](Z|±HH:MM)`.
pub fn parse_rfc3339(s: &str) -> Option<SystemTime> {
    let b = s.as_bytes();
    let num = |range: std::ops::Range<usize>| -> Option<i64> {
        let part = s.get(range)?;
        if part.bytes().all(|c| c.is_ascii_digit()) { part.parse().ok() } else { None }
    };
    if b.len() < 20 || b[4] != b'-' || b[7] != b'-' || !matches!(b[10], b'T' | b't' | b' ') {
        return None;
    }
    if b[13] != b':' || b[16] != b':' {
        return None;
    }
    let (y, mo, d) = (num(0..4)?, num(5..7)?, num(8..10)?);
    let (hh, mi, ss) = (num(11..13)?, num(14..16)?, num(17..19)?);
    if !(1..=12).contains(&mo) || !(1..=31).contains(&d) || hh > 23 || mi > 59 || ss > 60 {
        return None;
    }
    let mut i = 19;
    let mut nanos: i64 = 0;
    if b.get(i) == Some(&b'.') {
        let start = i + 1;
        i = start;
        while b.get(i).is_some_and(u8::is_ascii_digit) {
            i += 1;
        }
        let digits = s.get(start..i)?;
        if digits.is_empty() {
            return None;
        }
        let padded: String = digits.chars().chain(std::iter::repeat('0')).take(9).collect();
        nanos = padded.parse().ok()?;
    }
    let offset = match s.get(i..)? {
        "Z" | "z" => 0,
        tz if tz.len() == 6 && matches!(tz.as_bytes()[0], b'+' | b'-') && tz.as_bytes()[3] == b':' => {
            let minutes = num(i + 1..i + 3)? * 60 + num(i + 4..i + 6)?;
            if tz.as_bytes()[0] == b'-' { -minutes } else { minutes }
        }
        _ => return None,
    };
    let secs = days_from_civil(y, mo, d) * 86_400 + hh * 3600 + mi * 60 + ss - offset * 60;
    let whole = Duration::from_secs(secs.unsigned_abs());
    let t = if secs >= 0 {
        SystemTime::UNIX_EPOCH.checked_add(whole)?
    } else {
        SystemTime::UNIX_EPOCH.checked_sub(whole)?
    };
    t.checked_add(Duration::from_nanos(u64::try_from(nanos).ok()?))
}

/// Days since 1970-01-01 of a proleptic Gregorian date (Howard Hinnant's algorithm).
fn days_from_civil(y: i64, m: i64, d: i64) -> i64 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let doy = (153 * (m + if m > 2 { -3 } else { 9 }) + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

/// The date (year, month, day) of a day count since 1970-01-01 (Howard Hinnant's algorithm); the store's
/// times and the engine's checkpoint stamps both use it.
pub(crate) fn civil_from_days(z: i64) -> (i64, i64, i64) {
    let z = z + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    (yoe + era * 400 + i64::from(m <= 2), m, d)
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
    fn parse_rejects_malformed_text() {
        for bad in [
            "",
            "2025-01-02",
            "2025-13-02T00:00:00Z",
            "2025-01-02T00:00:00",
            "2025-01-02T00:00:00.Z",
            "x025-01-02T00:00:00Z",
        ] {
            assert_eq!(parse_rfc3339(bad), None, "{bad}");
        }
    }
}
