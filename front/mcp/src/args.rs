//! Reading a tool's `arguments` object: every error names the field (`text: …`), nothing
//! from the client can panic, and strings are bounded so one call cannot make this process
//! (or the daemon) hold arbitrary amounts of text.

use serde_json::{Map, Value};

/// Longest accepted string argument, in bytes (1 MiB: a long prompt with pasted context).
pub const MAX_STRING_BYTES: usize = 1024 * 1024;

/// Longest `snowpea_memory_write.text`, in bytes (the memory service's own bound, 64 KiB).
pub const MAX_MEMORY_BYTES: usize = 64 * 1024;

/// Most tags accepted by `snowpea_memory_write`.
pub const MAX_TAGS: usize = 32;

/// A bad argument: the field and what is wrong with it. Shown to the host as the tool's
/// error text, `invalid argument <field>: <reason>`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ArgError {
    /// The field, e.g. `sessionId` or `tags[2]`.
    pub field: String,
    /// What is wrong, e.g. `is required`.
    pub reason: String,
}

impl std::fmt::Display for ArgError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "invalid argument {}: {}", self.field, self.reason)
    }
}

impl std::error::Error for ArgError {}

fn bad(field: &str, reason: impl Into<String>) -> ArgError {
    ArgError {
        field: field.to_owned(),
        reason: reason.into(),
    }
}

/// The arguments of one call (an absent `arguments` is an empty object).
pub struct Args<'a> {
    map: &'a Map<String, Value>,
}

impl<'a> Args<'a> {
    /// Wraps the call's arguments; `allowed` lists the fields the tool takes, and any other
    /// field is refused (a misspelt `sessionID` must not silently start a new session).
    pub fn new(map: &'a Map<String, Value>, allowed: &[&str]) -> Result<Self, ArgError> {
        if let Some(unknown) = map.keys().find(|k| !allowed.contains(&k.as_str())) {
            let expected = if allowed.is_empty() {
                "this tool takes no arguments".to_owned()
            } else {
                format!("the arguments are {}", allowed.join(", "))
            };
            return Err(bad(unknown, format!("unknown field; {expected}")));
        }
        Ok(Args { map })
    }

    /// An optional string (`null` counts as absent); refused when not a string or too long.
    pub fn opt_str(&self, field: &str) -> Result<Option<&'a str>, ArgError> {
        match self.map.get(field) {
            None | Some(Value::Null) => Ok(None),
            Some(Value::String(s)) if s.len() > MAX_STRING_BYTES => Err(bad(
                field,
                format!("is longer than {MAX_STRING_BYTES} bytes"),
            )),
            Some(Value::String(s)) => Ok(Some(s)),
            Some(other) => Err(bad(
                field,
                format!("must be a string, not {}", type_name(other)),
            )),
        }
    }

    /// A required, non-blank string.
    pub fn str(&self, field: &str) -> Result<&'a str, ArgError> {
        match self.opt_str(field)? {
            None => Err(bad(field, "is required")),
            Some(s) if s.trim().is_empty() => Err(bad(field, "must not be empty")),
            Some(s) => Ok(s),
        }
    }

    /// A required, non-blank string of at most `max` bytes.
    pub fn str_max(&self, field: &str, max: usize) -> Result<&'a str, ArgError> {
        let s = self.str(field)?;
        if s.len() > max {
            return Err(bad(
                field,
                format!("is {} bytes, longer than {max} bytes", s.len()),
            ));
        }
        Ok(s)
    }

    /// An optional non-negative integer.
    pub fn opt_u64(&self, field: &str) -> Result<Option<u64>, ArgError> {
        match self.map.get(field) {
            None | Some(Value::Null) => Ok(None),
            Some(Value::Number(n)) => n
                .as_u64()
                .map(Some)
                .ok_or_else(|| bad(field, format!("must be a non-negative integer, not {n}"))),
            Some(other) => Err(bad(
                field,
                format!("must be a non-negative integer, not {}", type_name(other)),
            )),
        }
    }

    /// An optional boolean.
    pub fn opt_bool(&self, field: &str) -> Result<Option<bool>, ArgError> {
        match self.map.get(field) {
            None | Some(Value::Null) => Ok(None),
            Some(Value::Bool(b)) => Ok(Some(*b)),
            Some(other) => Err(bad(
                field,
                format!("must be a boolean, not {}", type_name(other)),
            )),
        }
    }

    /// An optional list of non-empty strings, at most `max` of them.
    pub fn opt_strings(&self, field: &str, max: usize) -> Result<Vec<String>, ArgError> {
        let items = match self.map.get(field) {
            None | Some(Value::Null) => return Ok(Vec::new()),
            Some(Value::Array(items)) => items,
            Some(other) => {
                return Err(bad(
                    field,
                    format!("must be an array of strings, not {}", type_name(other)),
                ))
            }
        };
        if items.len() > max {
            return Err(bad(field, format!("has more than {max} items")));
        }
        items
            .iter()
            .enumerate()
            .map(|(i, item)| {
                let name = format!("{field}[{i}]");
                match item {
                    Value::String(s) if s.trim().is_empty() => Err(bad(&name, "must not be empty")),
                    Value::String(s) if s.len() > 256 => {
                        Err(bad(&name, "is longer than 256 bytes"))
                    }
                    Value::String(s) => Ok(s.clone()),
                    other => Err(bad(
                        &name,
                        format!("must be a string, not {}", type_name(other)),
                    )),
                }
            })
            .collect()
    }

    /// An optional string that must be one of `allowed`.
    pub fn opt_choice(&self, field: &str, allowed: &[&str]) -> Result<Option<&'a str>, ArgError> {
        match self.opt_str(field)? {
            None => Ok(None),
            Some(s) if allowed.contains(&s) => Ok(Some(s)),
            Some(s) => Err(bad(
                field,
                format!(
                    "must be one of {}, not {:?}",
                    allowed.join(", "),
                    crate::transcript::clip(s, 80)
                ),
            )),
        }
    }

    /// An optional absolute path used as a filter: canonicalized when it exists, else kept
    /// as given (a directory that does not exist matches nothing; it is not an error).
    pub fn opt_abs_path(&self, field: &str) -> Result<Option<std::path::PathBuf>, ArgError> {
        let Some(raw) = self.opt_str(field)? else {
            return Ok(None);
        };
        let path = std::path::Path::new(raw);
        if !path.is_absolute() {
            return Err(bad(field, format!("must be an absolute path, not {raw:?}")));
        }
        Ok(Some(
            std::fs::canonicalize(path).unwrap_or_else(|_| path.to_path_buf()),
        ))
    }

    /// An optional absolute path to an existing directory, canonicalized.
    pub fn opt_dir(&self, field: &str) -> Result<Option<std::path::PathBuf>, ArgError> {
        let Some(raw) = self.opt_str(field)? else {
            return Ok(None);
        };
        let path = std::path::Path::new(raw);
        if !path.is_absolute() {
            return Err(bad(field, format!("must be an absolute path, not {raw:?}")));
        }
        let dir = std::fs::canonicalize(path).map_err(|e| bad(field, format!("{raw}: {e}")))?;
        if !dir.is_dir() {
            return Err(bad(field, format!("{raw} is not a directory")));
        }
        Ok(Some(dir))
    }
}

