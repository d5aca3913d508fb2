//! The spec grammar (issue 5): every form `job.schedule` reads, English and Korean.
//!
//! | form | examples | becomes |
//! |---|---|---|
//! | cron, 5 or 6 fields, names, `@daily` | `*/5 * * * *`, `0 30 9 * * MON-FRI` | cron |
//! | interval | `every 30s`, `every 10 minutes`, `every 2h`, `each day`, `10분마다`, `매시간` | interval |
//! | relative one-shot | `in 20 minutes`, `after 2h`, `in 1h 30m`, `30분 뒤`, `2시간 후` | once |
//! | absolute one-shot | `2026-03-01T09:00:00Z`, `2026-03-01 09:00`, `tomorrow 9am`, `today 18:30`, `9pm`, `내일 오전 9시`, `오늘 18:30` | once |
//! | recurring phrase | `daily at 9:00`, `every weekday at 8am`, `every monday 14:30`, `noon`, `midnight`, `매일 9시`, `평일 오전 8시`, `매주 월요일 14시 30분`, `주말 10시`, `정오`, `자정` | cron |
//!
//! A bare clock time (`9pm`, `18:30`, `오후 3시`) is a one-shot at its next occurrence.
//! Input is case-insensitive and whitespace is collapsed first.

use jiff::civil::{Date, DateTime, Time};
use jiff::tz::TimeZone;
use jiff::{SignedDuration, Timestamp};

use super::{Schedule, SpecError};

/// The forms, for error messages.
const FORMS: &str = "expected a cron expression (5 or 6 fields, e.g. `0 9 * * 1-5`), an interval \
(`every 10 minutes`, `10분마다`), a one-shot (`in 20 minutes`, `30분 뒤`, `tomorrow 9am`, an \
ISO-8601 date-time) or a recurring phrase (`daily at 9:00`, `every monday 14:30`, `매일 9시`)";

/// The spec's words twice: lower-cased for matching, as the user wrote them for messages.
struct Words<'a> {
    /// Lower-cased words (what the forms are matched against).
    lower: &'a [&'a str],
    /// The same words as given.
    orig: &'a [&'a str],
}

impl Words<'_> {
    /// The user's own text of `frag`, a sub-slice of `self.lower` (quoted for a message, at
    /// most [`super::QUOTE_CHARS`] characters).
    fn quote(&self, frag: &[&str]) -> String {
        super::quote(&self.orig_of(frag))
    }

    fn orig_of(&self, frag: &[&str]) -> String {
        // `frag` borrows from `self.lower`: find where by address.
        let start = frag
            .first()
            .and_then(|first| self.lower.iter().position(|w| std::ptr::eq(w, first)));
        match start.and_then(|i| self.orig.get(i..i + frag.len())) {
            Some(o) => o.join(" "),
            None => frag.join(" "),
        }
    }

    /// The whole spec as given (whitespace collapsed).
    fn all(&self) -> String {
        self.orig.join(" ")
    }
}

/// Reads `spec` at `now` (whole seconds) in zone `tz`. Error messages quote the user's own
/// text (not its lower-cased form), at most [`super::QUOTE_CHARS`] characters of it.
pub fn read(spec: &str, now: Timestamp, tz: &TimeZone) -> Result<Schedule, SpecError> {
    let joined = spec.split_whitespace().collect::<Vec<_>>().join(" ");
    let orig_text = joined.trim_end_matches(['.', '!']).trim();
    // Lower-casing never makes or removes a space, '.' or '!': the words line up one to one.
    let lower_text = orig_text.to_lowercase();
    let text = lower_text.as_str();
    if text.is_empty() {
        return Err(SpecError("the spec is empty; ".to_owned() + FORMS));
    }
    if let Some(s) = iso_datetime(text, orig_text, tz)? {
        return Ok(s);
    }
    let lower: Vec<&str> = text.split(' ').collect();
    let orig: Vec<&str> = orig_text.split(' ').collect();
    let w = Words {
        lower: &lower,
        orig: if orig.len() == lower.len() {
            &orig
        } else {
            &lower
        },
    };
    if looks_like_cron(text, &lower) {
        return Schedule::cron_shown(text, orig_text);
    }
    if let Some(s) = english(&w, now, tz)? {
        return Ok(s);
    }
    if let Some(s) = korean(&w, now, tz)? {
        return Ok(s);
    }
    Err(SpecError(format!(
        "cannot read {}: {FORMS}",
        super::quote(spec.trim())
    )))
}

