//! `site.put` validation (spec `site.put`): the entry's schema, no XPath, no values on
//! login fields, no strings that look like personal data or credentials, 24 KB per entry.
//! Every refusal is `invalid_params` naming the field, e.g.
//! `params.entry.actions[2].locators[0].value`.

use std::collections::HashSet;
use std::sync::LazyLock;

use prost::Message;
use prost_types::value::Kind;
use regex::Regex;
use snowpea_proto::memory::v1::site_put_params::Entry;
use snowpea_proto::memory::v1::SiteAction;

use super::pattern;
use super::pii;
use crate::error::{Error, Result};

/// Largest entry, in bytes of its JSON (24 KB since protocol 1.15.0).
pub const MAX_ENTRY_BYTES: usize = 24 * 1024;

const KINDS: &[&str] = &["click", "fill", "select", "toggle", "submit"];
const LOCATOR_BY: &[&str] = &["role", "label", "text", "placeholder", "testid", "css"];
const VERBS: &[&str] = &["fill", "click", "select", "enter"];
const EXPECT: &[&str] = &["page", "update"];

static XPATH_AXIS: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"(?i)\b(?:ancestor|descendant|following|preceding|parent|child|self|attribute|namespace)(?:-or-self|-sibling)?::").unwrap()
});

/// True when `selector` is XPath rather than CSS: starts like a path (`/`, `./`, `(/`),
/// names the `xpath` engine, uses an axis (`following-sibling::`), an attribute predicate
/// (`[@id=…]`) or XPath functions (`text()`, `contains(`).
pub fn is_xpath(selector: &str) -> bool {
    let s = selector.trim().to_ascii_lowercase();
    s.starts_with('/')
        || s.starts_with("./")
        || s.starts_with("../")
        || s.starts_with("(/")
        || s.starts_with("(./")
        || s.starts_with("xpath")
        || s.contains("[@")
        || s.contains("text()")
        || s.contains("contains(")
        || XPATH_AXIS.is_match(&s)
}

struct Check<'a> {
    seen: Vec<(String, &'a str, bool)>,
}

impl<'a> Check<'a> {
    /// Queues `s` at `field` for the personal-data scan.
    fn text(&mut self, field: String, s: &'a str) {
        self.seen.push((field, s, true));
    }
}

fn required(field: &str, s: &str) -> Result<()> {
    if s.trim().is_empty() {
        return Err(Error::invalid(field, "is required"));
    }
    Ok(())
}

fn one_of(field: &str, s: &str, allowed: &[&str]) -> Result<()> {
    if !allowed.contains(&s) {
        return Err(Error::invalid(
            field,
            format!("must be one of {}", allowed.join(", ")),
        ));
    }
    Ok(())
}

fn selector(field: &str, s: &str) -> Result<()> {
    required(field, s)?;
    if is_xpath(s) {
        return Err(Error::invalid(
            field,
            "XPath is not accepted; use a CSS selector or a role/label/text locator",
        ));
    }
    Ok(())
}

