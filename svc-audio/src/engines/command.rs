//! The `command` engines: user templates from `audio.tts.command` (`{text}`, `{out}`,
//! `{voice}`) and `audio.stt.command` (`{path}`, `{language}`), also used for
//! `audio.player` (`{path}`) and `audio.recorder` (`{out}`).
//!
//! Never a shell: the TEMPLATE is split into argv with POSIX shell-words rules (quotes,
//! backslashes; no expansion of any kind), then each placeholder is substituted inside
//! each argument. A value is never split or interpreted, so `{text}` holding
//! `"; rm -rf ~"` is one argument.

use std::ffi::OsString;
use std::path::Path;
use std::time::Duration;

use crate::child::{run, ChildSpec};
use crate::error::{Error, Result};

/// Why a template cannot be used.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum TemplateError {
    /// Unbalanced quotes or a trailing backslash.
    #[error("the command template has unbalanced quotes")]
    Unbalanced,
    /// Nothing to run.
    #[error("the command template is empty")]
    Empty,
}

/// Splits a template into argv (shell-words rules, no expansion).
pub fn split(template: &str) -> Result<Vec<String>, TemplateError> {
    let argv = shlex::split(template).ok_or(TemplateError::Unbalanced)?;
    if argv.is_empty() || argv[0].is_empty() {
        return Err(TemplateError::Empty);
    }
    Ok(argv)
}

/// Splits `template` and substitutes `vars` (`("text", "…")` replaces `{text}`) in every
/// argument.
pub fn expand(template: &str, vars: &[(&str, &str)]) -> Result<Vec<String>, TemplateError> {
    Ok(split(template)?
        .into_iter()
        .map(|arg| {
            vars.iter()
                .fold(arg, |a, (k, v)| a.replace(&format!("{{{k}}}"), v))
        })
        .collect())
}

/// True when `template` mentions `{name}`.
pub fn mentions(template: &str, name: &str) -> bool {
    template.contains(&format!("{{{name}}}"))
}

fn spec(label: &str, argv: Vec<String>, timeout: Duration) -> ChildSpec {
    let mut it = argv.into_iter();
    let program = it.next().unwrap_or_default();
    ChildSpec::new(label, program, it.map(OsString::from).collect(), timeout)
}

fn bad_template(key: &str, e: TemplateError) -> Error {
    Error::Off {
        message: format!("{key}: {e}"),
        reason: "engine_missing",
    }
}

/// Runs the speech template: `{out}` when the template has it, else the wav is read from
/// stdout.
pub async fn speak(
    template: &str,
    text: &str,
    voice: Option<&str>,
    out: &Path,
    timeout: Duration,
) -> Result<()> {
    let out_s = out.to_string_lossy();
    let argv = expand(
        template,
        &[
            ("text", text),
            ("out", &out_s),
            ("voice", voice.unwrap_or("")),
        ],
    )
    .map_err(|e| bad_template("audio.tts.command", e))?;
    let output = run(&spec(super::COMMAND, argv, timeout), None).await?;
    if !mentions(template, "out") {
        std::fs::write(out, &output.stdout)?;
    }
    Ok(())
}

/// Runs the transcription template; the transcript is what it prints.
pub async fn transcribe(
    template: &str,
    wav: &Path,
    language: Option<&str>,
    timeout: Duration,
) -> Result<String> {
    let path = wav.to_string_lossy();
    let argv = expand(
        template,
        &[("path", &path), ("language", language.unwrap_or(""))],
    )
    .map_err(|e| bad_template("audio.stt.command", e))?;
    let output = run(&spec(super::COMMAND, argv, timeout), None).await?;
    Ok(String::from_utf8_lossy(&output.stdout).into_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn placeholders_are_substituted_per_argument_and_never_split() {
        let argv = expand(
            "say --voice='x y' -o {out} --text={text}",
            &[
                ("text", "hi; rm -rf / $(id) `id` \"q\""),
                ("out", "/tmp/a b.wav"),
            ],
        )
        .unwrap();
        assert_eq!(
            argv,
            vec![
                "say",
                "--voice=x y",
                "-o",
                "/tmp/a b.wav",
                "--text=hi; rm -rf / $(id) `id` \"q\""
            ]
        );
    }

    #[test]
    fn bad_templates_are_rejected() {
        assert_eq!(split("say 'open"), Err(TemplateError::Unbalanced));
        assert_eq!(split("   "), Err(TemplateError::Empty));
    }

    #[tokio::test]
    async fn a_text_with_shell_syntax_reaches_the_program_as_one_argument() {
        // printf's first argument is the format: it prints the text verbatim, proving no
        // shell ever saw it (a shell would have run `rm` and printed nothing of it).
        let dir = tempfile::tempdir().unwrap();
        let marker = dir.path().join("must-survive");
        std::fs::write(&marker, b"x").unwrap();
        let out = dir.path().join("out.txt");
        let text = format!("hello; rm -rf {} && echo pwned", marker.display());
        speak(
            "printf %s {text}",
            &text,
            None,
            &out,
            Duration::from_secs(10),
        )
        .await
        .unwrap();
        assert_eq!(std::fs::read_to_string(&out).unwrap(), text);
        assert!(marker.exists());
    }
}
