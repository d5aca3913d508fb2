//! Grammar and next-occurrence tests: every form of issue 5, English and Korean, time zones,
//! DST gap and repeat.

use super::*;

fn ts(s: &str) -> Timestamp {
    s.parse().unwrap()
}

fn tz(name: &str) -> TimeZone {
    TimeZone::get(name).unwrap()
}

/// (kind, normalized, first run) of `spec` read at `now` in `zone`.
fn read(spec: &str, now: &str, zone: &str) -> (Kind, String, String) {
    let p = parse(spec, ts(now), &tz(zone)).unwrap_or_else(|e| panic!("{spec:?}: {e}"));
    (p.schedule.kind(), p.schedule.normalized(), iso(p.next_run))
}

fn err(spec: &str, now: &str) -> String {
    parse(spec, ts(now), &tz("UTC"))
        .map(|p| p.schedule.normalized())
        .expect_err(spec)
        .0
}

/// The first `n` runs after `now` (for DST walks).
fn runs(spec: &str, now: &str, zone: &str, n: usize) -> Vec<String> {
    let z = tz(zone);
    let p = parse(spec, ts(now), &z).unwrap();
    let mut out = vec![p.next_run];
    while out.len() < n {
        let last = *out.last().unwrap();
        out.push(p.schedule.next_after(last, p.anchor, &z).unwrap());
    }
    out.into_iter().map(iso).collect()
}

const NOW: &str = "2026-01-15T10:20:30Z"; // a Thursday

#[test]
fn cron_five_and_six_fields_with_names() {
    assert_eq!(
        read("*/15 * * * *", NOW, "UTC"),
        (
            Kind::Cron,
            "*/15 * * * *".into(),
            "2026-01-15T10:30:00Z".into()
        )
    );
    assert_eq!(
        read("0  9 * *  MON-FRI", NOW, "UTC"),
        (
            Kind::Cron,
            "0 9 * * mon-fri".into(),
            "2026-01-16T09:00:00Z".into()
        )
    );
    assert_eq!(read("30 0 9 * * 1", NOW, "UTC").2, "2026-01-19T09:00:30Z");
    assert_eq!(read("0 12 1 jan *", NOW, "UTC").2, "2027-01-01T12:00:00Z");
    assert_eq!(read("@daily", NOW, "UTC").2, "2026-01-16T00:00:00Z");
    assert_eq!(read("@hourly", NOW, "UTC").0, Kind::Cron);
}

#[test]
fn cron_is_read_in_the_time_zone() {
    // 09:00 in Seoul is 00:00 UTC; at 10:20 UTC (19:20 KST) the next is tomorrow.
    assert_eq!(
        read("0 9 * * *", NOW, "Asia/Seoul").2,
        "2026-01-16T00:00:00Z"
    );
    assert_eq!(
        read("0 9 * * *", NOW, "America/New_York").2,
        "2026-01-15T14:00:00Z"
    );
}

#[test]
fn invalid_cron_says_why() {
    let e = err("61 * * * *", NOW);
    assert!(e.contains("cron"), "{e}");
    let e = err("0 0 30 2 *", NOW);
    assert!(e.contains("never fire"), "{e}");
}

#[test]
fn intervals() {
    assert_eq!(
        read("every 30s", NOW, "UTC"),
        (
            Kind::Interval,
            "every 30s".into(),
            "2026-01-15T10:21:00Z".into()
        )
    );
    assert_eq!(read("every 10 minutes", NOW, "UTC").1, "every 600s");
    assert_eq!(read("every 2h", NOW, "UTC").1, "every 7200s");
    assert_eq!(read("each day", NOW, "UTC").1, "every 86400s");
    assert_eq!(read("every hour", NOW, "UTC").1, "every 3600s");
    assert_eq!(
        read("Every 1 hour and 30 minutes", NOW, "UTC").1,
        "every 5400s"
    );
    assert_eq!(read("every 1 week", NOW, "UTC").1, "every 604800s");
    assert!(err("every 0s", NOW).contains("at least"));
    assert!(err("every blue moon", NOW).contains("not an interval"));
}

