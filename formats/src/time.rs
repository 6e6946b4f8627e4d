//! Timestamps as Pi writes and reads them (`new Date().toISOString()`, `Date.parse`).

use time::format_description::well_known::Rfc3339;
use time::macros::format_description;
use time::{OffsetDateTime, PrimitiveDateTime};

/// Now as `YYYY-MM-DDTHH:MM:SS.mmmZ`.
pub fn now_iso() -> String {
    iso_from_millis(now_millis())
}

/// Milliseconds since the Unix epoch, now.
pub fn now_millis() -> i64 {
    (OffsetDateTime::now_utc().unix_timestamp_nanos() / 1_000_000) as i64
}

/// `new Date(ms).toISOString()` for ordinary dates.
pub fn iso_from_millis(ms: i64) -> String {
    let t = OffsetDateTime::from_unix_timestamp_nanos(ms as i128 * 1_000_000)
        .unwrap_or(OffsetDateTime::UNIX_EPOCH);
    let fmt =
        format_description!("[year]-[month]-[day]T[hour]:[minute]:[second].[subsecond digits:3]Z");
    t.format(fmt).unwrap_or_default()
}

/// `Date.parse` for the ISO forms that occur in session files; `None` where JS gives `NaN`.
pub fn parse_millis(text: &str) -> Option<f64> {
    if let Ok(t) = OffsetDateTime::parse(text, &Rfc3339) {
        return Some((t.unix_timestamp_nanos() / 1_000_000) as f64);
    }
    // Date-only ISO strings are UTC in JS; date-time without offset is local time,
    // which we take as UTC (sessions are written with `Z`).
    let date_only = format_description!("[year]-[month]-[day]");
    if let Ok(d) = time::Date::parse(text, date_only) {
        let t = d.midnight().assume_utc();
        return Some((t.unix_timestamp_nanos() / 1_000_000) as f64);
    }
    let no_offset = format_description!("[year]-[month]-[day]T[hour]:[minute]:[second]");
    if let Ok(t) = PrimitiveDateTime::parse(text, no_offset) {
        return Some((t.assume_utc().unix_timestamp_nanos() / 1_000_000) as f64);
    }
    None
}

/// The file-name form of a timestamp: `:` and `.` become `-`.
pub fn file_stamp(iso: &str) -> String {
    iso.replace([':', '.'], "-")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trips_iso() {
        let ms = parse_millis("2026-11-30T13:49:43.281Z").unwrap();
        assert_eq!(iso_from_millis(ms as i64), "2026-11-30T13:49:43.281Z");
        assert_eq!(parse_millis("garbage"), None);
        assert_eq!(parse_millis("1970-01-02"), Some(86_400_000.0));
        assert_eq!(
            file_stamp("2026-11-30T13:49:43.281Z"),
            "2026-11-30T13-49-43-281Z"
        );
    }
}
