//! The shapes of a question batch: the `ask_user` arguments models send (both common
//! shapes, normalised to the spec's `questions[]`), the answers clients send (validated
//! against the questions, errors naming the field), and the text the model gets back
//! (with secret answers masked in the copy that is stored).

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};
use snowpea_proto::session::v1 as pb;

/// Most questions in one `ask_user` call.
pub const MAX_QUESTIONS: usize = 5;
/// Fewest options of a multiple-choice question (a question with none is free text).
pub const MIN_OPTIONS: usize = 2;
/// Most options of one question.
pub const MAX_OPTIONS: usize = 8;
/// Longest `header` (a short tag shown above the question), in characters.
pub const MAX_HEADER_CHARS: usize = 40;
/// Longest question text, in characters.
pub const MAX_QUESTION_CHARS: usize = 2_000;
/// Longest option label, in characters.
pub const MAX_LABEL_CHARS: usize = 200;
/// Longest option description or preview, in characters.
pub const MAX_DETAIL_CHARS: usize = 4_000;
/// Longest free-text answer, in bytes.
pub const MAX_ANSWER_BYTES: usize = 64 * 1024;
/// What a secret answer looks like wherever it is stored or shown (events, logs).
pub const SECRET_MASK: &str = "••••••";

/// One option of a question.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Choice {
    /// The text the person picks (and the answer's `selected` entry).
    pub label: String,
    /// What picking it means.
    #[serde(default)]
    pub description: String,
    /// Longer content shown when the option is focused (code, a mock-up).
    #[serde(default)]
    pub preview: String,
}

/// One question of a batch (spec `question.request` `questions[]`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Question {
    /// Short tag shown above the question (≤ [`MAX_HEADER_CHARS`]).
    #[serde(default)]
    pub header: String,
    /// The question.
    pub question: String,
    /// Choices; empty = a free-text question.
    #[serde(default)]
    pub options: Vec<Choice>,
    /// Several options may be picked.
    #[serde(default)]
    pub multi: bool,
    /// A free-text answer is accepted beside the options.
    #[serde(default)]
    pub allow_other: bool,
    /// The answer is a secret: masked wherever it is stored, clear only to the model.
    #[serde(default)]
    pub secret: bool,
}

impl Question {
    /// The protocol message.
    pub fn to_proto(&self) -> pb::question_request::Question {
        pb::question_request::Question {
            allow_other: self.allow_other,
            header: self.header.clone(),
            multi: self.multi,
            options: self
                .options
                .iter()
                .map(|c| pb::question_request::question::Option {
                    description: c.description.clone(),
                    label: c.label.clone(),
                    preview: c.preview.clone(),
                })
                .collect(),
            question: self.question.clone(),
            secret: self.secret,
        }
    }
}

/// One answer (spec `question.respond` `answers[]`): picked labels and/or free text.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Answer {
    /// Labels of the picked options.
    pub selected: Vec<String>,
    /// Free text (a free-text question, or "other").
    pub text: Option<String>,
}

impl Answer {
    /// True when the person gave nothing for this question (it counts as declined).
    pub fn is_empty(&self) -> bool {
        self.selected.is_empty() && self.text.as_deref().is_none_or(|t| t.trim().is_empty())
    }
}

fn chars(s: &str) -> usize {
    s.chars().count()
}

fn str_field<'a>(
    o: &'a Map<String, Value>,
    names: &[&str],
    at: &str,
) -> Result<Option<&'a str>, String> {
    for n in names {
        match o.get(*n) {
            None | Some(Value::Null) => continue,
            Some(Value::String(s)) => return Ok(Some(s)),
            Some(_) => return Err(format!("`{at}.{n}` must be a string")),
        }
    }
    Ok(None)
}

fn bool_field(o: &Map<String, Value>, names: &[&str], at: &str) -> Result<bool, String> {
    for n in names {
        match o.get(*n) {
            None | Some(Value::Null) => continue,
            Some(Value::Bool(b)) => return Ok(*b),
            Some(_) => return Err(format!("`{at}.{n}` must be a boolean")),
        }
    }
    Ok(false)
}

fn limit(value: &str, max: usize, at: &str) -> Result<(), String> {
    if chars(value) > max {
        return Err(format!("`{at}` is longer than {max} characters"));
    }
    Ok(())
}