/// 5 or 6 fields of cron characters, or an `@nickname`.
fn looks_like_cron(text: &str, words: &[&str]) -> bool {
    if text.starts_with('@') {
        return words.len() == 1;
    }
    (words.len() == 5 || words.len() == 6)
        && words.iter().all(|w| {
            w.chars()
                .all(|c| c.is_ascii_alphanumeric() || "*/,-?#+".contains(c))
        })
        && words
            .first()
            .is_some_and(|w| w.starts_with(|c: char| c.is_ascii_digit() || c == '*' || c == '?'))
}

/// ISO-8601: an instant with an offset (`…Z`, `…+09:00`), a zoned time
/// (`…[Asia/Seoul]`), or a civil date-time / date read in `tz`.
fn iso_datetime(text: &str, shown: &str, tz: &TimeZone) -> Result<Option<Schedule>, SpecError> {
    // Cheap gate: ISO starts with a 4-digit year and a dash.
    let b = text.as_bytes();
    if !(b.len() >= 10 && b[..4].iter().all(u8::is_ascii_digit) && b[4] == b'-') {
        return Ok(None);
    }
    let upper = text.to_uppercase();
    if let Ok(z) = upper.parse::<jiff::Zoned>() {
        return Ok(Some(once(z.timestamp())));
    }
    if let Ok(t) = upper.parse::<Timestamp>() {
        return Ok(Some(once(t)));
    }
    if let Ok(dt) = upper.parse::<DateTime>() {
        return Ok(Some(once(civil_in(dt, tz)?)));
    }
    if let Ok(d) = upper.parse::<Date>() {
        return Ok(Some(once(civil_in(d.to_datetime(Time::midnight()), tz)?)));
    }
    Err(SpecError(format!(
        "{} looks like an ISO-8601 date-time but is not a valid one (e.g. 2026-03-01T09:00:00Z, 2026-03-01T09:00:00+09:00 or 2026-03-01 09:00)",
        super::quote(shown)
    )))
}

fn once(at: Timestamp) -> Schedule {
    Schedule::Once {
        at: super::trunc_secs(at),
    }
}

/// A civil time in `tz`; a time in a DST gap moves forward by the gap, one in an overlap takes
/// the earlier instant.
fn civil_in(dt: DateTime, tz: &TimeZone) -> Result<Timestamp, SpecError> {
    tz.to_ambiguous_timestamp(dt)
        .compatible()
        .map_err(|e| SpecError(format!("{dt} cannot be placed in the time zone: {e}")))
}

/// The next instant strictly after `now` whose wall-clock time in `tz` is `time`.
fn next_clock_time(time: Time, now: Timestamp, tz: &TimeZone) -> Result<Timestamp, SpecError> {
    let today = now.to_zoned(tz.clone()).date();
    let t = civil_in(today.to_datetime(time), tz)?;
    if t > now {
        return Ok(t);
    }
    let tomorrow = today
        .tomorrow()
        .map_err(|e| SpecError(format!("date out of range: {e}")))?;
    civil_in(tomorrow.to_datetime(time), tz)
}

/// `time` on the day `days` after today in `tz`.
fn day_at(days: i64, time: Time, now: Timestamp, tz: &TimeZone) -> Result<Timestamp, SpecError> {
    let day = now
        .to_zoned(tz.clone())
        .date()
        .checked_add(jiff::Span::new().days(days))
        .map_err(|e| SpecError(format!("date out of range: {e}")))?;
    civil_in(day.to_datetime(time), tz)
}

fn daily_cron(time: Time, dow: &str) -> Result<Schedule, SpecError> {
    let expr = if time.second() == 0 {
        format!("{} {} * * {dow}", time.minute(), time.hour())
    } else {
        format!(
            "{} {} {} * * {dow}",
            time.second(),
            time.minute(),
            time.hour()
        )
    };
    Schedule::cron(&expr)
}