/// Validates `entry` (the `params.entry` of `site.put`).
pub fn check_entry(e: &Entry) -> Result<()> {
    let mut c = Check { seen: Vec::new() };
    required("params.entry.pageType", &e.page_type)?;
    if e.page_type.len() > 128 || e.page_type.chars().any(char::is_control) {
        return Err(Error::invalid(
            "params.entry.pageType",
            "must be at most 128 printable characters",
        ));
    }
    c.text("params.entry.pageType".into(), &e.page_type);
    pattern::check_pattern(&e.url_pattern)
        .map_err(|m| Error::invalid("params.entry.urlPattern", m))?;
    c.text("params.entry.urlPattern".into(), &e.url_pattern);
    c.text("params.entry.summary".into(), &e.summary);
    if let Some(t) = &e.last_verified {
        if t.parse::<jiff::Timestamp>().is_err() {
            return Err(Error::invalid(
                "params.entry.lastVerified",
                "must be a UTC ISO-8601 time",
            ));
        }
    }
    for (i, s) in e.landmarks.iter().enumerate() {
        c.text(format!("params.entry.landmarks[{i}]"), s);
    }
    for (i, s) in e.pitfalls.iter().enumerate() {
        c.text(format!("params.entry.pitfalls[{i}]"), s);
    }
    for (i, a) in e.actions.iter().enumerate() {
        check_action(&mut c, &format!("params.entry.actions[{i}]"), a)?;
    }
    let mut names = HashSet::new();
    for (i, f) in e.flows.iter().enumerate() {
        let at = format!("params.entry.flows[{i}]");
        required(&format!("{at}.name"), &f.name)?;
        if !names.insert(f.name.as_str()) {
            return Err(Error::invalid(format!("{at}.name"), "duplicate flow name"));
        }
        c.text(format!("{at}.name"), &f.name);
        if let Some(x) = &f.expect {
            one_of(&format!("{at}.expect"), x, EXPECT)?;
        }
        for (k, step) in f.steps.iter().enumerate() {
            check_step(&mut c, &format!("{at}.steps[{k}]"), step)?;
        }
    }
    let mut names = HashSet::new();
    for (i, r) in e.recipes.iter().enumerate() {
        let at = format!("params.entry.recipes[{i}]");
        required(&format!("{at}.name"), &r.name)?;
        if !names.insert(r.name.as_str()) {
            return Err(Error::invalid(
                format!("{at}.name"),
                "duplicate recipe name",
            ));
        }
        c.text(format!("{at}.name"), &r.name);
        selector(&format!("{at}.item"), &r.item)?;
        c.text(format!("{at}.item"), &r.item);
        if let Some(s) = &r.intent {
            c.text(format!("{at}.intent"), s);
        }
        if r.fields.is_empty() {
            return Err(Error::invalid(
                format!("{at}.fields"),
                "needs at least one field",
            ));
        }
        for (j, f) in r.fields.iter().enumerate() {
            let fat = format!("{at}.fields[{j}]");
            required(&format!("{fat}.name"), &f.name)?;
            selector(&format!("{fat}.selector"), &f.selector)?;
            c.text(format!("{fat}.name"), &f.name);
            c.text(format!("{fat}.selector"), &f.selector);
            if let Some(a) = &f.attr {
                c.text(format!("{fat}.attr"), a);
            }
        }
    }
    if let Some(fp) = &e.fingerprint {
        c.seen.push(("params.entry.fingerprint".into(), fp, false));
    }
    for (field, s, tokens) in &c.seen {
        if let Some(f) = pii::scan(s, *tokens) {
            return Err(Error::invalid(
                field.clone(),
                format!(
                    "looks like {}; site memory never stores personal data or credentials",
                    f.describe()
                ),
            ));
        }
    }
    let size = json_size(e);
    if size > MAX_ENTRY_BYTES {
        return Err(Error::invalid(
            "params.entry",
            format!("entry is {size} bytes; at most {MAX_ENTRY_BYTES} bytes (24 KB) per entry"),
        ));
    }
    Ok(())
}