fn choice(v: &Value, at: &str) -> Result<Choice, String> {
    let c = match v {
        // The flat shape's choices are plain strings.
        Value::String(s) => Choice {
            label: s.clone(),
            description: String::new(),
            preview: String::new(),
        },
        Value::Object(o) => Choice {
            label: str_field(o, &["label"], at)?
                .ok_or_else(|| format!("`{at}.label` is required"))?
                .to_owned(),
            description: str_field(o, &["description"], at)?
                .unwrap_or_default()
                .to_owned(),
            preview: str_field(o, &["preview"], at)?
                .unwrap_or_default()
                .to_owned(),
        },
        _ => return Err(format!("`{at}` must be a string or an object with `label`")),
    };
    if c.label.trim().is_empty() {
        return Err(format!("`{at}.label` must not be empty"));
    }
    limit(&c.label, MAX_LABEL_CHARS, &format!("{at}.label"))?;
    limit(
        &c.description,
        MAX_DETAIL_CHARS,
        &format!("{at}.description"),
    )?;
    limit(&c.preview, MAX_DETAIL_CHARS, &format!("{at}.preview"))?;
    Ok(c)
}

fn question(o: &Map<String, Value>, at: &str) -> Result<Question, String> {
    let text = str_field(o, &["question", "prompt"], at)?
        .ok_or_else(|| format!("`{at}.question` is required"))?;
    if text.trim().is_empty() {
        return Err(format!("`{at}.question` must not be empty"));
    }
    limit(text, MAX_QUESTION_CHARS, &format!("{at}.question"))?;
    let header = str_field(o, &["header"], at)?.unwrap_or_default();
    limit(header, MAX_HEADER_CHARS, &format!("{at}.header"))?;
    let (key, list) = match ["options", "choices"]
        .iter()
        .find_map(|k| o.get(*k).filter(|v| !v.is_null()).map(|v| (*k, v)))
    {
        None => ("options", &[][..]),
        Some((k, Value::Array(a))) => (k, a.as_slice()),
        Some((k, _)) => return Err(format!("`{at}.{k}` must be a list")),
    };
    if !list.is_empty() && list.len() < MIN_OPTIONS {
        return Err(format!(
            "`{at}.{key}` needs at least {MIN_OPTIONS} options (or none for a free-text question)"
        ));
    }
    if list.len() > MAX_OPTIONS {
        return Err(format!(
            "`{at}.{key}` has {} options; at most {MAX_OPTIONS} are allowed",
            list.len()
        ));
    }
    let options = list
        .iter()
        .enumerate()
        .map(|(i, v)| choice(v, &format!("{at}.{key}[{i}]")))
        .collect::<Result<Vec<_>, _>>()?;
    for (i, c) in options.iter().enumerate() {
        if options[..i].iter().any(|d| d.label == c.label) {
            return Err(format!(
                "`{at}.{key}[{i}].label` repeats {:?}; labels must differ",
                c.label
            ));
        }
    }
    Ok(Question {
        header: header.to_owned(),
        question: text.to_owned(),
        options,
        multi: bool_field(o, &["multiSelect", "multi", "multi_select"], at)?,
        allow_other: bool_field(o, &["allowOther", "allow_other"], at)?,
        secret: bool_field(o, &["secret"], at)?,
    })
}

/// Normalises `ask_user` arguments to the batch's questions. Accepted shapes:
/// `{questions: [{header?, question, options?: [{label, description?, preview?}],
/// multiSelect?|multi?, allowOther?, secret?}]}` and the flat
/// `{question, choices?: [string], multi_select?, secret?}`. Errors name the argument and
/// the limit.
pub fn normalize(args: &Value) -> Result<Vec<Question>, String> {
    let o = args
        .as_object()
        .ok_or_else(|| "arguments must be a JSON object".to_string())?;
    let questions = match o.get("questions").filter(|v| !v.is_null()) {
        Some(Value::Array(list)) => {
            if list.is_empty() {
                return Err("`questions` must not be empty".into());
            }
            if list.len() > MAX_QUESTIONS {
                return Err(format!(
                    "`questions` has {} entries; at most {MAX_QUESTIONS} questions per call",
                    list.len()
                ));
            }
            list.iter()
                .enumerate()
                .map(|(i, q)| {
                    let at = format!("questions[{i}]");
                    let qo = q
                        .as_object()
                        .ok_or_else(|| format!("`{at}` must be an object"))?;
                    question(qo, &at)
                })
                .collect::<Result<Vec<_>, _>>()?
        }
        Some(_) => return Err("`questions` must be a list".into()),
        None if o.contains_key("question") => {
            vec![question(o, "arguments").map_err(|e| e.replace("`arguments.", "`"))?]
        }
        None => return Err("missing required argument `questions` (or `question`)".into()),
    };
    Ok(questions)
}