/// The JSON type of a value, for messages.
fn type_name(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn map(v: Value) -> Map<String, Value> {
        v.as_object().unwrap().clone()
    }

    #[test]
    fn errors_name_the_field() {
        let m = map(json!({"text": 3, "tags": ["a", 2], "afterSeq": -1}));
        let a = Args::new(&m, &["text", "tags", "afterSeq"]).unwrap();
        assert_eq!(
            a.str("text").unwrap_err().to_string(),
            "invalid argument text: must be a string, not a number"
        );
        assert_eq!(a.opt_strings("tags", 4).unwrap_err().field, "tags[1]");
        assert_eq!(a.opt_u64("afterSeq").unwrap_err().field, "afterSeq");
        assert_eq!(a.str("missing").unwrap_err().reason, "is required");
    }

    #[test]
    fn unknown_fields_and_bad_choices_are_refused() {
        let m = map(json!({"sessionID": "x"}));
        let e = Args::new(&m, &["sessionId"]).err().unwrap();
        assert_eq!(e.field, "sessionID");
        let m = map(json!({"mode": "yolo", "workdir": "rel/dir"}));
        let a = Args::new(&m, &["mode", "workdir"]).unwrap();
        assert!(a
            .opt_choice("mode", &["plan", "accept", "auto"])
            .unwrap_err()
            .reason
            .contains("plan, accept, auto"));
        assert!(a
            .opt_dir("workdir")
            .unwrap_err()
            .reason
            .contains("absolute"));
    }

    #[test]
    fn bounded_strings_and_filter_paths() {
        let m = map(
            json!({"text": "x".repeat(MAX_MEMORY_BYTES + 1), "workdir": "/nonexistent/dir", "rel": "a/b"}),
        );
        let a = Args::new(&m, &["text", "workdir", "rel"]).unwrap();
        let e = a.str_max("text", MAX_MEMORY_BYTES).unwrap_err();
        assert_eq!(e.field, "text");
        assert!(e.reason.contains("longer than 65536 bytes"), "{e}");
        assert_eq!(
            a.opt_abs_path("workdir").unwrap(),
            Some(std::path::PathBuf::from("/nonexistent/dir"))
        );
        assert!(a
            .opt_abs_path("rel")
            .unwrap_err()
            .reason
            .contains("absolute"));
    }

    #[test]
    fn blank_and_null_are_handled() {
        let m = map(json!({"text": "  ", "sessionId": null}));
        let a = Args::new(&m, &["text", "sessionId"]).unwrap();
        assert_eq!(a.str("text").unwrap_err().reason, "must not be empty");
        assert_eq!(a.opt_str("sessionId").unwrap(), None);
    }
}