fn interval(every: SignedDuration) -> Result<Schedule, SpecError> {
    if every.as_secs() < 1 {
        return Err(SpecError("an interval must be at least 1 second".into()));
    }
    Ok(Schedule::Interval {
        every: SignedDuration::from_secs(every.as_secs()),
    })
}

fn relative(d: SignedDuration, now: Timestamp) -> Result<Schedule, SpecError> {
    if d.as_secs() < 1 {
        return Err(SpecError(
            "a relative time must be at least 1 second ahead".into(),
        ));
    }
    now.checked_add(d)
        .map(once)
        .map_err(|e| SpecError(format!("too far ahead: {e}")))
}

// ---------------------------------------------------------------------------------------------
// English

/// Seconds in one English unit word (`s`, `sec`, `minutes`, `h`, `days`, `weeks`, …).
fn english_unit(w: &str) -> Option<i64> {
    Some(match w {
        "s" | "sec" | "secs" | "second" | "seconds" => 1,
        "m" | "min" | "mins" | "minute" | "minutes" => 60,
        "h" | "hr" | "hrs" | "hour" | "hours" => 3600,
        "d" | "day" | "days" => 86_400,
        "w" | "wk" | "wks" | "week" | "weeks" => 604_800,
        _ => return None,
    })
}

/// An English duration: `30s`, `10 minutes`, `1h 30m`, `1 hour and 30 minutes`, `an hour`.
fn english_duration(words: &[&str]) -> Option<SignedDuration> {
    let mut total: i64 = 0;
    let mut i = 0;
    let mut any = false;
    while i < words.len() {
        let w = words[i];
        if w == "and" && any {
            i += 1;
            continue;
        }
        // "30s", "2h", "10min"
        let digits = w.chars().take_while(char::is_ascii_digit).count();
        let (n, unit, step) = if digits > 0 && digits < w.len() {
            (
                w[..digits].parse::<i64>().ok()?,
                english_unit(&w[digits..])?,
                1,
            )
        } else if digits == w.len() {
            (w.parse::<i64>().ok()?, english_unit(words.get(i + 1)?)?, 2)
        } else if w == "a" || w == "an" || w == "one" {
            (1, english_unit(words.get(i + 1)?)?, 2)
        } else {
            return None;
        };
        total = total.checked_add(n.checked_mul(unit)?)?;
        any = true;
        i += step;
    }
    any.then(|| SignedDuration::from_secs(total))
}

/// An English clock time: `9am`, `9 am`, `9:30pm`, `18:30`, `18:30:15`, `9` (after `at`),
/// `noon`, `midnight`.
fn english_time(words: &[&str]) -> Option<Time> {
    let joined = words.join("");
    let s = joined.as_str();
    match s {
        "noon" | "midday" => return Time::new(12, 0, 0, 0).ok(),
        "midnight" => return Some(Time::midnight()),
        _ => {}
    }
    let (body, half) = if let Some(b) = s.strip_suffix("am").or_else(|| s.strip_suffix("a.m")) {
        (b, Some(false))
    } else if let Some(b) = s.strip_suffix("pm").or_else(|| s.strip_suffix("p.m")) {
        (b, Some(true))
    } else {
        (s, None)
    };
    let parts: Vec<&str> = body.split(':').collect();
    if parts.is_empty()
        || parts.len() > 3
        || parts
            .iter()
            .any(|p| p.is_empty() || !p.chars().all(|c| c.is_ascii_digit()))
    {
        return None;
    }
    let mut h: i8 = parts[0].parse().ok()?;
    let m: i8 = parts.get(1).map_or(Some(0), |p| p.parse().ok())?;
    let sec: i8 = parts.get(2).map_or(Some(0), |p| p.parse().ok())?;
    if parts.len() > 1 && parts[1].len() != 2 {
        return None;
    }
    match half {
        Some(pm) => {
            if !(1..=12).contains(&h) {
                return None;
            }
            h = match (pm, h) {
                (false, 12) => 0,
                (true, 12) => 12,
                (true, h) => h + 12,
                (false, h) => h,
            };
        }
        None if parts.len() == 1 && words.len() == 1 && words[0].len() > 2 => return None,
        None => {}
    }
    Time::new(h, m, sec, 0).ok()
}

