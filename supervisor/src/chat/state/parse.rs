//! Reading request and result params (`approval.request`, `question.request`,
//! `command.list`, `session.list`) into the state's types; odd input never panics.

use super::*;

/// Reads an `approval.request`'s params (odd input is shown as well as it can be).
pub fn approval_from(params: &Value) -> Approval {
    let request = crate::run::approve::Request::from_params(params);
    let mut choices: Vec<&'static str> = vec!["once", "session", "project", "always"];
    if params
        .get("site")
        .and_then(Value::as_str)
        .is_some_and(|s| !s.is_empty())
    {
        choices.push("site");
    }
    choices.push("deny");
    let hint = params
        .get("scopeHint")
        .and_then(Value::as_str)
        .unwrap_or("once");
    let cursor = choices.iter().position(|c| *c == hint).unwrap_or(0);
    Approval {
        request_id: str_of(params, "requestId").to_owned(),
        tool: request.tool,
        summary: request.summary,
        risk: request.risk,
        guard: params
            .get("guard")
            .and_then(Value::as_str)
            .map(str::to_owned),
        choices,
        cursor,
        timeout_sec: request.timeout_sec,
    }
}

/// Reads a `question.request`'s params.
pub fn question_from(params: &Value) -> QuestionBatch {
    let questions = params["questions"]
        .as_array()
        .map(|qs| {
            qs.iter()
                .map(|q| {
                    let options: Vec<(String, String)> = q["options"]
                        .as_array()
                        .map(|os| {
                            os.iter()
                                .map(|o| {
                                    (
                                        str_of(o, "label").to_owned(),
                                        str_of(o, "description").to_owned(),
                                    )
                                })
                                .collect()
                        })
                        .unwrap_or_default();
                    Question {
                        header: str_of(q, "header").to_owned(),
                        question: str_of(q, "question").to_owned(),
                        allow_other: q["allowOther"].as_bool().unwrap_or(false)
                            || options.is_empty(),
                        options,
                        multi: q["multi"].as_bool().unwrap_or(false),
                        secret: q["secret"].as_bool().unwrap_or(false),
                    }
                })
                .collect()
        })
        .unwrap_or_default();
    QuestionBatch {
        request_id: str_of(params, "requestId").to_owned(),
        questions,
        index: 0,
        cursor: 0,
        selected: BTreeSet::new(),
        text: String::new(),
        answers: Vec::new(),
    }
}

pub(super) fn commands_from(result: &Value) -> Vec<Command> {
    result["commands"]
        .as_array()
        .map(|cs| {
            cs.iter()
                .map(|c| Command {
                    name: str_of(c, "name").trim_start_matches('/').to_owned(),
                    summary: str_of(c, "summary").to_owned(),
                    hint: args_hint(c.get("argsSchema")),
                    source: str_of(c, "source").to_owned(),
                })
                .filter(|c| !c.name.is_empty())
                .collect()
        })
        .unwrap_or_default()
}

/// An argument hint from a command's `argsSchema` (JSON Schema): the arguments of its
/// usage line (`x-usage` without the command's name), else its `description`, else its
/// property names / enum values.
pub(super) fn args_hint(schema: Option<&Value>) -> String {
    let Some(schema) = schema.filter(|s| s.is_object()) else {
        return String::new();
    };
    if let Some(usage) = schema.get("x-usage").and_then(Value::as_str) {
        return usage
            .trim()
            .split_once(char::is_whitespace)
            .map(|(_, args)| args.trim().to_owned())
            .unwrap_or_default();
    }
    if let Some(d) = schema.get("description").and_then(Value::as_str) {
        return d.to_owned();
    }
    if let Some(values) = schema.get("enum").and_then(Value::as_array) {
        return values
            .iter()
            .filter_map(Value::as_str)
            .collect::<Vec<_>>()
            .join("|");
    }
    if let Some(props) = schema.get("properties").and_then(Value::as_object) {
        return props
            .keys()
            .map(|k| format!("<{k}>"))
            .collect::<Vec<_>>()
            .join(" ");
    }
    String::new()
}

pub(super) fn sessions_from(result: &Value) -> Vec<SessionRow> {
    let mut rows: Vec<SessionRow> = result["sessions"]
        .as_array()
        .map(|ss| {
            ss.iter()
                .filter(|s| matches!(s.get("kind").and_then(Value::as_str), None | Some("chat")))
                .map(|s| SessionRow {
                    session_id: str_of(s, "sessionId").to_owned(),
                    label: first_non_empty(&[
                        str_of(s, "title"),
                        str_of(s, "lastPrompt"),
                        "(untitled)",
                    ])
                    .replace('\n', " "),
                    status: first_non_empty(&[str_of(s, "status"), "idle"]).to_owned(),
                    last_activity: first_non_empty(&[
                        str_of(s, "lastActivityAt"),
                        str_of(s, "createdAt"),
                    ])
                    .to_owned(),
                })
                .collect()
        })
        .unwrap_or_default();
    rows.sort_by(|a, b| b.last_activity.cmp(&a.last_activity));
    rows
}
