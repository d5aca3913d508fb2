//! The shape of a host's `tool.invoke` result (protocol 1.25.0 "tool.invoke" Result), checked
//! before it is read: `ok` a boolean (required), `output` a string, `error` a string or
//! null, `meta` an object or null, `content` an array or null of blocks `{type: "text" |
//! "image", text?, data?, mediaType?, contentRef?}` (strings or null). A wrong type is
//! reported naming the field as `result.content[0].text: expected a string, got number`, so
//! the host's author sees what to fix; fields the spec does not list are ignored (a newer
//! host may send more).

use serde_json::Value;

fn type_name(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "boolean",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    }
}

fn expected(field: &str, what: &str, got: &Value) -> String {
    format!("{field}: expected {what}, got {}", type_name(got))
}

/// An optional string field (absent or null is fine).
fn opt_string(obj: &serde_json::Map<String, Value>, key: &str, path: &str) -> Result<(), String> {
    match obj.get(key) {
        None | Some(Value::Null) | Some(Value::String(_)) => Ok(()),
        Some(other) => Err(expected(&format!("{path}.{key}"), "a string", other)),
    }
}

/// Checks `v` against the `tool.invoke` result shape (module doc); the error names the
/// first wrong field.
pub fn check(v: &Value) -> Result<(), String> {
    let obj = v
        .as_object()
        .ok_or_else(|| expected("result", "an object", v))?;
    match obj.get("ok") {
        Some(Value::Bool(_)) => {}
        None | Some(Value::Null) => return Err("result.ok: is required (true or false)".into()),
        Some(other) => return Err(expected("result.ok", "a boolean", other)),
    }
    opt_string(obj, "output", "result")?;
    opt_string(obj, "error", "result")?;
    match obj.get("meta") {
        None | Some(Value::Null) | Some(Value::Object(_)) => {}
        Some(other) => return Err(expected("result.meta", "an object", other)),
    }
    let blocks = match obj.get("content") {
        None | Some(Value::Null) => return Ok(()),
        Some(Value::Array(a)) => a,
        Some(other) => return Err(expected("result.content", "an array", other)),
    };
    for (i, b) in blocks.iter().enumerate() {
        let path = format!("result.content[{i}]");
        let block = b
            .as_object()
            .ok_or_else(|| expected(&path, "an object", b))?;
        match block.get("type") {
            Some(Value::String(t)) if t == "text" || t == "image" => {}
            Some(Value::String(t)) => {
                return Err(format!(
                    "{path}.type: expected \"text\" or \"image\", got {:?}",
                    t.chars().take(32).collect::<String>()
                ))
            }
            None | Some(Value::Null) => return Err(format!("{path}.type: is required")),
            Some(other) => return Err(expected(&format!("{path}.type"), "a string", other)),
        }
        for key in ["text", "data", "mediaType", "contentRef"] {
            opt_string(block, key, &path)?;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::check;

    #[test]
    fn wrong_types_name_the_field() {
        assert!(check(&json!({"ok": true})).is_ok());
        assert!(check(&json!({"ok": false, "error": null, "output": "x", "meta": null,
            "content": [{"type": "text", "text": "a"}, {"type": "image", "data": "AA==", "mediaType": "image/png"}],
            "future": 1}))
        .is_ok());
        for (bad, want) in [
            (json!("done"), "result: expected an object, got string"),
            (json!({}), "result.ok: is required"),
            (
                json!({"ok": "yes"}),
                "result.ok: expected a boolean, got string",
            ),
            (
                json!({"ok": true, "output": 5}),
                "result.output: expected a string, got number",
            ),
            (
                json!({"ok": false, "error": {}}),
                "result.error: expected a string, got object",
            ),
            (
                json!({"ok": true, "meta": []}),
                "result.meta: expected an object, got array",
            ),
            (
                json!({"ok": true, "content": "x"}),
                "result.content: expected an array, got string",
            ),
            (
                json!({"ok": true, "content": [7]}),
                "result.content[0]: expected an object, got number",
            ),
            (
                json!({"ok": true, "content": [{"type": "text", "text": "a"}, {"type": "text", "text": 5}]}),
                "result.content[1].text: expected a string, got number",
            ),
            (
                json!({"ok": true, "content": [{"text": "a"}]}),
                "result.content[0].type: is required",
            ),
            (
                json!({"ok": true, "content": [{"type": "video"}]}),
                "result.content[0].type: expected \"text\" or \"image\"",
            ),
            (
                json!({"ok": true, "content": [{"type": "image", "data": true}]}),
                "result.content[0].data: expected a string, got boolean",
            ),
        ] {
            let e = check(&bad).unwrap_err();
            assert!(e.starts_with(want), "{bad}: {e}");
        }
    }
}
