//! Unit tests of the restart policy: no processes, synthetic time.

use std::time::{Duration, Instant};

use super::*;

fn ms(n: u64) -> Duration {
    Duration::from_millis(n)
}

/// A policy that has been started and is running at `t0`.
fn running(t0: Instant) -> RestartPolicy {
    let mut p = RestartPolicy::new(PolicyConfig::default());
    assert_eq!(p.handle(Event::Start, t0), Some(Action::Spawn));
    assert_eq!(p.state(), ProcState::Starting);
    assert_eq!(p.handle(Event::Ready, t0), None);
    assert_eq!(p.state(), ProcState::Running);
    p
}

/// Crash, let the backoff elapse, become ready again; returns the backoff used.
fn crash_and_recover(p: &mut RestartPolicy, now: Instant) -> Duration {
    let Some(Action::ScheduleRestart(d)) = p.handle(Event::Exited, now) else {
        panic!("expected a scheduled restart, state {:?}", p.state());
    };
    assert_eq!(p.state(), ProcState::Backoff);
    assert_eq!(
        p.handle(Event::BackoffElapsed, now + d),
        Some(Action::Spawn)
    );
    assert_eq!(p.handle(Event::Ready, now + d), None);
    d
}

#[test]
fn backoff_doubles_from_100ms_to_30s() {
    let t0 = Instant::now();
    let mut p = RestartPolicy::new(PolicyConfig {
        max_restarts: 100,
        ..PolicyConfig::default()
    });
    p.handle(Event::Start, t0);
    p.handle(Event::Ready, t0);
    let mut now = t0;
    let mut seen = Vec::new();
    for _ in 0..12 {
        now += ms(10);
        let d = crash_and_recover(&mut p, now);
        now += d;
        seen.push(d.as_millis());
    }
    assert_eq!(
        seen,
        [100, 200, 400, 800, 1600, 3200, 6400, 12800, 25600, 30000, 30000, 30000]
    );
    assert_eq!(p.restarts(), 12);
}

#[test]
fn backoff_resets_after_a_minute_healthy() {
    let t0 = Instant::now();
    let mut p = running(t0);
    assert_eq!(crash_and_recover(&mut p, t0 + ms(5)), ms(100));
    assert_eq!(crash_and_recover(&mut p, t0 + ms(500)), ms(200));
    // Healthy for 59 s: not yet reset.
    let ready_at = t0 + ms(700);
    assert_eq!(
        crash_and_recover(&mut p, ready_at + Duration::from_secs(59)),
        ms(400)
    );
    // Healthy for a full minute: back to the initial backoff.
    let ready_at = ready_at + Duration::from_secs(59) + ms(400);
    assert_eq!(
        crash_and_recover(&mut p, ready_at + Duration::from_secs(61)),
        ms(100)
    );
}

#[test]
fn intensity_limit_marks_failed_and_stays_down() {
    let t0 = Instant::now();
    let mut p = running(t0);
    let mut now = t0;
    for _ in 0..5 {
        now += ms(10);
        let d = crash_and_recover(&mut p, now);
        now += d;
    }
    assert_eq!(p.restarts(), 5);
    // The sixth crash within 60 s exceeds the limit.
    assert_eq!(p.handle(Event::Exited, now + ms(1)), Some(Action::GiveUp));
    assert_eq!(p.state(), ProcState::Failed);
    assert_eq!(p.handle(Event::BackoffElapsed, now + ms(2)), None);
    assert_eq!(p.handle(Event::Exited, now + ms(3)), None);
    assert_eq!(p.state(), ProcState::Failed);
    // A manual restart revives it with a fresh history.
    assert_eq!(
        p.handle(Event::ManualRestart, now + ms(4)),
        Some(Action::Spawn)
    );
    assert_eq!(p.state(), ProcState::Starting);
    p.handle(Event::Ready, now + ms(5));
    assert_eq!(crash_and_recover(&mut p, now + ms(6)), ms(100));
}

#[test]
fn crashes_outside_the_window_are_forgotten() {
    let t0 = Instant::now();
    let mut p = RestartPolicy::new(PolicyConfig {
        max_restarts: 2,
        ..PolicyConfig::default()
    });
    // An instance that never becomes ready never earns the healthy reset, so only the
    // sliding window can forget old crashes.
    p.handle(Event::Start, t0);
    assert_eq!(
        p.handle(Event::Exited, t0 + ms(1)),
        Some(Action::ScheduleRestart(ms(100)))
    );
    p.handle(Event::BackoffElapsed, t0 + ms(101));
    assert_eq!(
        p.handle(Event::Exited, t0 + ms(200)),
        Some(Action::ScheduleRestart(ms(200)))
    );
    p.handle(Event::BackoffElapsed, t0 + ms(400));
    // Both earlier crashes are older than 60 s: this is the only one in the window.
    assert_eq!(
        p.handle(Event::Exited, t0 + Duration::from_secs(61)),
        Some(Action::ScheduleRestart(ms(400)))
    );
}

