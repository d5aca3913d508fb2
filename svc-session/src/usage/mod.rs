//! The `Usage` component: `usage.summary` (spec "usage.summary", issue 15) — token totals of
//! the stored `usage` events, grouped by provider, `provider:model`, session or UTC day, over
//! the window `since` (inclusive) to `until` (exclusive), largest total (input + output) first,
//! with grand totals.
//!
//! It reads the usage index ([`crate::store::usage`]) that triggers keep in the transaction
//! committing each event, never the event JSON: whole UTC days inside the window come from the
//! per-day totals and only the partial days at its edges are added call by call, so a summary
//! over a million events reads a few thousand rows (docs/PERFORMANCE.md "usage.summary").

use jiff::civil::Date;
use jiff::{Timestamp, ToSpan};
use snowpea_proto::session::v1 as pb;

use crate::store::usage::{self as index, Group, Window};
use crate::store::Store;
use snowpea_session_error::{Error, Result};

/// `usage.summary` over the session database.
#[derive(Debug, Clone)]
pub struct Usage {
    store: Store,
}

impl Usage {
    /// The component reading `store`.
    pub fn new(store: Store) -> Self {
        Usage { store }
    }

    /// `usage.summary{groupBy, since, until}`. `groupBy` defaults to `provider`; `since` and
    /// `until` are UTC ISO-8601 timestamps (an offset is converted, a bare `YYYY-MM-DD` is
    /// midnight UTC). Errors: `invalid_params` naming `params.groupBy`, `params.since` or
    /// `params.until` (unparseable, or `until` before `since`).
    pub async fn summary(&self, p: pb::UsageSummaryParams) -> Result<pb::UsageSummaryResult> {
        let (group, name) = match p.group_by.as_str() {
            "" | "provider" => (Group::Provider, "provider"),
            "model" => (Group::Model, "model"),
            "session" => (Group::Session, "session"),
            "day" => (Group::Day, "day"),
            other => {
                return Err(Error::invalid(
                    "params.groupBy",
                    format!("unknown grouping {other:?}: use provider, model, session or day"),
                ))
            }
        };
        let since = parse_bound("params.since", p.since.as_deref())?;
        let until = parse_bound("params.until", p.until.as_deref())?;
        if let (Some(s), Some(u)) = (since, until) {
            if u < s {
                return Err(Error::invalid("params.until", "is before params.since"));
            }
        }
        let window = window(since, until);
        let mut rows = self
            .store
            .read("usage.summary", move |c| index::summary(c, group, &window))
            .await?;
        rows.sort_by(|a, b| {
            (b.input_tokens + b.output_tokens)
                .cmp(&(a.input_tokens + a.output_tokens))
                .then_with(|| a.key.cmp(&b.key))
        });
        Ok(pb::UsageSummaryResult {
            group_by: name.to_owned(),
            input_tokens: rows.iter().map(|r| r.input_tokens).sum(),
            output_tokens: rows.iter().map(|r| r.output_tokens).sum(),
            rows: rows
                .into_iter()
                .map(|r| pb::usage_summary_result::Row {
                    calls: r.calls,
                    input_tokens: r.input_tokens,
                    key: r.key,
                    output_tokens: r.output_tokens,
                })
                .collect(),
        })
    }
}

/// Parses a window bound; empty or absent is unbounded.
fn parse_bound(field: &str, s: Option<&str>) -> Result<Option<Timestamp>> {
    let Some(s) = s.map(str::trim).filter(|s| !s.is_empty()) else {
        return Ok(None);
    };
    if let Ok(t) = s.parse::<Timestamp>() {
        return Ok(Some(t));
    }
    // No offset: the spec's bounds are UTC.
    if let Ok(dt) = s.parse::<jiff::civil::DateTime>() {
        if let Ok(z) = dt.to_zoned(jiff::tz::TimeZone::UTC) {
            return Ok(Some(z.timestamp()));
        }
    }
    Err(Error::invalid(
        field,
        format!("{s:?} is not a UTC ISO-8601 time (e.g. 2026-01-31T00:00:00Z)"),
    ))
}

/// The stored form of `t` (`Timestamp` with milliseconds, as events are stamped), rounded up
/// to the next millisecond so `ts >= bound` / `ts < bound` keep their meaning.
fn stored(t: Timestamp) -> String {
    let ns = t.as_nanosecond();
    let ms = ns.div_euclid(1_000_000) + i128::from(ns.rem_euclid(1_000_000) != 0);
    let t = Timestamp::from_millisecond(ms as i64).unwrap_or(t);
    format!("{t:.3}")
}

fn day_of(t: Timestamp) -> Date {
    t.to_zoned(jiff::tz::TimeZone::UTC).date()
}

fn midnight(d: Date) -> Option<Timestamp> {
    d.to_zoned(jiff::tz::TimeZone::UTC)
        .ok()
        .map(|z| z.timestamp())
}

/// Splits `[since, until)` into whole UTC days (read from the per-day totals) and the
/// partial days at its edges (read call by call).
pub(crate) fn window(since: Option<Timestamp>, until: Option<Timestamp>) -> Window {
    const LOW: &str = "";
    const HIGH: &str = "~"; // sorts after every digit
                            // First whole day: since's day when since is its midnight, else the day after.
    let first = since.map(|s| {
        let d = day_of(s);
        if midnight(d) == Some(s) {
            d
        } else {
            d.checked_add(1.day()).unwrap_or(d)
        }
    });
    // End of the whole days (exclusive): until's day.
    let end = until.map(day_of);
    let whole = match (first, end) {
        (Some(f), Some(e)) => f < e,
        _ => true,
    };
    if !whole {
        return Window {
            days: None,
            edges: vec![(
                since.map(stored).unwrap_or_else(|| LOW.into()),
                until.map(stored).unwrap_or_else(|| HIGH.into()),
            )],
        };
    }
    let mut edges = vec![];
    if let (Some(s), Some(f)) = (since, first.and_then(midnight)) {
        if s < f {
            edges.push((stored(s), stored(f)));
        }
    }
    if let (Some(u), Some(e)) = (until, end.and_then(midnight)) {
        if e < u {
            edges.push((stored(e), stored(u)));
        }
    }
    Window {
        days: Some((
            first.map(|d| d.to_string()).unwrap_or_else(|| LOW.into()),
            end.map(|d| d.to_string()).unwrap_or_else(|| HIGH.into()),
        )),
        edges,
    }
}

#[cfg(test)]
#[path = "usage_tests.rs"]
mod tests;
