use super::*;

#[test]
fn split_keeps_everything_within_the_limit() {
    let text = format!(
        "{}\n\n{}\n{}",
        "a".repeat(30),
        "b ".repeat(40),
        "c".repeat(100)
    );
    let parts = split(&text, 25);
    assert!(parts.iter().all(|p| p.chars().count() <= 25), "{parts:?}");
    let joined: String = parts
        .concat()
        .chars()
        .filter(|c| !c.is_whitespace())
        .collect();
    let want: String = text.chars().filter(|c| !c.is_whitespace()).collect();
    assert_eq!(joined, want);
    // Multi-byte characters are never cut in half.
    let parts = split(&"가".repeat(10), 3);
    assert_eq!(parts.len(), 4);
}

#[test]
fn telegram_gets_escaped_html() {
    let html = to_telegram_html(
        "**bold** <x> & `a<b` [l](https://e.com?a=1&b=2)\n\n```rust\nfn x() {}\n```",
    );
    assert!(html.contains("<b>bold</b>"), "{html}");
    assert!(html.contains("&lt;x&gt; &amp;"), "{html}");
    assert!(html.contains("<code>a&lt;b</code>"), "{html}");
    assert!(
        html.contains("<a href=\"https://e.com?a=1&amp;b=2\">l</a>"),
        "{html}"
    );
    assert!(
        html.contains("<pre><code class=\"language-rust\">fn x() {}</code></pre>"),
        "{html}"
    );
}

#[test]
fn slack_gets_mrkdwn() {
    let s = to_slack("**bold** _it_ ~~gone~~ [link](https://e.com) a<b");
    assert_eq!(s, "*bold* _it_ ~gone~ <https://e.com|link> a&lt;b");
}

#[test]
fn render_splits_long_answers_per_platform() {
    let long = "word ".repeat(2000);
    for p in [Platform::Telegram, Platform::Discord, Platform::Slack] {
        let parts = render(p, &long);
        assert!(parts.len() > 1);
        assert!(parts.iter().all(|x| x.text.chars().count() <= limit(p)));
    }
}