/// The clock time after an optional `at`.
fn at_time(words: &[&str]) -> Option<Time> {
    match words {
        ["at", rest @ ..] if !rest.is_empty() => english_time(rest),
        _ if !words.is_empty() => english_time(words),
        _ => None,
    }
}

/// A day-of-week word → cron day-of-week field.
fn english_dow(w: &str) -> Option<&'static str> {
    let w = w
        .strip_suffix('s')
        .filter(|_| w.len() > 3 && w != "tues" && w != "thurs")
        .unwrap_or(w);
    Some(match w {
        "monday" | "mon" => "1",
        "tuesday" | "tue" | "tues" => "2",
        "wednesday" | "wed" => "3",
        "thursday" | "thu" | "thurs" => "4",
        "friday" | "fri" => "5",
        "saturday" | "sat" => "6",
        "sunday" | "sun" => "0",
        "weekday" => "1-5",
        "weekend" => "0,6",
        _ => return None,
    })
}

fn english(w: &Words<'_>, now: Timestamp, tz: &TimeZone) -> Result<Option<Schedule>, SpecError> {
    let words = w.lower;
    let need_time =
        |what: &str| SpecError(format!("{what} needs a clock time, e.g. `{what} at 9:00`"));
    let bad_time = |rest: &[&str]| {
        SpecError(format!(
            "{} is not a clock time (e.g. 9am, 9:30pm, 18:30, noon)",
            w.quote(rest)
        ))
    };
    Ok(Some(match words {
        ["noon" | "midday"] => daily_cron(Time::new(12, 0, 0, 0).expect("noon"), "*")?,
        ["midnight"] => daily_cron(Time::midnight(), "*")?,
        ["hourly"] => Schedule::cron("0 * * * *")?,
        ["daily"] => Schedule::cron("0 0 * * *")?,
        ["daily", rest @ ..] | ["every" | "each", "day", rest @ ..] if !rest.is_empty() => {
            daily_cron(at_time(rest).ok_or_else(|| bad_time(rest))?, "*")?
        }
        ["every" | "each" | "on", day, rest @ ..] | [day, rest @ ..]
            if english_dow(day).is_some() && (words[0] != *day || day.ends_with('s')) =>
        {
            let dow = english_dow(day).expect("checked");
            if rest.is_empty() {
                daily_cron(Time::midnight(), dow)?
            } else {
                daily_cron(at_time(rest).ok_or_else(|| bad_time(rest))?, dow)?
            }
        }
        ["every" | "each", rest @ ..] if !rest.is_empty() => {
            let d = english_duration(rest)
                .or_else(|| english_duration(&[&["1"], rest].concat()))
                .ok_or_else(|| {
                    SpecError(format!(
                        "{} is not an interval (e.g. every 30s, every 10 minutes, every 2h)",
                        w.quote(rest)
                    ))
                })?;
            interval(d)?
        }
        ["in" | "after", rest @ ..] if !rest.is_empty() => {
            let d = english_duration(rest).ok_or_else(|| {
                SpecError(format!(
                    "{} is not a duration (e.g. in 20 minutes, after 2h)",
                    w.quote(rest)
                ))
            })?;
            relative(d, now)?
        }
        ["today"] => return Err(need_time("today")),
        ["tomorrow"] => return Err(need_time("tomorrow")),
        ["today", rest @ ..] => once(day_at(
            0,
            at_time(rest).ok_or_else(|| bad_time(rest))?,
            now,
            tz,
        )?),
        ["tomorrow", rest @ ..] => once(day_at(
            1,
            at_time(rest).ok_or_else(|| bad_time(rest))?,
            now,
            tz,
        )?),
        [.., "today"] if words.len() > 1 => {
            let rest = &words[..words.len() - 1];
            once(day_at(
                0,
                at_time(rest).ok_or_else(|| bad_time(rest))?,
                now,
                tz,
            )?)
        }
        [.., "tomorrow"] if words.len() > 1 => {
            let rest = &words[..words.len() - 1];
            once(day_at(
                1,
                at_time(rest).ok_or_else(|| bad_time(rest))?,
                now,
                tz,
            )?)
        }
        _ => match at_time(words) {
            Some(t) if words.len() <= 3 => once(next_clock_time(t, now, tz)?),
            _ => return Ok(None),
        },
    }))
}