#[test]
fn interval_occurrences_are_anchored_at_creation() {
    let s = Schedule::Interval {
        every: SignedDuration::from_secs(60),
    };
    let anchor = ts("2026-01-15T10:00:00Z");
    let z = tz("UTC");
    assert_eq!(
        s.next_after(ts("2026-01-15T09:00:00Z"), anchor, &z),
        Some(ts("2026-01-15T10:01:00Z"))
    );
    assert_eq!(
        s.next_after(ts("2026-01-15T10:01:00Z"), anchor, &z),
        Some(ts("2026-01-15T10:02:00Z"))
    );
    assert_eq!(
        s.next_after(ts("2026-01-15T10:01:30Z"), anchor, &z),
        Some(ts("2026-01-15T10:02:00Z"))
    );
}

#[test]
fn relative_one_shots() {
    assert_eq!(
        read("in 20 minutes", NOW, "UTC"),
        (
            Kind::Once,
            "once at 2026-01-15T10:40:30Z".into(),
            "2026-01-15T10:40:30Z".into()
        )
    );
    assert_eq!(read("after 2h", NOW, "UTC").2, "2026-01-15T12:20:30Z");
    assert_eq!(read("in 1h 30m", NOW, "UTC").2, "2026-01-15T11:50:30Z");
    assert_eq!(read("in an hour", NOW, "UTC").2, "2026-01-15T11:20:30Z");
    assert!(err("in a while", NOW).contains("not a duration"));
}

#[test]
fn absolute_one_shots_iso() {
    assert_eq!(
        read("2026-02-01T09:00:00Z", NOW, "Asia/Seoul").1,
        "once at 2026-02-01T09:00:00Z"
    );
    assert_eq!(
        read("2026-02-01T09:00:00+09:00", NOW, "UTC").2,
        "2026-02-01T00:00:00Z"
    );
    // Without an offset: read in the zone.
    assert_eq!(
        read("2026-02-01T09:00", NOW, "Asia/Seoul").2,
        "2026-02-01T00:00:00Z"
    );
    assert_eq!(
        read("2026-02-01 09:00:00", NOW, "America/New_York").2,
        "2026-02-01T14:00:00Z"
    );
    assert_eq!(read("2026-02-01", NOW, "UTC").2, "2026-02-01T00:00:00Z");
    assert_eq!(
        read("2026-02-01T09:00:00+09:00[Asia/Seoul]", NOW, "UTC").2,
        "2026-02-01T00:00:00Z"
    );
    let e = err("2025-01-01T00:00:00Z", NOW);
    assert!(e.contains("never fire") && e.contains("past"), "{e}");
    assert!(err("2026-13-45T99:00", NOW).contains("ISO-8601"));
}

#[test]
fn today_tomorrow_and_bare_clock_times() {
    assert_eq!(
        read("tomorrow 9am", NOW, "UTC"),
        (
            Kind::Once,
            "once at 2026-01-16T09:00:00Z".into(),
            "2026-01-16T09:00:00Z".into()
        )
    );
    assert_eq!(
        read("tomorrow at 9:30 pm", NOW, "UTC").2,
        "2026-01-16T21:30:00Z"
    );
    assert_eq!(read("today 18:30", NOW, "UTC").2, "2026-01-15T18:30:00Z");
    assert_eq!(read("6pm today", NOW, "UTC").2, "2026-01-15T18:00:00Z");
    assert!(err("today 08:00", NOW).contains("past"));
    assert!(err("tomorrow", NOW).contains("needs a clock time"));
    // A bare clock time is its next occurrence: later today, or tomorrow.
    assert_eq!(read("18:30", NOW, "UTC").2, "2026-01-15T18:30:00Z");
    assert_eq!(read("9am", NOW, "UTC").2, "2026-01-16T09:00:00Z");
    assert_eq!(read("12am", NOW, "UTC").2, "2026-01-16T00:00:00Z");
    assert_eq!(read("12pm", NOW, "UTC").2, "2026-01-15T12:00:00Z");
    // In the zone: at 19:20 KST, 9am Seoul tomorrow is 00:00 UTC on the 16th.
    assert_eq!(
        read("tomorrow 9am", NOW, "Asia/Seoul").2,
        "2026-01-16T00:00:00Z"
    );
}

