//! Catch-up (issue 5 "Runs"): what to do with a job whose next firing is due, perhaps long
//! ago because the scheduler (or the whole suite) was down.
//!
//! The newest due occurrence fires once when it is late by no more than the job's
//! `catchUpWindowMinutes` (plus [`ON_TIME_GRACE_MS`], so a tick that wakes a little late is
//! never "missed"); every other due occurrence is recorded `missed` (at most
//! [`MAX_MISSED_ROWS`] rows, the newest, with the total in the `missed` event), and the job
//! advances from now. A one-shot that is missed for good ends disabled.

use jiff::tz::TimeZone;
use jiff::Timestamp;

use crate::spec::Schedule;

/// Lateness that still counts as on time, whatever the window.
pub const ON_TIME_GRACE_MS: i64 = 30_000;
/// Most `missed` rows recorded for one catch-up.
pub const MAX_MISSED_ROWS: usize = 100;
/// Most occurrences enumerated to count the missed ones.
const MAX_ENUMERATED: usize = 10_000;

/// What to do with a due job.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Plan {
    /// The occurrence to fire, ms.
    pub fire: Option<i64>,
    /// Occurrences to record as missed, ms (the newest [`MAX_MISSED_ROWS`]).
    pub missed: Vec<i64>,
    /// How many occurrences were missed in all (at least `missed.len()`).
    pub missed_total: u64,
    /// The job's next firing afterwards.
    pub next: Option<i64>,
    /// The job's enabled flag afterwards.
    pub enabled: bool,
}

