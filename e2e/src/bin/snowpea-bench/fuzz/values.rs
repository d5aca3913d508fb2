//! Random values for params: strings of every kind (short words, unicode, control
//! characters, FTS/glob/regex syntax, long runs of one character, strings up to and just past
//! the protocol's string limit), integers at the edges, and the ids the suite handed out
//! earlier (so valid-shaped calls reach past "not found").

use std::collections::HashMap;

use rand::rngs::StdRng;
use rand::seq::IndexedRandom;
use rand::Rng;
use serde_json::Value;

/// Longest string param the gateway accepts (`snowpea_proto::limits::STRING_PARAM`,
/// 4 MiB); the fuzz sends strings up to it and just past it.
pub const STRING_PARAM: usize = 4 << 20;

/// Ids remembered per field name.
const POOL_PER_KEY: usize = 64;

/// Words the suite knows, and syntax its parsers see.
const WORDS: &[&str] = &[
    "plan",
    "accept",
    "auto",
    "default",
    "global",
    "project",
    "session",
    "memory",
    "z",
    "zz",
    "tokio",
    "한국어",
    "emoji 🫛",
    "e\u{301}",
    "\u{202e}rtl",
    "NEAR(a b)",
    "\"quoted",
    "a OR b",
    "-not",
    "x*",
    "**/*",
    "[a-",
    "(a+)+$",
    "{{x}}",
    "%s%n",
    "../..",
    "/",
    ".",
    "0",
    "-1",
    "null",
    "true",
    "* * * * *",
    "@every 1s",
    "0 0 31 2 *",
    "in 5 minutes",
    "http://127.0.0.1:9/",
    "\u{0}",
    "\t\r\n",
    "\\",
    "'; DROP TABLE x; --",
    "SELECT 1",
    "\u{fffd}",
    "\u{10ffff}",
];

/// Characters for long runs (the svc-memory repeated-character trigger of issue 40 used 'z').
const RUN_CHARS: &[&str] = &["z", "a", " ", "한", "🫛", "\"", "*", "\\", "0", "%"];

/// String ids the suite returned, by the field name they came under (`sessionId`, `id`, …).
#[derive(Debug, Default)]
pub struct IdPool {
    by_key: HashMap<String, Vec<String>>,
}

impl IdPool {
    /// Remembers every short string under an id-like key of `v` (bounded per key).
    pub fn harvest(&mut self, v: &Value, rng: &mut StdRng) {
        self.walk(v, 0, rng);
    }

    fn walk(&mut self, v: &Value, depth: usize, rng: &mut StdRng) {
        if depth > 8 {
            return;
        }
        match v {
            Value::Object(m) => {
                for (k, x) in m {
                    match x {
                        Value::String(s) if is_id_key(k) && s.len() <= 128 => {
                            let ids = self.by_key.entry(k.clone()).or_default();
                            if ids.len() < POOL_PER_KEY {
                                ids.push(s.clone());
                            } else {
                                let i = rng.random_range(0..ids.len());
                                ids[i] = s.clone();
                            }
                        }
                        _ => self.walk(x, depth + 1, rng),
                    }
                }
            }
            Value::Array(a) => a.iter().take(64).for_each(|x| self.walk(x, depth + 1, rng)),
            _ => {}
        }
    }

    /// An id remembered under `key` (or, for `id`, under any key).
    pub fn pick(&self, key: &str, rng: &mut StdRng) -> Option<String> {
        if let Some(ids) = self.by_key.get(key).filter(|v| !v.is_empty()) {
            return ids.choose(rng).cloned();
        }
        let all: Vec<&Vec<String>> = self.by_key.values().filter(|v| !v.is_empty()).collect();
        all.choose(rng).and_then(|ids| ids.choose(rng)).cloned()
    }
}

/// True for `id`, `sessionId`, `jobId`, `requestId`, … and `name` (agents, skills, guides).
pub fn is_id_key(k: &str) -> bool {
    k == "id" || k == "name" || k.ends_with("Id") || k.ends_with("Ref")
}