#[test]
fn recurring_phrases_become_cron() {
    assert_eq!(
        read("daily at 9:00", NOW, "UTC"),
        (
            Kind::Cron,
            "0 9 * * *".into(),
            "2026-01-16T09:00:00Z".into()
        )
    );
    assert_eq!(read("every day at 7:15pm", NOW, "UTC").1, "15 19 * * *");
    assert_eq!(read("every weekday at 8am", NOW, "UTC").1, "0 8 * * 1-5");
    assert_eq!(read("weekdays at 8am", NOW, "UTC").1, "0 8 * * 1-5");
    assert_eq!(read("every weekend at 10am", NOW, "UTC").1, "0 10 * * 0,6");
    assert_eq!(
        read("every monday 14:30", NOW, "UTC"),
        (
            Kind::Cron,
            "30 14 * * 1".into(),
            "2026-01-19T14:30:00Z".into()
        )
    );
    assert_eq!(
        read("every Friday at 5pm", NOW, "UTC").2,
        "2026-01-16T17:00:00Z"
    );
    assert_eq!(read("mondays at 9", NOW, "UTC").1, "0 9 * * 1");
    assert_eq!(
        read("noon", NOW, "UTC"),
        (
            Kind::Cron,
            "0 12 * * *".into(),
            "2026-01-15T12:00:00Z".into()
        )
    );
    assert_eq!(read("midnight", NOW, "UTC").2, "2026-01-16T00:00:00Z");
    assert!(err("daily at teatime", NOW).contains("not a clock time"));
}

#[test]
fn korean_forms() {
    assert_eq!(
        read("매일 9시", NOW, "Asia/Seoul"),
        (
            Kind::Cron,
            "0 9 * * *".into(),
            "2026-01-16T00:00:00Z".into()
        )
    );
    assert_eq!(read("매일 오후 3시 30분", NOW, "UTC").1, "30 15 * * *");
    assert_eq!(read("매일 9시 반", NOW, "UTC").1, "30 9 * * *");
    assert_eq!(
        read("평일 오전 8시", NOW, "UTC"),
        (
            Kind::Cron,
            "0 8 * * 1-5".into(),
            "2026-01-16T08:00:00Z".into()
        )
    );
    assert_eq!(read("주말 10시", NOW, "UTC").1, "0 10 * * 0,6");
    assert_eq!(read("매주 월요일 14시 30분", NOW, "UTC").1, "30 14 * * 1");
    assert_eq!(read("월요일마다 오전 9시", NOW, "UTC").1, "0 9 * * 1");
    assert_eq!(
        read("30분 뒤", NOW, "UTC"),
        (
            Kind::Once,
            "once at 2026-01-15T10:50:30Z".into(),
            "2026-01-15T10:50:30Z".into()
        )
    );
    assert_eq!(read("2시간 후", NOW, "UTC").2, "2026-01-15T12:20:30Z");
    assert_eq!(
        read("1시간 30분 후에", NOW, "UTC").2,
        "2026-01-15T11:50:30Z"
    );
    assert_eq!(
        read("10분마다", NOW, "UTC"),
        (
            Kind::Interval,
            "every 600s".into(),
            "2026-01-15T10:30:30Z".into()
        )
    );
    assert_eq!(read("2시간 마다", NOW, "UTC").1, "every 7200s");
    assert_eq!(read("30초마다", NOW, "UTC").1, "every 30s");
    assert_eq!(read("매시간", NOW, "UTC").1, "every 3600s");
    assert_eq!(
        read("내일 오전 9시", NOW, "Asia/Seoul").2,
        "2026-01-16T00:00:00Z"
    );
    assert_eq!(read("오늘 18:30", NOW, "UTC").2, "2026-01-15T18:30:00Z");
    assert_eq!(
        read("오늘 오후 6시 30분", NOW, "UTC").2,
        "2026-01-15T18:30:00Z"
    );
    assert_eq!(read("오후 11시", NOW, "UTC").2, "2026-01-15T23:00:00Z");
    assert_eq!(read("정오", NOW, "UTC").1, "0 12 * * *");
    assert_eq!(read("자정", NOW, "UTC").1, "0 0 * * *");
    assert!(err("매일 아무때나", NOW).contains("not a clock time"));
}