/// Plans a due job whose next firing is `first_due_ms` (≤ `now`).
pub fn plan(
    schedule: &Schedule,
    anchor: Timestamp,
    tz: &TimeZone,
    first_due_ms: i64,
    now: Timestamp,
    window_minutes: i64,
) -> Plan {
    let now_ms = now.as_millisecond();
    let newest = schedule
        .prev_at_or_before(now, anchor, tz)
        .map(|t| t.as_millisecond())
        .unwrap_or(first_due_ms)
        .max(first_due_ms);
    let window_ms = window_minutes
        .max(0)
        .saturating_mul(60_000)
        .saturating_add(ON_TIME_GRACE_MS);
    let fire = (now_ms.saturating_sub(newest) <= window_ms).then_some(newest);

    // Every occurrence from the first due one up to (not including) the newest is missed.
    let mut older = std::collections::VecDeque::new();
    let mut total: u64 = 0;
    let mut at = Timestamp::from_millisecond(first_due_ms).ok();
    let mut enumerated = 0;
    while let Some(t) = at {
        let ms = t.as_millisecond();
        if ms >= newest || enumerated >= MAX_ENUMERATED {
            break;
        }
        older.push_back(ms);
        if older.len() > MAX_MISSED_ROWS {
            older.pop_front();
        }
        total += 1;
        enumerated += 1;
        at = schedule.next_after(t, anchor, tz);
    }
    if enumerated >= MAX_ENUMERATED {
        // Too many to walk: estimate the rest for the event's count only.
        total = total.max(MAX_ENUMERATED as u64);
    }
    let mut missed: Vec<i64> = older.into_iter().collect();
    if fire.is_none() {
        missed.push(newest);
        total += 1;
        if missed.len() > MAX_MISSED_ROWS {
            missed.remove(0);
        }
    }
    let next = schedule
        .next_after(now, anchor, tz)
        .map(|t| t.as_millisecond());
    Plan {
        fire,
        missed,
        missed_total: total,
        next,
        enabled: next.is_some(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use jiff::SignedDuration;

    fn ts(s: &str) -> Timestamp {
        s.parse().unwrap()
    }
    fn ms(s: &str) -> i64 {
        ts(s).as_millisecond()
    }

    #[test]
    fn on_time_fires_without_missed() {
        let s = Schedule::cron("0 * * * *").unwrap();
        let p = plan(
            &s,
            ts("2026-01-01T00:00:00Z"),
            &TimeZone::UTC,
            ms("2026-01-01T10:00:00Z"),
            ts("2026-01-01T10:00:00.005Z"),
            0,
        );
        assert_eq!(p.fire, Some(ms("2026-01-01T10:00:00Z")));
        assert!(p.missed.is_empty());
        assert_eq!(p.next, Some(ms("2026-01-01T11:00:00Z")));
    }

    #[test]
    fn downtime_within_the_window_fires_the_newest_once_and_records_the_rest() {
        let s = Schedule::cron("0 * * * *").unwrap();
        // Down from 07:30 to 10:20; window 30 min: 10:00 fires, 08:00 and 09:00 are missed.
        let p = plan(
            &s,
            ts("2026-01-01T00:00:00Z"),
            &TimeZone::UTC,
            ms("2026-01-01T08:00:00Z"),
            ts("2026-01-01T10:20:00Z"),
            30,
        );
        assert_eq!(p.fire, Some(ms("2026-01-01T10:00:00Z")));
        assert_eq!(
            p.missed,
            vec![ms("2026-01-01T08:00:00Z"), ms("2026-01-01T09:00:00Z")]
        );
        assert_eq!(p.missed_total, 2);
        assert_eq!(p.next, Some(ms("2026-01-01T11:00:00Z")));
        assert!(p.enabled);
    }

    #[test]
    fn downtime_beyond_the_window_records_missed_and_advances_from_now() {
        let s = Schedule::cron("0 * * * *").unwrap();
        let p = plan(
            &s,
            ts("2026-01-01T00:00:00Z"),
            &TimeZone::UTC,
            ms("2026-01-01T09:00:00Z"),
            ts("2026-01-01T10:45:00Z"),
            30,
        );
        assert_eq!(p.fire, None);
        assert_eq!(
            p.missed,
            vec![ms("2026-01-01T09:00:00Z"), ms("2026-01-01T10:00:00Z")]
        );
        assert_eq!(p.next, Some(ms("2026-01-01T11:00:00Z")));
    }

    #[test]
    fn a_one_shot_missed_for_good_ends_disabled() {
        let s = Schedule::Once {
            at: ts("2026-01-01T09:00:00Z"),
        };
        let p = plan(
            &s,
            ts("2026-01-01T00:00:00Z"),
            &TimeZone::UTC,
            ms("2026-01-01T09:00:00Z"),
            ts("2026-01-01T12:00:00Z"),
            60,
        );
        assert_eq!((p.fire, p.next, p.enabled), (None, None, false));
        assert_eq!(p.missed, vec![ms("2026-01-01T09:00:00Z")]);
        // Within the window it fires, and is then spent too.
        let p = plan(
            &s,
            ts("2026-01-01T00:00:00Z"),
            &TimeZone::UTC,
            ms("2026-01-01T09:00:00Z"),
            ts("2026-01-01T09:59:00Z"),
            60,
        );
        assert_eq!(
            (p.fire, p.next, p.enabled),
            (Some(ms("2026-01-01T09:00:00Z")), None, false)
        );
    }

    #[test]
    fn a_huge_window_saturates_instead_of_overflowing() {
        let s = Schedule::cron("0 * * * *").unwrap();
        let p = plan(
            &s,
            ts("2026-01-01T00:00:00Z"),
            &TimeZone::UTC,
            ms("2026-01-01T09:00:00Z"),
            ts("2026-03-01T10:45:00Z"),
            i64::MAX,
        );
        assert_eq!(p.fire, Some(ms("2026-03-01T10:00:00Z")));
        // A first due time far in the past does not overflow the lateness either.
        let p = plan(
            &s,
            ts("2026-01-01T00:00:00Z"),
            &TimeZone::UTC,
            i64::MIN,
            ts("2026-01-01T10:45:00Z"),
            0,
        );
        assert_eq!(p.fire, None);
    }

    #[test]
    fn a_week_of_a_one_second_interval_is_bounded() {
        let s = Schedule::Interval {
            every: SignedDuration::from_secs(1),
        };
        let anchor = ts("2026-01-01T00:00:00Z");
        let p = plan(
            &s,
            anchor,
            &TimeZone::UTC,
            ms("2026-01-01T00:00:01Z"),
            ts("2026-01-08T00:00:00Z"),
            0,
        );
        assert_eq!(p.fire, Some(ms("2026-01-08T00:00:00Z")));
        assert_eq!(p.missed.len(), MAX_MISSED_ROWS);
        assert!(p.missed_total >= MAX_ENUMERATED as u64);
    }
}
