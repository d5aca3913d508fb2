//! The usage index of `usage.summary` (issue 15): `usage_calls` (one row per stored `usage`
//! event), `usage_daily` (per UTC day, session, provider and model) and `usage_daily_models`
//! (per UTC day, provider and model: what every grouping but `session` reads), all kept by
//! the triggers of migration 4 in the transaction that commits or deletes the event.

use rusqlite::{params, Connection};

/// How rows are grouped (the SQL key expression per table).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Group {
    /// By vendor.
    Provider,
    /// By `provider:model`.
    Model,
    /// By session id.
    Session,
    /// By UTC day (`YYYY-MM-DD`).
    Day,
}

impl Group {
    fn key(self, day_column: &str) -> String {
        match self {
            Group::Provider => "provider".into(),
            Group::Model => "provider || ':' || model".into(),
            Group::Session => "session_id".into(),
            Group::Day => day_column.into(),
        }
    }
}

/// One group's totals.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Totals {
    /// The group key.
    pub key: String,
    /// Model calls.
    pub calls: i64,
    /// Input tokens.
    pub input_tokens: i64,
    /// Output tokens.
    pub output_tokens: i64,
}

/// What to add up: whole UTC days `[days.0, days.1)` from `usage_daily`, and the single
/// calls with `ts` in each of `edges` (`[from, to)`, ISO timestamps) from `usage_calls`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Window {
    /// Whole days, `YYYY-MM-DD`, start inclusive, end exclusive; `None` reads no day rows.
    pub days: Option<(String, String)>,
    /// Partial ranges read call by call.
    pub edges: Vec<(String, String)>,
}

/// The totals per group over `window`, in no particular order.
pub fn summary(conn: &Connection, group: Group, window: &Window) -> rusqlite::Result<Vec<Totals>> {
    let mut by_key: std::collections::HashMap<String, Totals> = Default::default();
    let mut add = |t: Totals| {
        let e = by_key.entry(t.key.clone()).or_insert_with(|| Totals {
            key: t.key.clone(),
            ..Default::default()
        });
        e.calls += t.calls;
        e.input_tokens += t.input_tokens;
        e.output_tokens += t.output_tokens;
    };
    let read = |r: &rusqlite::Row<'_>| {
        Ok(Totals {
            key: r.get(0)?,
            calls: r.get(1)?,
            input_tokens: r.get(2)?,
            output_tokens: r.get(3)?,
        })
    };
    if let Some((from, to)) = &window.days {
        let table = match group {
            Group::Session => "usage_daily",
            _ => "usage_daily_models",
        };
        let sql = format!(
            "SELECT {k}, SUM(calls), SUM(input_tokens), SUM(output_tokens) FROM {table} \
             WHERE day >= ?1 AND day < ?2 GROUP BY 1",
            k = group.key("day")
        );
        let mut stmt = conn.prepare_cached(&sql)?;
        for t in stmt.query_map(params![from, to], read)? {
            add(t?);
        }
    }
    let sql = format!(
        "SELECT {k}, COUNT(*), SUM(input_tokens), SUM(output_tokens) FROM usage_calls \
         WHERE ts >= ?1 AND ts < ?2 GROUP BY 1",
        k = group.key("substr(ts, 1, 10)")
    );
    let mut stmt = conn.prepare_cached(&sql)?;
    for (from, to) in &window.edges {
        for t in stmt.query_map(params![from, to], read)? {
            add(t?);
        }
    }
    Ok(by_key.into_values().collect())
}