#[test]
fn crash_while_starting_counts_like_any_crash() {
    let t0 = Instant::now();
    let mut p = RestartPolicy::new(PolicyConfig::default());
    p.handle(Event::Start, t0);
    let mut now = t0;
    for expected in [100, 200, 400, 800, 1600] {
        now += ms(1);
        assert_eq!(
            p.handle(Event::Exited, now),
            Some(Action::ScheduleRestart(ms(expected)))
        );
        now += ms(expected);
        assert_eq!(p.handle(Event::BackoffElapsed, now), Some(Action::Spawn));
    }
    assert_eq!(p.handle(Event::Exited, now + ms(1)), Some(Action::GiveUp));
}

#[test]
fn manual_restarts_do_not_count_against_the_limit() {
    let t0 = Instant::now();
    let mut p = running(t0);
    let mut now = t0;
    for _ in 0..20 {
        now += ms(10);
        assert_eq!(p.handle(Event::ManualRestart, now), Some(Action::Terminate));
        assert_eq!(p.state(), ProcState::Stopping);
        assert_eq!(p.handle(Event::Exited, now), Some(Action::Spawn));
        assert_eq!(p.handle(Event::Ready, now), None);
    }
    assert_eq!(p.restarts(), 20);
    assert_eq!(p.state(), ProcState::Running);
    // Nor do they inflate the backoff.
    assert_eq!(crash_and_recover(&mut p, now + ms(1)), ms(100));
}

#[test]
fn manual_restart_during_backoff_spawns_at_once() {
    let t0 = Instant::now();
    let mut p = running(t0);
    assert!(matches!(
        p.handle(Event::Exited, t0 + ms(1)),
        Some(Action::ScheduleRestart(_))
    ));
    assert_eq!(
        p.handle(Event::ManualRestart, t0 + ms(2)),
        Some(Action::Spawn)
    );
    // The stale backoff timer is ignored.
    assert_eq!(p.handle(Event::BackoffElapsed, t0 + ms(100)), None);
    assert_eq!(p.state(), ProcState::Starting);
}

#[test]
fn ready_timeout_kills_and_the_exit_is_a_crash() {
    let t0 = Instant::now();
    let mut p = RestartPolicy::new(PolicyConfig::default());
    p.handle(Event::Start, t0);
    assert_eq!(p.handle(Event::ReadyTimeout, t0), Some(Action::Kill));
    assert_eq!(
        p.handle(Event::Exited, t0 + ms(1)),
        Some(Action::ScheduleRestart(ms(100)))
    );
}

#[test]
fn stop_brings_down_and_keeps_down() {
    let t0 = Instant::now();
    let mut p = running(t0);
    assert_eq!(p.handle(Event::Stop, t0), Some(Action::Terminate));
    assert_eq!(p.state(), ProcState::Stopping);
    assert_eq!(p.handle(Event::Exited, t0), None);
    assert_eq!(p.state(), ProcState::Stopped);

    // Stop wins over a pending manual restart.
    let mut p = running(t0);
    p.handle(Event::ManualRestart, t0);
    p.handle(Event::Stop, t0);
    assert_eq!(p.handle(Event::Exited, t0), None);
    assert_eq!(p.state(), ProcState::Stopped);

    // Stop during backoff cancels the restart.
    let mut p = running(t0);
    p.handle(Event::Exited, t0);
    assert_eq!(p.handle(Event::Stop, t0), None);
    assert_eq!(p.handle(Event::BackoffElapsed, t0 + ms(100)), None);
    assert_eq!(p.state(), ProcState::Stopped);
}

#[test]
fn state_names_match_the_proto() {
    let names: Vec<_> = [
        ProcState::Starting,
        ProcState::Running,
        ProcState::Backoff,
        ProcState::Failed,
        ProcState::Stopping,
        ProcState::Stopped,
    ]
    .iter()
    .map(|s| s.as_str())
    .collect();
    assert_eq!(
        names,
        ["starting", "running", "backoff", "failed", "stopping", "stopped"]
    );
}

#[test]
fn status_reports_the_scheduled_backoff_and_the_crashes_in_the_window() {
    // Issue 24 §5: what `snowpea supervisor status` and `system.info` show.
    let t0 = Instant::now();
    let mut p = running(t0);
    assert_eq!(p.current_backoff(), ms(100), "the next crash's backoff");
    assert_eq!(p.restarts_in_window(t0), 0);
    let mut now = t0;
    for _ in 0..3 {
        now += ms(10);
        crash_and_recover(&mut p, now);
    }
    assert_eq!(p.restarts_in_window(now), 3);
    let Some(Action::ScheduleRestart(d)) = p.handle(Event::Exited, now + ms(1)) else {
        panic!("expected a scheduled restart");
    };
    assert_eq!(p.state(), ProcState::Backoff);
    assert_eq!(d, ms(800));
    assert_eq!(
        p.current_backoff(),
        d,
        "while backing off: the scheduled delay"
    );
    assert_eq!(p.restarts_in_window(now + ms(1)), 4);
    assert_eq!(p.max_restarts(), 5);
    // The window slides: a minute later none of them counts any more.
    assert_eq!(p.restarts_in_window(now + Duration::from_secs(61)), 0);
}
