//! Cron schedules in croniter's syntax (LangGraph's): five fields (minute, hour, day of month, month, day
//! of week), or six with the seconds last, or seven with a year after them; `@hourly` and the like; read in
//! UTC unless a time zone is given.

use std::str::FromStr as _;
use std::time::SystemTime;

use croner::Cron;
use jiff::Timestamp;
use jiff::tz::TimeZone;

/// Why a schedule or time zone was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(crate) enum ScheduleError {
    /// The expression is not a cron schedule.
    #[error(
        "Invalid cron schedule: '{schedule}'. Reason: {reason}. Ensure the schedule uses the standard cron format \
         (minute hour day_of_month month day_of_week). Example: '*/5 * * * *' for every 5 minutes."
    )]
    Invalid { schedule: String, reason: String },
    /// The time zone is not an IANA name this machine knows.
    #[error("Invalid timezone: '{0}'. Use IANA timezone format (e.g. 'America/New_York').")]
    Timezone(String),
}

/// A parsed schedule in its time zone.
#[derive(Debug, Clone)]
pub(crate) struct Schedule {
    cron: Cron,
    zone: TimeZone,
}

/// croniter puts the seconds after the day of week (and a year after them); croner puts them first.
fn croner_order(expression: &str) -> String {
    let fields: Vec<&str> = expression.split_whitespace().collect();
    match fields.as_slice() {
        [minute, hour, dom, month, dow, second] => format!("{second} {minute} {hour} {dom} {month} {dow}"),
        [minute, hour, dom, month, dow, second, year] => {
            format!("{second} {minute} {hour} {dom} {month} {dow} {year}")
        }
        _ => fields.join(" "),
    }
}

/// The time zone named `name` (an IANA name), or an error naming it.
pub(crate) fn zone(name: &str) -> Result<TimeZone, ScheduleError> {
    TimeZone::get(name).map_err(|_| ScheduleError::Timezone(name.to_owned()))
}

impl Schedule {
    /// Parses `expression` in `timezone` (UTC when none). A schedule that never fires (`0 0 31 2 *`) is
    /// refused too.
    pub(crate) fn parse(expression: &str, timezone: Option<&str>) -> Result<Self, ScheduleError> {
        let invalid = |reason: String| ScheduleError::Invalid { schedule: expression.to_owned(), reason };
        let zone = match timezone {
            Some(name) => zone(name)?,
            None => TimeZone::UTC,
        };
        let cron = Cron::from_str(&croner_order(expression)).map_err(|e| invalid(e.to_string()))?;
        let schedule = Schedule { cron, zone };
        schedule
            .next_after(SystemTime::now())
            .map_err(|_| invalid("it matches no time that will come".to_owned()))?;
        Ok(schedule)
    }

    /// The first time strictly after `after` that the schedule matches.
    pub(crate) fn next_after(&self, after: SystemTime) -> Result<SystemTime, ScheduleError> {
        let failed = |reason: String| ScheduleError::Invalid { schedule: self.cron.to_string(), reason };
        let start =
            Timestamp::try_from(after).map_err(|e| failed(e.to_string()))?.to_zoned(self.zone.clone());
        let next = self.cron.find_next_occurrence(&start, false).map_err(|e| failed(e.to_string()))?;
        Ok(SystemTime::from(next.timestamp()))
    }
}

/// Reads an RFC 3339 time (`2030-01-01T00:00:00+00:00`); one without an offset is UTC (what Python's
/// `isoformat()` writes for a naive datetime).
pub(crate) fn parse_time(text: &str) -> Option<SystemTime> {
    if let Ok(t) = Timestamp::from_str(text) {
        return Some(SystemTime::from(t));
    }
    let civil = jiff::civil::DateTime::from_str(text).ok()?;
    civil.to_zoned(TimeZone::UTC).ok().map(|z| SystemTime::from(z.timestamp()))
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    fn at(text: &str) -> SystemTime {
        parse_time(text).unwrap()
    }

    fn next(schedule: &str, timezone: Option<&str>, after: &str) -> String {
        let s = Schedule::parse(schedule, timezone).unwrap();
        super::super::iso(s.next_after(at(after)).unwrap())
    }

    #[test]
    fn five_fields_are_minute_hour_day_month_weekday_in_utc() {
        assert_eq!(next("* * * * *", None, "2025-01-01T00:00:00+00:00"), "2025-01-01T00:01:00+00:00");
        assert_eq!(next("*/5 * * * *", None, "2025-01-01T00:03:10+00:00"), "2025-01-01T00:05:00+00:00");
        assert_eq!(next("0 9 * * 1-5", None, "2025-01-04T10:00:00+00:00"), "2025-01-06T09:00:00+00:00");
        // Day of month or day of week, as cron (and croniter) read both.
        assert_eq!(next("0 0 1 * mon", None, "2025-01-01T00:00:00+00:00"), "2025-01-06T00:00:00+00:00");
        assert_eq!(next("@hourly", None, "2025-01-01T00:00:00+00:00"), "2025-01-01T01:00:00+00:00");
    }

    #[test]
    fn a_sixth_field_is_seconds_and_a_seventh_a_year_as_in_croniter() {
        assert_eq!(next("* * * * * */10", None, "2025-01-01T00:00:00+00:00"), "2025-01-01T00:00:10+00:00");
        assert_eq!(next("* * * * * * 2030", None, "2025-01-01T00:00:00+00:00"), "2030-01-01T00:00:00+00:00");
    }

    #[test]
    fn a_time_zone_moves_the_hours() {
        // 09:00 in New York in January is 14:00 UTC.
        assert_eq!(
            next("0 9 * * *", Some("America/New_York"), "2025-01-01T00:00:00+00:00"),
            "2025-01-01T14:00:00+00:00"
        );
        assert_eq!(
            Schedule::parse("0 9 * * *", Some("Mars/Base")).unwrap_err(),
            ScheduleError::Timezone("Mars/Base".into())
        );
    }

    #[test]
    fn bad_schedules_say_why() {
        for bad in ["", "61 * * * *", "* * *", "not a cron", "0 0 31 2 *"] {
            let e = Schedule::parse(bad, None).unwrap_err();
            assert!(e.to_string().starts_with(&format!("Invalid cron schedule: '{bad}'. Reason: ")), "{e}");
        }
    }

    #[test]
    fn next_is_strictly_after() {
        let s = Schedule::parse("* * * * *", None).unwrap();
        let t = at("2025-01-01T00:01:00+00:00");
        assert_eq!(s.next_after(t).unwrap(), t + Duration::from_secs(60));
        assert_eq!(parse_time("2025-01-01T00:00:00"), parse_time("2025-01-01T00:00:00Z"));
        assert_eq!(parse_time("yesterday"), None);
    }
}
