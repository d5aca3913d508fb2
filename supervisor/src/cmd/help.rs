//! `snowpea cmd --help` and `help` without a session, both from `command.list` — the same
//! declarations the daemon runs the commands by (name, summary, `x-usage`, `x-tiers`), so
//! the help cannot drift from what runs (issue 39 item 3; issue 32 item 10).

use clap::CommandFactory;
use serde_json::{json, Value};
use snowpea_common::home::Home;

use super::output::Result as CmdResult;
use super::{codes, exit, Invocation};

/// The usage line of a listed command without its leading `/` (`name [args]` when it has
/// no `x-usage`).
fn usage(row: &Value) -> String {
    let name = row["name"].as_str().unwrap_or_default();
    match row["argsSchema"]["x-usage"].as_str() {
        Some(u) if !u.is_empty() => u.trim_start_matches('/').to_owned(),
        _ => format!("{name} [args]"),
    }
}

/// Which forms of the command have which tier: `read: mode, mode status · medium_write:
/// mode plan, …` from `x-tiers`, else its `x-risk`.
fn tiers(row: &Value) -> String {
    let name = row["name"].as_str().unwrap_or_default();
    let schema = &row["argsSchema"];
    let Some(map) = schema["x-tiers"].as_object() else {
        let risk = schema["x-risk"].as_str().unwrap_or("low_write");
        return if row["source"] == "builtin" {
            risk.to_owned()
        } else {
            format!("{risk}; runs a model turn (not headless)")
        };
    };
    let mut groups: Vec<(String, Vec<String>)> = Vec::new();
    for (form, tier) in map {
        let tier = tier.as_str().unwrap_or_default().to_owned();
        let form = if form.is_empty() {
            name.to_owned()
        } else {
            format!("{name} {form}")
        };
        match groups.iter_mut().find(|(t, _)| *t == tier) {
            Some((_, forms)) => forms.push(form),
            None => groups.push((tier, vec![form])),
        }
    }
    groups
        .iter()
        .map(|(t, forms)| format!("{t}: {}", forms.join(", ")))
        .collect::<Vec<_>>()
        .join(" · ")
}

/// One command as the help shows it: usage, summary, tiers.
pub fn describe(row: &Value) -> String {
    format!(
        "  {}\n      {}\n      {}",
        usage(row),
        row["summary"].as_str().unwrap_or_default(),
        tiers(row)
    )
}

/// The commands section of `snowpea cmd --help` for a `command.list` result.
pub fn commands_section(list: &Value) -> String {
    let rows: Vec<String> = list["commands"]
        .as_array()
        .into_iter()
        .flatten()
        .map(describe)
        .collect();
    format!(
        "Commands of the running suite (command.list) with their risk tiers:\n{}",
        rows.join("\n")
    )
}

/// `help [command]` answered from `command.list` without a session: the same text and
/// `data` as the daemon's `/help`.
pub fn reply(list: &Value, name: Option<&str>) -> (CmdResult, i32) {
    let rows = list["commands"].as_array().cloned().unwrap_or_default();
    let risk = |c: &Value| {
        c["argsSchema"]["x-risk"]
            .as_str()
            .unwrap_or("low_write")
            .to_owned()
    };
    if let Some(name) = name.map(|n| n.trim_start_matches('/')) {
        let Some(c) = rows.iter().find(|c| c["name"] == name) else {
            let r = CmdResult::failure(
                "help",
                codes::NOT_FOUND,
                format!(
                    "unknown command /{}",
                    name.chars().take(64).collect::<String>()
                ),
                Some("read".into()),
            );
            return (r, exit::FAILURE);
        };
        let data = json!({"name": c["name"], "summary": c["summary"], "source": c["source"], "risk": risk(c), "argsSchema": c["argsSchema"]});
        let mut r = CmdResult::success("help", data, Some("read".into()));
        r.text = format!(
            "/{}\n{} [{}; {}]",
            usage(c),
            c["summary"].as_str().unwrap_or_default(),
            risk(c),
            c["source"].as_str().unwrap_or_default()
        );
        return (r, exit::OK);
    }
    let mut text = String::from("Commands:");
    let mut list_data = Vec::new();
    for c in &rows {
        let name = c["name"].as_str().unwrap_or_default();
        text.push_str(&format!(
            "\n  /{name:<16} {} [{}]",
            c["summary"].as_str().unwrap_or_default(),
            risk(c)
        ));
        list_data.push(
            json!({"name": name, "summary": c["summary"], "source": c["source"], "risk": risk(c)}),
        );
    }
    let mut r = CmdResult::success(
        "help",
        json!({ "commands": list_data }),
        Some("read".into()),
    );
    r.text = text;
    (r, exit::OK)
}

