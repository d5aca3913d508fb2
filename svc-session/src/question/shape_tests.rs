use serde_json::json;

use super::*;

#[test]
fn both_common_shapes_normalise_to_the_spec_questions() {
    let listed = normalize(&json!({"questions": [{
        "header": "DB", "question": "Which database?", "multiSelect": true, "allowOther": true,
        "options": [{"label": "sqlite", "description": "file", "preview": "x"}, {"label": "postgres"}]
    }]}))
    .unwrap();
    assert_eq!(listed.len(), 1);
    assert_eq!(listed[0].header, "DB");
    assert!(listed[0].multi && listed[0].allow_other && !listed[0].secret);
    assert_eq!(listed[0].options[0].description, "file");
    let flat = normalize(&json!({"question": "Pick", "choices": ["a", "b"], "multi_select": true}))
        .unwrap();
    assert_eq!(flat[0].question, "Pick");
    assert_eq!(
        flat[0]
            .options
            .iter()
            .map(|c| c.label.as_str())
            .collect::<Vec<_>>(),
        ["a", "b"]
    );
    assert!(flat[0].multi);
    let free =
        normalize(&json!({"questions": [{"question": "Token?", "secret": true, "multi": false}]}))
            .unwrap();
    assert!(free[0].options.is_empty() && free[0].secret);
}

#[test]
fn limits_and_bad_shapes_are_clear_errors() {
    let q = |n: usize| json!({"question": format!("q{n}")});
    let six: Vec<_> = (0..6).map(q).collect();
    let cases = [
        (json!({"questions": six}), "at most 5"),
        (json!({"questions": []}), "must not be empty"),
        (json!({"question": "x", "choices": ["only"]}), "at least 2"),
        (
            json!({"question": "x", "choices": ["1","2","3","4","5","6","7","8","9"]}),
            "at most 8",
        ),
        (
            json!({"questions": [{"question": "x", "header": "h".repeat(41)}]}),
            "questions[0].header",
        ),
        (
            json!({"questions": [{"question": ""}]}),
            "questions[0].question",
        ),
        (
            json!({"questions": [{"question": "x", "options": [{"label": "a"}, {"label": "a"}]}]}),
            "repeats",
        ),
        (
            json!({"questions": [{"question": "x", "options": [{"label": "a"}, {"nolabel": 1}]}]}),
            "options[1].label",
        ),
        (
            json!({"questions": [{"question": "x", "secret": "yes"}]}),
            "secret",
        ),
        (json!({"nothing": 1}), "missing required argument"),
        (json!("text"), "JSON object"),
    ];
    for (args, want) in cases {
        let e = normalize(&args).unwrap_err();
        assert!(e.contains(want), "{args}: {e}");
    }
}

fn batch() -> Vec<Question> {
    normalize(&json!({"questions": [
        {"question": "DB?", "options": [{"label": "sqlite"}, {"label": "pg"}]},
        {"question": "Extras?", "multiSelect": true, "allowOther": true, "options": [{"label": "a"}, {"label": "b"}]},
        {"question": "Token?", "secret": true}
    ]}))
    .unwrap()
}

fn a(selected: &[&str], text: Option<&str>) -> Answer {
    Answer {
        selected: selected.iter().map(|s| s.to_string()).collect(),
        text: text.map(str::to_owned),
    }
}

#[test]
fn answers_of_the_wrong_count_or_shape_name_the_field() {
    let qs = batch();
    assert_eq!(
        validate_answers(&qs, vec![], "params.answers").unwrap(),
        None
    );
    let cases = [
        (vec![a(&["pg"], None)], "params.answers"),
        (
            vec![a(&["mysql"], None), a(&[], None), a(&[], None)],
            "params.answers[0].selected[0]",
        ),
        (
            vec![a(&["pg", "sqlite"], None), a(&[], None), a(&[], None)],
            "params.answers[0].selected",
        ),
        (
            vec![a(&["pg"], Some("also")), a(&[], None), a(&[], None)],
            "params.answers[0].text",
        ),
        (
            vec![a(&["pg"], None), a(&[], None), a(&["x"], None)],
            "params.answers[2].selected",
        ),
    ];
    for (answers, field) in cases {
        let (f, _) = validate_answers(&qs, answers, "params.answers").unwrap_err();
        assert_eq!(f, field);
    }
    let ok = validate_answers(
        &qs,
        vec![
            a(&["pg"], None),
            a(&["a", "b"], Some("c too")),
            a(&[], Some("s3cr3t")),
        ],
        "params.answers",
    )
    .unwrap()
    .unwrap();
    assert_eq!(ok.len(), 3);
}

#[test]
fn the_model_gets_the_answers_and_the_stored_copy_masks_secrets() {
    let qs = batch();
    let answers = vec![a(&["pg"], None), a(&[], None), a(&[], Some("s3cr3t"))];
    let clear = answered_text(&qs, &answers, false);
    let masked = answered_text(&qs, &answers, true);
    assert!(
        clear.contains("\"pg\"") && clear.contains("s3cr3t"),
        "{clear}"
    );
    assert!(
        clear.contains("declined"),
        "an empty answer is said plainly: {clear}"
    );
    assert!(
        !masked.contains("s3cr3t") && masked.contains(SECRET_MASK),
        "{masked}"
    );
    assert!(unanswered_text("timeout", 600).contains("600 s"));
    assert!(unanswered_text("user", 1).contains("declined"));
    let parsed =
        answers_from_json(&json!([{"selected": ["pg"]}, {"text": null}]), "answers").unwrap();
    assert_eq!(parsed, vec![a(&["pg"], None), a(&[], None)]);
    assert_eq!(
        answers_from_json(&json!([{"selected": "pg"}]), "answers")
            .unwrap_err()
            .0,
        "answers[0].selected"
    );
}