/// `n` × `unit`.
pub fn run_of(unit: &str, n: usize) -> String {
    unit.repeat(n)
}

/// A length from a skewed distribution: mostly short, sometimes long, rarely up to and just
/// past [`STRING_PARAM`] (only when `huge` allows it).
pub fn length(rng: &mut StdRng, huge: bool) -> usize {
    match rng.random_range(0..1000) {
        0..=699 => rng.random_range(0..24),
        700..=929 => rng.random_range(24..2048),
        930..=989 => *[10_000, 100_000, 65_536, 32_767]
            .choose(rng)
            .expect("non-empty"),
        _ if huge => *[1 << 20, STRING_PARAM - 8, STRING_PARAM, STRING_PARAM + 1]
            .choose(rng)
            .expect("non-empty"),
        _ => rng.random_range(2048..20_000),
    }
}

/// A random string; `huge` allows the megabyte sizes.
pub fn string(rng: &mut StdRng, huge: bool) -> String {
    match rng.random_range(0..10) {
        0..=3 => WORDS.choose(rng).expect("non-empty").to_string(),
        4..=5 => {
            let n = length(rng, huge);
            let unit = RUN_CHARS.choose(rng).expect("non-empty");
            // Keep the byte length near `n` whatever the width of the character.
            run_of(unit, (n / unit.len()).max(1))
        }
        6 => {
            let n = length(rng, huge).min(1 << 16);
            (0..n)
                .map(|_| char::from_u32(rng.random_range(0..0x3_0000)).unwrap_or('?'))
                .collect()
        }
        _ => {
            let n = length(rng, huge);
            let mut s = String::with_capacity(n);
            while s.len() < n {
                s.push_str(WORDS.choose(rng).expect("non-empty"));
                s.push(' ');
            }
            let mut end = n.min(s.len());
            while !s.is_char_boundary(end) {
                end -= 1;
            }
            s.truncate(end);
            s
        }
    }
}

/// A random integer, mostly small, sometimes at the edges of every width.
pub fn integer(rng: &mut StdRng) -> Value {
    match rng.random_range(0..8) {
        0..=4 => Value::from(rng.random_range(-2i64..100)),
        5 => Value::from(
            *[
                i64::MAX,
                i64::MIN,
                i32::MAX as i64 + 1,
                u32::MAX as i64,
                1_000_000_000,
            ]
            .choose(rng)
            .expect("non-empty"),
        ),
        6 => Value::from(u64::MAX),
        _ => serde_json::json!(rng.random_range(-1e300..1e300)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::SeedableRng;

    /// The same seed gives the same strings (a failing run can be replayed), and the sizes
    /// reach the string limit only when allowed.
    #[test]
    fn seeded_and_bounded() {
        let a: Vec<String> = {
            let mut r = StdRng::seed_from_u64(7);
            (0..200).map(|_| string(&mut r, false)).collect()
        };
        let mut r = StdRng::seed_from_u64(7);
        let b: Vec<String> = (0..200).map(|_| string(&mut r, false)).collect();
        assert_eq!(a, b);
        let mut r = StdRng::seed_from_u64(8);
        let longest = (0..5000).map(|_| string(&mut r, false).len()).max();
        assert!(longest.unwrap() < STRING_PARAM / 4, "{longest:?}");
    }

    #[test]
    fn ids_are_harvested_by_key_and_bounded() {
        let mut r = StdRng::seed_from_u64(1);
        let mut pool = IdPool::default();
        for i in 0..500 {
            pool.harvest(
                &serde_json::json!({"sessionId": format!("s{i}"), "x": [{"id": "m1"}]}),
                &mut r,
            );
        }
        assert!(pool.by_key["sessionId"].len() <= POOL_PER_KEY);
        assert!(pool.pick("sessionId", &mut r).unwrap().starts_with('s'));
        assert!(pool.pick("id", &mut r).is_some());
    }
}