#[test]
fn unreadable_specs_say_what_is_expected() {
    for spec in [
        "whenever you feel like it",
        "",
        "   ",
        "every",
        "blah 9am please",
    ] {
        let e = err(spec, NOW);
        assert!(
            e.contains("cron") || e.contains("not an interval") || e.contains("empty"),
            "{spec:?}: {e}"
        );
    }
}

#[test]
fn normalized_round_trips() {
    for spec in [
        "*/5 * * * *",
        "every 10 minutes",
        "in 20 minutes",
        "daily at 9:00",
        "30 0 9 * * 1",
    ] {
        let p = parse(spec, ts(NOW), &tz("UTC")).unwrap();
        let back = Schedule::from_normalized(p.schedule.kind(), &p.schedule.normalized()).unwrap();
        assert_eq!(back.normalized(), p.schedule.normalized());
        assert_eq!(
            back.next_after(ts(NOW), p.anchor, &tz("UTC")),
            Some(p.next_run)
        );
    }
}

// --- DST: America/New_York springs forward 2026-03-08 02:00 EST → 03:00 EDT and falls back
// 2026-11-01 02:00 EDT → 01:00 EST.

#[test]
fn dst_gap_fixed_time_job_runs_right_after_the_gap_like_cron() {
    // 02:30 does not exist on 2026-03-08: cron runs it at 03:00 EDT (07:00Z), then 02:30 EDT.
    assert_eq!(
        runs("30 2 * * *", "2026-03-07T12:00:00Z", "America/New_York", 2),
        vec![
            "2026-03-08T07:00:00Z".to_string(),
            "2026-03-09T06:30:00Z".to_string()
        ]
    );
    // The same through a phrase and in Korean.
    assert_eq!(
        runs(
            "daily at 2:30am",
            "2026-03-07T12:00:00Z",
            "America/New_York",
            1
        ),
        vec!["2026-03-08T07:00:00Z".to_string()]
    );
    assert_eq!(
        runs(
            "매일 새벽 2시 30분",
            "2026-03-07T12:00:00Z",
            "America/New_York",
            1
        ),
        vec!["2026-03-08T07:00:00Z".to_string()]
    );
}

#[test]
fn dst_repeat_fixed_time_job_runs_once() {
    // 01:30 happens twice on 2026-11-01 (05:30Z EDT and 06:30Z EST): a fixed-time job runs once.
    assert_eq!(
        runs("30 1 * * *", "2026-11-01T03:00:00Z", "America/New_York", 2),
        vec![
            "2026-11-01T05:30:00Z".to_string(),
            "2026-11-02T06:30:00Z".to_string()
        ]
    );
}

#[test]
fn dst_repeat_hourly_job_runs_every_real_hour() {
    assert_eq!(
        runs("0 * * * *", "2026-11-01T04:30:00Z", "America/New_York", 3),
        vec![
            "2026-11-01T05:00:00Z".to_string(),
            "2026-11-01T06:00:00Z".to_string(),
            "2026-11-01T07:00:00Z".to_string()
        ]
    );
    // Across the gap an hourly job skips the hour that does not exist (no extra run).
    assert_eq!(
        runs("0 * * * *", "2026-03-08T06:30:00Z", "America/New_York", 2),
        vec![
            "2026-03-08T07:00:00Z".to_string(),
            "2026-03-08T08:00:00Z".to_string()
        ]
    );
}

