//! Schedule specs (issue 5 "Schedule specs"): what `job.schedule`, `job.update` and
//! `job.preview` accept, and when a job fires next.
//!
//! [`parse`] reads a spec ([`grammar`] holds the English and Korean forms) into a
//! [`Schedule`]: a cron rule (5 or 6 fields, via `croner`; recurring phrases such as
//! `daily at 9:00` become cron rules too), a fixed interval anchored at the job's creation, or
//! a one-shot at a UTC instant. [`Schedule::normalized`] is the canonical text the protocol
//! reports (`job.preview` `normalized`) and the form stored in the database: reading it back
//! with [`Schedule::from_normalized`] gives the same schedule whatever the clock says.
//!
//! Times without an offset are read in the scheduler's time zone (`scheduler.timeZone`); cron
//! rules are evaluated in the zone the job was created with. Daylight-saving transitions behave
//! as cron does on a real system (croner implements the Vixie rules): a fixed-time job whose
//! wall-clock time is skipped by a spring-forward gap runs at the first instant after the gap,
//! one whose time repeats in a fall-back overlap runs once (the earlier instant), and
//! wildcard/stepped jobs (`0 * * * *`) run on every real instant that matches. A one-shot
//! civil time inside a gap is moved forward by the gap's length, one inside an overlap takes the
//! earlier instant (jiff's "compatible" disambiguation, as RFC 5545 does).

pub mod grammar;

use jiff::tz::TimeZone;
use jiff::{SignedDuration, Timestamp};

/// Why a spec was refused; the message says why, for `invalid_params` on `spec`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct SpecError(pub String);

/// What a spec turned into (protocol `kind`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// A cron rule.
    Cron,
    /// A one-shot.
    Once,
    /// A fixed interval.
    Interval,
}

impl Kind {
    /// The protocol's word: `cron`, `once` or `interval`.
    pub fn as_str(self) -> &'static str {
        match self {
            Kind::Cron => "cron",
            Kind::Once => "once",
            Kind::Interval => "interval",
        }
    }
}

/// A parsed schedule.
#[derive(Debug, Clone)]
pub enum Schedule {
    /// A cron rule, evaluated in a time zone.
    Cron {
        /// The rule, as croner parsed it.
        cron: Box<croner::Cron>,
        /// The canonical expression (fields joined by one space).
        expr: String,
    },
    /// Every `every` after the job's anchor (its creation, or its last resume).
    Interval {
        /// The period, whole seconds, at least one.
        every: SignedDuration,
    },
    /// Once, at an instant.
    Once {
        /// When it fires (whole seconds).
        at: Timestamp,
    },
}

/// The croner parser: 5 or 6 fields (optional seconds), no year field, Vixie day-of-month /
/// day-of-week OR semantics.
fn cron_parser() -> croner::parser::CronParser {
    croner::parser::CronParser::builder()
        .seconds(croner::parser::Seconds::Optional)
        .year(croner::parser::Year::Disallowed)
        .build()
}

impl Schedule {
    /// A cron rule from an expression (5 or 6 fields, or an `@daily`-style nickname).
    pub fn cron(expr: &str) -> Result<Schedule, SpecError> {
        Schedule::cron_shown(expr, expr)
    }

    /// [`Schedule::cron`], an error quoting `shown` (the user's text) instead of `expr`.
    pub fn cron_shown(expr: &str, shown: &str) -> Result<Schedule, SpecError> {
        let expr = expr.split_whitespace().collect::<Vec<_>>().join(" ");
        let cron = cron_parser().parse(&expr).map_err(|e| {
            SpecError(format!(
                "not a valid cron expression {}: {}",
                quote(shown),
                clip(&e.to_string())
            ))
        })?;
        Ok(Schedule::Cron {
            cron: Box::new(cron),
            expr,
        })
    }

    /// What kind of schedule this is.
    pub fn kind(&self) -> Kind {
        match self {
            Schedule::Cron { .. } => Kind::Cron,
            Schedule::Interval { .. } => Kind::Interval,
            Schedule::Once { .. } => Kind::Once,
        }
    }

    /// The canonical text (protocol `normalized`): the cron expression for `cron`,
    /// `every <n>s` for `interval`, `once at <UTC ISO>` for `once`.
    pub fn normalized(&self) -> String {
        match self {
            Schedule::Cron { expr, .. } => expr.clone(),
            Schedule::Interval { every } => format!("every {}s", every.as_secs()),
            Schedule::Once { at } => format!("once at {}", iso(*at)),
        }
    }

    /// Reads back what [`Schedule::normalized`] wrote.
    pub fn from_normalized(kind: Kind, normalized: &str) -> Result<Schedule, SpecError> {
        let bad = || SpecError(format!("corrupt stored schedule {normalized:?}"));
        match kind {
            Kind::Cron => Schedule::cron(normalized),
            Kind::Interval => {
                let secs: i64 = normalized
                    .strip_prefix("every ")
                    .and_then(|s| s.strip_suffix('s'))
                    .and_then(|s| s.parse().ok())
                    .filter(|s| *s > 0)
                    .ok_or_else(bad)?;
                Ok(Schedule::Interval {
                    every: SignedDuration::from_secs(secs),
                })
            }
            Kind::Once => {
                let at = normalized
                    .strip_prefix("once at ")
                    .and_then(|s| s.parse().ok())
                    .ok_or_else(bad)?;
                Ok(Schedule::Once { at })
            }
        }
    }