fn check_action<'a>(c: &mut Check<'a>, at: &str, a: &'a SiteAction) -> Result<()> {
    required(&format!("{at}.name"), &a.name)?;
    c.text(format!("{at}.name"), &a.name);
    one_of(&format!("{at}.kind"), &a.kind, KINDS)?;
    if a.locators.is_empty() {
        return Err(Error::invalid(
            format!("{at}.locators"),
            "needs at least one locator",
        ));
    }
    for (j, l) in a.locators.iter().enumerate() {
        let lat = format!("{at}.locators[{j}]");
        one_of(&format!("{lat}.by"), &l.by, LOCATOR_BY)?;
        if a.login_field && l.value.as_deref().is_some_and(|v| !v.is_empty()) {
            // What a login field holds must never be stored; locate it by role/label/name.
            return Err(Error::invalid(
                format!("{lat}.value"),
                "login fields carry no values",
            ));
        }
        match l.by.as_str() {
            "role" if l.role.as_deref().is_none_or(str::is_empty) => {
                return Err(Error::invalid(
                    format!("{lat}.role"),
                    "is required for by: role",
                ))
            }
            "css" if !a.login_field => {
                selector(&format!("{lat}.value"), l.value.as_deref().unwrap_or(""))?;
            }
            _ => {}
        }
        for (name, v) in [("name", &l.name), ("role", &l.role), ("value", &l.value)] {
            if let Some(v) = v {
                if name == "value" && is_xpath(v) {
                    return Err(Error::invalid(
                        format!("{lat}.value"),
                        "XPath is not accepted; use a CSS selector",
                    ));
                }
                c.text(format!("{lat}.{name}"), v);
            }
        }
    }
    for (k, f) in a.frames.iter().enumerate() {
        let fat = format!("{at}.frames[{k}]");
        required(&format!("{fat}.origin"), &f.origin)?;
        required(&format!("{fat}.path"), &f.path)?;
        selector(&format!("{fat}.selector"), &f.selector)?;
        c.text(format!("{fat}.origin"), &f.origin);
        c.text(format!("{fat}.path"), &f.path);
        c.text(format!("{fat}.selector"), &f.selector);
    }
    Ok(())
}

fn check_step<'a>(c: &mut Check<'a>, at: &str, step: &'a prost_types::Value) -> Result<()> {
    match &step.kind {
        Some(Kind::StringValue(s)) => {
            required(at, s)?;
            c.text(at.to_owned(), s);
        }
        Some(Kind::StructValue(st)) => {
            for key in st.fields.keys() {
                if !matches!(key.as_str(), "verb" | "action" | "intent") {
                    return Err(Error::invalid(format!("{at}.{key}"), "unknown field"));
                }
            }
            match st.fields.get("verb").and_then(|v| v.kind.as_ref()) {
                Some(Kind::StringValue(v)) => one_of(&format!("{at}.verb"), v, VERBS)?,
                _ => return Err(Error::invalid(format!("{at}.verb"), "is required")),
            }
            for key in ["action", "intent"] {
                match st.fields.get(key).and_then(|v| v.kind.as_ref()) {
                    None | Some(Kind::NullValue(_)) => {}
                    Some(Kind::StringValue(s)) => c.text(format!("{at}.{key}"), s),
                    Some(_) => {
                        return Err(Error::invalid(format!("{at}.{key}"), "must be a string"))
                    }
                }
            }
        }
        _ => {
            return Err(Error::invalid(
                at,
                "must be a string or {verb, action?, intent?}",
            ))
        }
    }
    Ok(())
}

/// Size of the entry's JSON as the protocol writes it.
pub fn json_size(e: &Entry) -> usize {
    let pool = snowpea_proto::descriptor_pool();
    let Some(desc) = pool.get_message_by_name("snowpea.memory.v1.SitePutParams.Entry") else {
        return e.encoded_len();
    };
    match prost_reflect::DynamicMessage::decode(desc, e.encode_to_vec().as_slice()) {
        Ok(m) => serde_json::to_vec(&snowpea_proto::json::to_json(&m)).map_or(0, |v| v.len()),
        Err(_) => e.encoded_len(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn xpath_is_recognised() {
        for s in [
            "//div[@id='x']",
            "/html/body",
            "./a",
            "(//a)[1]",
            "xpath=//a",
            "div[@class]",
            "a[contains(., 'x')]",
            "following-sibling::td",
        ] {
            assert!(is_xpath(s), "{s}");
        }
        for s in [
            "div.item > a",
            "#main",
            "input[name=email]",
            "a::before",
            "li:nth-child(2)",
        ] {
            assert!(!is_xpath(s), "{s}");
        }
    }
}