// ---------------------------------------------------------------------------------------------
// Korean

/// Seconds in one Korean unit (`초`, `분`, `시간`, `일`, `주`).
fn korean_unit(u: &str) -> Option<i64> {
    Some(match u {
        "초" => 1,
        "분" => 60,
        "시간" => 3600,
        "일" => 86_400,
        "주" | "주일" => 604_800,
        _ => return None,
    })
}

/// A Korean duration: `30분`, `2시간`, `1시간 30분`, `1시간30분`, `하루`.
fn korean_duration(text: &str) -> Option<SignedDuration> {
    let s: String = text.chars().filter(|c| !c.is_whitespace()).collect();
    if s == "하루" {
        return Some(SignedDuration::from_secs(86_400));
    }
    let mut total: i64 = 0;
    let mut rest = s.as_str();
    let mut any = false;
    while !rest.is_empty() {
        let digits = rest.chars().take_while(char::is_ascii_digit).count();
        if digits == 0 {
            return None;
        }
        let n: i64 = rest[..digits].parse().ok()?;
        rest = &rest[digits..];
        let unit_len = ["시간", "주일", "초", "분", "일", "주"]
            .iter()
            .find(|u| rest.starts_with(**u))?
            .len();
        total = total.checked_add(n.checked_mul(korean_unit(&rest[..unit_len])?)?)?;
        rest = &rest[unit_len..];
        any = true;
    }
    any.then(|| SignedDuration::from_secs(total))
}

/// A Korean clock time: `9시`, `오전 9시`, `오후 3시 30분`, `9시 반`, `18:30`, `정오`, `자정`.
fn korean_time(text: &str) -> Option<Time> {
    let s: String = text.chars().filter(|c| !c.is_whitespace()).collect();
    let s = s.strip_suffix('에').unwrap_or(&s);
    match s {
        "정오" => return Time::new(12, 0, 0, 0).ok(),
        "자정" => return Some(Time::midnight()),
        _ => {}
    }
    let (pm, body) = if let Some(b) = s
        .strip_prefix("오전")
        .or_else(|| s.strip_prefix("아침"))
        .or_else(|| s.strip_prefix("새벽"))
    {
        (Some(false), b)
    } else if let Some(b) = s
        .strip_prefix("오후")
        .or_else(|| s.strip_prefix("저녁"))
        .or_else(|| s.strip_prefix("밤"))
    {
        (Some(true), b)
    } else {
        (None, s)
    };
    let (h, m, sec) = if let Some((h, rest)) = body.split_once('시') {
        let h: i8 = h.parse().ok()?;
        let (m, rest) = if let Some(r) = rest.strip_prefix('반') {
            (30, r)
        } else if let Some((m, r)) = rest.split_once('분') {
            (m.parse().ok()?, r)
        } else {
            (0, rest)
        };
        let (sec, rest) = match rest.split_once('초') {
            Some((x, r)) => (x.parse().ok()?, r),
            None => (0, rest),
        };
        if !rest.is_empty() {
            return None;
        }
        (h, m, sec)
    } else {
        let t = english_time(&[body])?;
        if pm.is_some() {
            return None;
        }
        return Some(t);
    };
    let h = match pm {
        Some(true) if (1..12).contains(&h) => h + 12,
        Some(true) if h == 12 => 12,
        Some(false) if h == 12 => 0,
        Some(false) if (0..12).contains(&h) => h,
        Some(_) => return None,
        None => h,
    };
    Time::new(h, m, sec, 0).ok()
}