/// Prints `snowpea cmd --help` (clap's options and the target rule, then the running
/// suite's commands) or `snowpea cmd <command> --help`; returns the exit code.
pub async fn print(inv: &Invocation) -> i32 {
    let list = match Home::resolve(inv.home.as_deref()) {
        Ok(home) => match super::connect(&home).await {
            Ok(client) => {
                let list = table(&client, inv).await;
                client.close().await;
                list
            }
            Err(_) => None,
        },
        Err(_) => None,
    };
    if !inv.name.is_empty() {
        let Some(list) = list else {
            eprintln!(
                "snowpea cmd: the suite is not running, so its commands cannot be shown; start it with `snowpea supervisor start`"
            );
            return exit::NOT_RUNNING;
        };
        return match list["commands"]
            .as_array()
            .into_iter()
            .flatten()
            .find(|c| c["name"] == inv.name.as_str())
        {
            Some(row) => {
                println!("{}", describe(row));
                exit::OK
            }
            None => {
                eprintln!(
                    "snowpea cmd: {}: unknown command {}; `snowpea cmd --help` lists them",
                    codes::NOT_FOUND,
                    inv.name.chars().take(64).collect::<String>()
                );
                exit::FAILURE
            }
        };
    }
    let mut cli = crate::cli::Cli::command();
    // Built, so the usage line names `snowpea cmd`.
    cli.build();
    let help = cli
        .find_subcommand_mut("cmd")
        .map(|c| c.render_help().to_string())
        .unwrap_or_default();
    println!("{help}");
    match list {
        Some(list) => println!("\n{}", commands_section(&list)),
        None => println!(
            "\nThe suite is not running, so its commands cannot be listed here: start it with \
             `snowpea supervisor start`, then run `snowpea cmd --help` again."
        ),
    }
    exit::OK
}

/// The `command.list` a command here would see: the target session's table (project
/// commands included), else the global one; `None` when the call fails.
async fn table(client: &snowpea_sdk::Client, inv: &Invocation) -> Option<Value> {
    let session = match (&inv.session, &inv.workdir) {
        (Some(id), _) => Some(id.clone()),
        (None, dir) => {
            let dir = match dir {
                Some(d) => d.clone(),
                None => std::env::current_dir().ok()?,
            };
            super::target::of_dir(client, &dir).await.ok().flatten()
        }
    };
    let params = match session {
        Some(id) => json!({ "sessionId": id }),
        None => json!({}),
    };
    tokio::time::timeout(
        std::time::Duration::from_secs(inv.timeout.max(1)),
        client.call("command.list", params),
    )
    .await
    .ok()?
    .ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn mode_row() -> Value {
        json!({"name": "mode", "summary": "Show or switch the mode", "source": "builtin", "argsSchema": {
            "x-usage": "/mode [plan|accept|auto|status|save [--scope=global|project]]",
            "x-risk": "medium_write",
            "x-tiers": {"": "read", "accept": "medium_write", "auto": "medium_write", "plan": "medium_write", "save": "medium_write", "status": "read"}
        }})
    }

    #[test]
    fn a_command_is_described_by_its_usage_summary_and_tiers_from_the_declaration() {
        assert_eq!(
            describe(&mode_row()),
            "  mode [plan|accept|auto|status|save [--scope=global|project]]\n      Show or switch the mode\n      read: mode, mode status · medium_write: mode accept, mode auto, mode plan, mode save"
        );
        let md = json!({"name": "hi", "summary": "Say hi", "source": "project", "argsSchema": {"x-risk": "low_write"}});
        assert_eq!(
            describe(&md),
            "  hi [args]\n      Say hi\n      low_write; runs a model turn (not headless)"
        );
        let section = commands_section(&json!({"commands": [mode_row(), md]}));
        assert!(section.starts_with("Commands of the running suite (command.list)"));
        assert!(!section.contains("not in this build"), "{section}");
    }

    #[test]
    fn help_without_a_session_answers_from_the_list() {
        let list = json!({"commands": [mode_row()]});
        let (r, code) = reply(&list, None);
        assert_eq!(code, exit::OK);
        assert_eq!(r.data["commands"][0]["name"], "mode");
        assert_eq!(r.data["commands"][0]["risk"], "medium_write");
        assert!(r.text.starts_with("Commands:\n  /mode "), "{}", r.text);
        let (r, code) = reply(&list, Some("/mode"));
        assert_eq!(code, exit::OK);
        assert!(r.text.starts_with("/mode [plan|accept"), "{}", r.text);
        let (r, code) = reply(&list, Some("nope"));
        assert_eq!(
            (code, r.code.as_deref()),
            (exit::FAILURE, Some(codes::NOT_FOUND))
        );
    }
}