/// Validates answers against `questions`; `field` is the list's path
/// (`params.answers`). An empty list declines the batch (`Ok(None)`).
pub fn validate_answers(
    questions: &[Question],
    answers: Vec<Answer>,
    field: &str,
) -> Result<Option<Vec<Answer>>, (String, String)> {
    if answers.is_empty() {
        return Ok(None);
    }
    if answers.len() != questions.len() {
        return Err((
            field.to_owned(),
            format!(
                "has {} entries; the batch has {} questions (one answer per question, in order, or none to decline)",
                answers.len(),
                questions.len()
            ),
        ));
    }
    for (i, (q, a)) in questions.iter().zip(&answers).enumerate() {
        let at = format!("{field}[{i}]");
        if q.options.is_empty() && !a.selected.is_empty() {
            return Err((
                format!("{at}.selected"),
                "this question has no options; answer with `text`".into(),
            ));
        }
        if !q.multi && a.selected.len() > 1 {
            return Err((
                format!("{at}.selected"),
                "this question takes one option".into(),
            ));
        }
        for (j, s) in a.selected.iter().enumerate() {
            if !q.options.iter().any(|c| &c.label == s) {
                // A secret question's answer is never quoted back (errors may be logged).
                let what = if q.secret {
                    "the value".to_owned()
                } else {
                    format!("{s:?}")
                };
                return Err((
                    format!("{at}.selected[{j}]"),
                    format!("{what} is not one of the question's options"),
                ));
            }
        }
        if let Some(t) = &a.text {
            if !q.options.is_empty() && !q.allow_other && !t.trim().is_empty() {
                return Err((
                    format!("{at}.text"),
                    "this question takes one of its options only (allowOther is false)".into(),
                ));
            }
            if t.len() > MAX_ANSWER_BYTES {
                return Err((
                    format!("{at}.text"),
                    format!("is longer than {MAX_ANSWER_BYTES} bytes"),
                ));
            }
        }
    }
    Ok(Some(answers))
}

/// Answers from JSON (`[{selected?, text?}]`, the `question.request` result); `field` names
/// the list in errors.
pub fn answers_from_json(v: &Value, field: &str) -> Result<Vec<Answer>, (String, String)> {
    let Some(list) = v.as_array() else {
        return match v {
            Value::Null => Ok(vec![]),
            _ => Err((field.to_owned(), "must be a list".into())),
        };
    };
    list.iter()
        .enumerate()
        .map(|(i, a)| {
            let at = format!("{field}[{i}]");
            let o = a
                .as_object()
                .ok_or_else(|| (at.clone(), "must be an object".to_string()))?;
            let selected = match o.get("selected") {
                None | Some(Value::Null) => vec![],
                Some(Value::Array(s)) => s
                    .iter()
                    .enumerate()
                    .map(|(j, x)| {
                        x.as_str().map(str::to_owned).ok_or_else(|| {
                            (format!("{at}.selected[{j}]"), "must be a string".into())
                        })
                    })
                    .collect::<Result<Vec<_>, _>>()?,
                Some(_) => return Err((format!("{at}.selected"), "must be a list".into())),
            };
            let text = match o.get("text") {
                None | Some(Value::Null) => None,
                Some(Value::String(s)) => Some(s.clone()),
                Some(_) => return Err((format!("{at}.text"), "must be a string".into())),
            };
            Ok(Answer { selected, text })
        })
        .collect()
}

/// The text the model gets for an answered batch; with `mask`, secret answers are replaced
/// by [`SECRET_MASK`] (the copy stored in the `tool.result` event).
pub fn answered_text(questions: &[Question], answers: &[Answer], mask: bool) -> String {
    let mut out = String::from("The person answered:\n");
    for (i, (q, a)) in questions.iter().zip(answers).enumerate() {
        let head = if q.header.is_empty() {
            format!("{}. {}", i + 1, q.question)
        } else {
            format!("{}. [{}] {}", i + 1, q.header, q.question)
        };
        let body = if a.is_empty() {
            "(declined: no answer given)".to_owned()
        } else if q.secret && mask {
            SECRET_MASK.to_owned()
        } else {
            let mut parts = Vec::new();
            if !a.selected.is_empty() {
                let picked: Vec<String> = a.selected.iter().map(|s| format!("{s:?}")).collect();
                parts.push(format!("selected {}", picked.join(", ")));
            }
            if let Some(t) = a.text.as_deref().filter(|t| !t.trim().is_empty()) {
                parts.push(format!("wrote {t:?}"));
            }
            parts.join("; ")
        };
        out.push_str(&format!("{head}\n   → {body}\n"));
    }
    out.trim_end().to_owned()
}

/// The text the model gets when the batch got no answers; `by` says why.
pub fn unanswered_text(by: &str, timeout_sec: i64) -> String {
    match by {
        "timeout" => format!(
            "No answer: the person did not answer within {timeout_sec} s, so the questions were declined. Continue without the answers (state your assumptions) or ask again later."
        ),
        "origin-unreachable" => "No answer: the person's client could not show the questions, so they were declined. Continue without the answers (state your assumptions).".into(),
        "interrupted" => "No answer: the questions were withdrawn because the turn was interrupted.".into(),
        "closed" => "No answer: the session was closed.".into(),
        _ => "The person declined to answer these questions. Do not ask them again; continue without the answers.".into(),
    }
}

#[cfg(test)]
#[path = "shape_tests.rs"]
mod tests;