fn korean_dow(w: &str) -> Option<&'static str> {
    let w = w.strip_suffix("마다").unwrap_or(w);
    let w = w.strip_suffix('에').unwrap_or(w);
    Some(match w {
        "월요일" | "월" => "1",
        "화요일" | "화" => "2",
        "수요일" | "수" => "3",
        "목요일" | "목" => "4",
        "금요일" | "금" => "5",
        "토요일" | "토" => "6",
        "일요일" | "일" => "0",
        "평일" => "1-5",
        "주말" => "0,6",
        _ => return None,
    })
}

fn korean(w: &Words<'_>, now: Timestamp, tz: &TimeZone) -> Result<Option<Schedule>, SpecError> {
    let words = w.lower;
    if !words
        .iter()
        .any(|w| w.chars().any(|c| ('\u{AC00}'..='\u{D7A3}').contains(&c)))
    {
        return Ok(None);
    }
    let text = words.join(" ");
    let time_of = |rest: &[&str]| -> Result<Time, SpecError> {
        korean_time(&rest.join(" ")).ok_or_else(|| {
            SpecError(format!(
                "{} is not a clock time (e.g. 9시, 오후 3시 30분, 18:30)",
                w.quote(rest)
            ))
        })
    };
    // Intervals: "10분마다", "10분 마다", "매시간", "매 10분".
    if let Some(body) = text.strip_suffix("마다").map(str::trim) {
        if korean_dow(words[0]).is_none() {
            let d = korean_duration(body).ok_or_else(|| {
                let all = w.all();
                let shown = all.strip_suffix("마다").unwrap_or(&all).trim();
                SpecError(format!(
                    "{} is not an interval (e.g. 10분마다, 2시간마다)",
                    super::quote(shown)
                ))
            })?;
            return interval(d).map(Some);
        }
    }
    match words {
        ["매시간" | "매시"] => return interval(SignedDuration::from_hours(1)).map(Some),
        ["매일"] => return interval(SignedDuration::from_hours(24)).map(Some),
        ["정오"] | ["매일", "정오"] => {
            return daily_cron(Time::new(12, 0, 0, 0).expect("noon"), "*").map(Some)
        }
        ["자정"] | ["매일", "자정"] => return daily_cron(Time::midnight(), "*").map(Some),
        ["매", rest @ ..] => {
            let d = korean_duration(&rest.join("")).ok_or_else(|| {
                SpecError(format!(
                    "{} is not an interval (e.g. 10분마다)",
                    super::quote(&w.all())
                ))
            })?;
            return interval(d).map(Some);
        }
        ["매일", rest @ ..] => return daily_cron(time_of(rest)?, "*").map(Some),
        ["매주", day, rest @ ..] if korean_dow(day).is_some() => {
            let t = if rest.is_empty() {
                Time::midnight()
            } else {
                time_of(rest)?
            };
            return daily_cron(t, korean_dow(day).expect("checked")).map(Some);
        }
        [day, rest @ ..]
            if (*day == "평일" || *day == "주말" || day.ends_with("마다"))
                && korean_dow(day).is_some() =>
        {
            let t = if rest.is_empty() {
                Time::midnight()
            } else {
                time_of(rest)?
            };
            return daily_cron(t, korean_dow(day).expect("checked")).map(Some);
        }
        ["오늘", rest @ ..] if !rest.is_empty() => {
            return Ok(Some(once(day_at(0, time_of(rest)?, now, tz)?)))
        }
        ["내일", rest @ ..] if !rest.is_empty() => {
            return Ok(Some(once(day_at(1, time_of(rest)?, now, tz)?)))
        }
        ["모레", rest @ ..] if !rest.is_empty() => {
            return Ok(Some(once(day_at(2, time_of(rest)?, now, tz)?)))
        }
        _ => {}
    }
    // Relative: "30분 뒤", "30분 후", "30분 후에", "2시간뒤".
    for suffix in ["뒤에", "후에", "뒤", "후", "있다가"] {
        if let Some(body) = text.strip_suffix(suffix).map(str::trim) {
            if let Some(d) = korean_duration(body) {
                return relative(d, now).map(Some);
            }
        }
    }
    if let Some(t) = korean_time(&text) {
        return Ok(Some(once(next_clock_time(t, now, tz)?)));
    }
    Ok(None)
}