    /// The first occurrence strictly after `after`, or `None` when there is none. `anchor` is
    /// the interval's origin (occurrences are `anchor + k·every`, k ≥ 1); `tz` is the zone a
    /// cron rule is read in.
    pub fn next_after(
        &self,
        after: Timestamp,
        anchor: Timestamp,
        tz: &TimeZone,
    ) -> Option<Timestamp> {
        match self {
            Schedule::Cron { cron, .. } => {
                let from = after.to_zoned(tz.clone());
                cron.find_next_occurrence(&from, false)
                    .ok()
                    .map(|z| z.timestamp())
            }
            Schedule::Interval { every } => {
                // Checked throughout: a stored period may be absurdly long.
                let period = i64::try_from(every.as_millis()).ok()?.max(1);
                let since = after
                    .as_millisecond()
                    .checked_sub(anchor.as_millisecond())?;
                let k = if since < 0 { 1 } else { since / period + 1 };
                Timestamp::from_millisecond(
                    anchor
                        .as_millisecond()
                        .checked_add(k.checked_mul(period)?)?,
                )
                .ok()
            }
            Schedule::Once { at } => (*at > after).then_some(*at),
        }
    }

    /// The last occurrence at or before `t`, or `None` when there is none.
    pub fn prev_at_or_before(
        &self,
        t: Timestamp,
        anchor: Timestamp,
        tz: &TimeZone,
    ) -> Option<Timestamp> {
        match self {
            Schedule::Cron { cron, .. } => cron
                .find_previous_occurrence(&t.to_zoned(tz.clone()), true)
                .ok()
                .map(|z| z.timestamp()),
            Schedule::Interval { every } => {
                let period = i64::try_from(every.as_millis()).ok()?.max(1);
                let k = t
                    .as_millisecond()
                    .checked_sub(anchor.as_millisecond())?
                    .div_euclid(period);
                if k < 1 {
                    return None;
                }
                let at = anchor
                    .as_millisecond()
                    .checked_add(k.checked_mul(period)?)?;
                Timestamp::from_millisecond(at).ok()
            }
            Schedule::Once { at } => (*at <= t).then_some(*at),
        }
    }
}

/// A spec as `job.schedule` reads it: the schedule and, for a preview, its first firing.
#[derive(Debug, Clone)]
pub struct Parsed {
    /// The schedule.
    pub schedule: Schedule,
    /// The interval anchor to store with the job (the parse time, whole seconds).
    pub anchor: Timestamp,
    /// First firing after the parse time.
    pub next_run: Timestamp,
}

/// Reads `spec` at `now` in zone `tz`. Refuses a spec that cannot be read or that would never
/// fire, with a message saying why.
pub fn parse(spec: &str, now: Timestamp, tz: &TimeZone) -> Result<Parsed, SpecError> {
    let anchor = trunc_secs(now);
    let schedule = grammar::read(spec, anchor, tz)?;
    let next_run = schedule.next_after(now, anchor, tz).ok_or_else(|| {
        let shown = quote(spec.trim());
        SpecError(match &schedule {
            Schedule::Once { at } => {
                format!("{shown} would never fire: {} is in the past", iso(*at))
            }
            _ => format!("{shown} would never fire: no date matches it"),
        })
    })?;
    Ok(Parsed {
        schedule,
        anchor,
        next_run,
    })
}

/// The scheduler's time zone from the `scheduler.timeZone` setting (an IANA name), else the
/// system's zone, else UTC.
pub fn time_zone(setting: Option<&str>) -> Result<TimeZone, SpecError> {
    match setting.map(str::trim).filter(|s| !s.is_empty()) {
        Some(name) => TimeZone::get(name).map_err(|e| {
            SpecError(format!(
                "scheduler.timeZone {name:?} is not a known IANA time zone: {e}"
            ))
        }),
        None => Ok(TimeZone::try_system().unwrap_or(TimeZone::UTC)),
    }
}

/// Most characters of a user's value an error message quotes.
pub const QUOTE_CHARS: usize = 80;

/// `value` quoted for an error message: Debug-quoted, at most its first [`QUOTE_CHARS`]
/// characters, with `…` after the quote when it was cut.
pub fn quote(value: &str) -> String {
    match value.char_indices().nth(QUOTE_CHARS) {
        Some((cut, _)) => format!("{:?}…", &value[..cut]),
        None => format!("{value:?}"),
    }
}

/// `text` cut to at most [`QUOTE_CHARS`] characters (`…` when cut), for a message that repeats
/// another error's text, which may echo the user's value.
pub fn clip(text: &str) -> String {
    match text.char_indices().nth(QUOTE_CHARS) {
        Some((cut, _)) => format!("{}…", &text[..cut]),
        None => text.to_owned(),
    }
}

/// UTC ISO-8601 with whole seconds, e.g. `2026-03-08T07:00:00Z` (how times are reported).
pub fn iso(t: Timestamp) -> String {
    trunc_secs(t).to_string()
}

/// `t` without its sub-second part (occurrences are whole seconds).
pub fn trunc_secs(t: Timestamp) -> Timestamp {
    Timestamp::from_second(t.as_second()).expect("in range")
}

#[cfg(test)]
#[path = "spec_tests.rs"]
mod tests;
