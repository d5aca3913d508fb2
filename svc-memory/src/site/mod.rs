//! Site memory (spec `site.*`, 1.9.0/1.15.0): what a browser host learned about a site's
//! pages, per browser profile, keyed by (origin, pageType). [`validate`] checks what a put
//! may store, [`pattern`] matches `urlPattern`s, [`auth`] decides the profile of a call;
//! this file holds the operations, each one transaction.

use snowpea_proto::memory::v1::site_list_result::Site;
use snowpea_proto::memory::v1::site_put_params;
use snowpea_proto::memory::v1::SiteEntry as Entry;

use crate::error::{Error, Result};
use crate::store::{sites, Store};

pub mod auth;
pub mod pattern;
pub mod pii;
pub mod validate;

/// Most entries one origin holds in one profile.
pub const MAX_ENTRIES_PER_ORIGIN: usize = 30;
/// Most origins one profile holds; past it the least recently verified origin is dropped.
pub const MAX_ORIGINS: usize = 1000;
/// Default and largest `site.list` page.
pub const LIST_PAGE: (usize, usize) = (50, 500);

/// The origin param, normalised; `invalid_params` naming `params.origin` otherwise.
pub fn origin_param(origin: &str) -> Result<String> {
    pattern::normalize_origin(origin).ok_or_else(|| {
        Error::invalid(
            "params.origin",
            "must be an http(s) origin such as https://www.example.com",
        )
    })
}

/// `site.put`: validates and upserts by (origin, pageType). Returns (created, entryId).
pub fn put(
    store: &Store,
    profile: &str,
    origin: &str,
    e: site_put_params::Entry,
) -> Result<(bool, String)> {
    let origin = origin_param(origin)?;
    validate::check_entry(&e)?;
    let now = snowpea_common::time::now_iso();
    store.write(|tx| {
        let existing = sites::by_page_type(tx, profile, &origin, &e.page_type)?;
        if existing.is_none() && sites::count_in_origin(tx, profile, &origin)? >= MAX_ENTRIES_PER_ORIGIN {
            return Err(Error::invalid(
                "params.origin",
                format!("{origin} already has {MAX_ENTRIES_PER_ORIGIN} entries in this profile; delete one first"),
            ));
        }
        let created = existing.is_none();
        let prev = existing.unwrap_or_else(|| Entry {
            entry_id: snowpea_common::ids::new_id("site"),
            created_at: now.clone(),
            ..Default::default()
        });
        let entry = Entry {
            actions: e.actions.clone(),
            created_at: prev.created_at,
            entry_id: prev.entry_id,
            failure_count: prev.failure_count,
            fingerprint: e.fingerprint.clone(),
            flows: e.flows.clone(),
            landmarks: e.landmarks.clone(),
            // A put counts as a success: it verifies the entry (the caller may carry the
            // time it verified it).
            last_verified: e.last_verified.clone().unwrap_or_else(|| now.clone()),
            origin: origin.clone(),
            page_type: e.page_type.clone(),
            pitfalls: e.pitfalls.clone(),
            recipes: e.recipes.clone(),
            stale: false,
            success_count: prev.success_count + 1,
            summary: e.summary.clone(),
            url_pattern: e.url_pattern.clone(),
        };
        sites::save(tx, profile, &entry)?;
        if created {
            let dropped = sites::evict(tx, profile, &origin, MAX_ORIGINS)?;
            if !dropped.is_empty() {
                tracing::info!(profile, dropped = ?dropped, "site memory full; least recently verified origins dropped");
            }
        }
        Ok((created, entry.entry_id))
    })
}

/// `site.get`: entries of `origin`, only `page_type`'s when given, only those whose
/// urlPattern matches `path` when given; most specific first, stale ones included.
pub fn get(
    store: &Store,
    profile: &str,
    origin: &str,
    page_type: Option<&str>,
    path: Option<&str>,
) -> Result<Vec<Entry>> {
    let origin = origin_param(origin)?;
    let mut entries = store.read(|c| sites::of_origin(c, profile, &origin))?;
    entries.retain(|e| {
        page_type.is_none_or(|t| e.page_type == t)
            && path.is_none_or(|p| pattern::matches(&e.url_pattern, p))
    });
    entries.sort_by(|a, b| {
        pattern::most_specific_first(&a.url_pattern, &b.url_pattern)
            .then(a.page_type.cmp(&b.page_type))
    });
    Ok(entries)
}

/// `site.mark`: `ok` counts a success, sets lastVerified and clears stale; `stale` counts a
/// failure and flags the entry until the next put.
pub fn mark(
    store: &Store,
    profile: &str,
    origin: &str,
    entry_id: &str,
    outcome: &str,
) -> Result<Entry> {
    let origin = origin_param(origin)?;
    if !matches!(outcome, "ok" | "stale") {
        return Err(Error::invalid("params.outcome", "must be ok or stale"));
    }
    store.write(|tx| {
        let mut e = sites::by_id(tx, profile, &origin, entry_id)?
            .ok_or_else(|| Error::NotFound(format!("no site entry {entry_id} for {origin}")))?;
        if outcome == "ok" {
            e.success_count += 1;
            e.last_verified = snowpea_common::time::now_iso();
            e.stale = false;
        } else {
            e.failure_count += 1;
            e.stale = true;
        }
        sites::save(tx, profile, &e)?;
        Ok(e)
    })
}