#[test]
fn dst_one_shots_and_intervals() {
    // A one-shot civil time in the gap moves forward by the gap (02:30 → 03:30 EDT).
    assert_eq!(
        read(
            "tomorrow 2:30am",
            "2026-03-07T12:00:00Z",
            "America/New_York"
        )
        .2,
        "2026-03-08T07:30:00Z"
    );
    // In the overlap it takes the earlier instant (01:30 EDT).
    assert_eq!(
        read(
            "2026-11-01T01:30",
            "2026-10-01T00:00:00Z",
            "America/New_York"
        )
        .2,
        "2026-11-01T05:30:00Z"
    );
    // Intervals are real durations: an hour apart across the change.
    assert_eq!(
        runs("every 1h", "2026-03-08T05:30:00Z", "America/New_York", 3),
        vec![
            "2026-03-08T06:30:00Z".to_string(),
            "2026-03-08T07:30:00Z".to_string(),
            "2026-03-08T08:30:00Z".to_string()
        ]
    );
}

#[test]
fn time_zone_setting() {
    assert_eq!(
        time_zone(Some("Asia/Seoul")).unwrap().iana_name(),
        Some("Asia/Seoul")
    );
    assert!(time_zone(Some("Mars/Olympus"))
        .unwrap_err()
        .0
        .contains("IANA"));
    assert!(time_zone(None).is_ok());
}

#[test]
fn absurd_stored_intervals_never_fire_instead_of_overflowing() {
    let s = Schedule::from_normalized(Kind::Interval, "every 9223372036854775807s").unwrap();
    let anchor = ts("2026-01-01T00:00:00Z");
    assert_eq!(s.next_after(ts(NOW), anchor, &TimeZone::UTC), None);
    assert_eq!(s.prev_at_or_before(ts(NOW), anchor, &TimeZone::UTC), None);
    // Anchors at the far ends of the range stay in range.
    let s = Schedule::Interval {
        every: SignedDuration::from_secs(60),
    };
    let prev = s.prev_at_or_before(Timestamp::MAX, Timestamp::MIN, &TimeZone::UTC);
    assert!(prev.is_some_and(|p| p <= Timestamp::MAX));
    assert_eq!(
        s.next_after(Timestamp::MAX, Timestamp::MIN, &TimeZone::UTC),
        None
    );
}

#[test]
fn messages_quote_the_users_own_text_and_at_most_80_characters_of_it() {
    let e = err("2026-02-30T00:00:00", NOW);
    assert!(e.starts_with("\"2026-02-30T00:00:00\" looks like"), "{e}");
    let e = err("Every Blue Moon", NOW);
    assert!(e.starts_with("\"Blue Moon\" is not an interval"), "{e}");
    let e = err("Tomorrow At TEATIME", NOW);
    assert!(e.starts_with("\"At TEATIME\" is not a clock time"), "{e}");
    let e = err("In A Fortnight", NOW);
    assert!(e.starts_with("\"A Fortnight\" is not a duration"), "{e}");
    let e = err("61 * * * MON", NOW);
    assert!(e.contains("\"61 * * * MON\""), "{e}");
    let e = err("매일 Nine시", NOW);
    assert!(e.contains("\"Nine시\""), "{e}");
    let e = err("Whenever You Like", NOW);
    assert!(e.starts_with("cannot read \"Whenever You Like\""), "{e}");
    // A long value is cut to its first 80 characters.
    let long = format!("every {}", "Z".repeat(400));
    let e = err(&long, NOW);
    assert!(e.contains(&format!("\"{}\"…", "Z".repeat(80))), "{e}");
    assert!(!e.contains(&"Z".repeat(81)), "{e}");
    let e = err(&"X".repeat(500), NOW);
    assert!(!e.contains(&"X".repeat(81)), "{e}");
    assert_eq!(quote("abc"), "\"abc\"");
    assert_eq!(quote(&"é".repeat(100)), format!("{:?}…", "é".repeat(80)));
}