/// `site.markPart`: counts one use of a flow (ok: stats.ok+1 and lastRun; miss:
/// stats.missed+1) or a recipe (ok: hits+1, day, not stale; miss: misses+1; stale:
/// misses+1 and stale). The entry's own counters, stale flag and lastVerified are
/// untouched. `not_found` for an unknown entry, flow or recipe.
pub fn mark_part(
    store: &Store,
    profile: &str,
    origin: &str,
    entry_id: &str,
    part: &str,
    name: &str,
    outcome: &str,
) -> Result<Entry> {
    let origin = origin_param(origin)?;
    match (part, outcome) {
        ("flow", "ok" | "miss") | ("recipe", "ok" | "miss" | "stale") => {}
        ("flow", _) => {
            return Err(Error::invalid(
                "params.outcome",
                "a flow's outcome is ok or miss",
            ))
        }
        ("recipe", _) => {
            return Err(Error::invalid(
                "params.outcome",
                "a recipe's outcome is ok, miss or stale",
            ))
        }
        _ => return Err(Error::invalid("params.part", "must be flow or recipe")),
    }
    store.write(|tx| {
        let mut e = sites::by_id(tx, profile, &origin, entry_id)?
            .ok_or_else(|| Error::NotFound(format!("no site entry {entry_id} for {origin}")))?;
        if part == "flow" {
            let f =
                e.flows.iter_mut().find(|f| f.name == name).ok_or_else(|| {
                    Error::NotFound(format!("entry {entry_id} has no flow {name:?}"))
                })?;
            let stats = f.stats.get_or_insert_with(Default::default);
            if outcome == "ok" {
                stats.ok += 1;
                stats.last_run = Some(snowpea_common::time::now_iso());
            } else {
                stats.missed += 1;
            }
        } else {
            let r = e
                .recipes
                .iter_mut()
                .find(|r| r.name == name)
                .ok_or_else(|| {
                    Error::NotFound(format!("entry {entry_id} has no recipe {name:?}"))
                })?;
            let stats = r.stats.get_or_insert_with(Default::default);
            match outcome {
                "ok" => {
                    stats.hits += 1;
                    // `day`: the day of the last hit, in days since the Unix epoch (UTC).
                    stats.day = Some(snowpea_common::time::now_ms().div_euclid(86_400_000));
                    r.stale = false;
                }
                "miss" => stats.misses += 1,
                _ => {
                    stats.misses += 1;
                    r.stale = true;
                }
            }
        }
        sites::save(tx, profile, &e)?;
        Ok(e)
    })
}

/// `site.delete`: one entry or every entry of `origin`; returns how many were removed.
pub fn delete(store: &Store, profile: &str, origin: &str, entry_id: Option<&str>) -> Result<u64> {
    let origin = origin_param(origin)?;
    store.write(|tx| sites::delete(tx, profile, &origin, entry_id))
}

/// `site.list`: one page of the profile's sites by origin, and the cursor of the next
/// page (`None` on the last). The cursor is opaque (hex of the last origin returned).
pub fn list(
    store: &Store,
    profile: &str,
    only: Option<&str>,
    cursor: Option<&str>,
    limit: usize,
) -> Result<(Vec<Site>, Option<String>)> {
    let only = only.map(origin_param).transpose()?;
    let after = match cursor.filter(|c| !c.is_empty()) {
        Some(c) => Some(
            hex::decode(c)
                .ok()
                .and_then(|b| String::from_utf8(b).ok())
                .ok_or_else(|| Error::invalid("params.cursor", "not a cursor from site.list"))?,
        ),
        None => None,
    };
    let limit = if limit == 0 {
        LIST_PAGE.0
    } else {
        limit.min(LIST_PAGE.1)
    };
    let mut page = store
        .read(|c| sites::origins_page(c, profile, only.as_deref(), after.as_deref(), limit + 1))?;
    let more = page.len() > limit;
    page.truncate(limit);
    let next = if more {
        page.last().map(|(o, _)| hex::encode(o))
    } else {
        None
    };
    let sites = page
        .into_iter()
        .map(|(origin, entries)| Site {
            entries: entries.len() as i64,
            failure_count: entries.iter().map(|e| e.failure_count).sum(),
            last_verified: entries
                .iter()
                .map(|e| e.last_verified.clone())
                .max()
                .unwrap_or_default(),
            origin,
            page_types: entries.iter().map(|e| e.page_type.clone()).collect(),
            stale: entries.iter().filter(|e| e.stale).count() as i64,
            success_count: entries.iter().map(|e| e.success_count).sum(),
        })
        .collect();
    Ok((sites, next))
}

#[cfg(test)]
#[path = "site_tests.rs"]
mod tests;
