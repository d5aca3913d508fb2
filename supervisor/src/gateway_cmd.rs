//! `snowpea gateway bind|list|unbind|sync`: the `gateway.*` methods (svc-chat, issue 22) from
//! the shell, against the running suite. Prints the result as JSON (`list` as a table unless
//! `--json`). Exit codes: 0 ok, 1 the daemon refused (the message names the field), 2 usage,
//! 3 the suite is not running.

use std::path::PathBuf;
use std::time::Duration;

use clap::{Args, Subcommand};
use serde_json::{json, Value};
use snowpea_sdk::{Client, ConnectOptions, ReconnectPolicy};

use crate::cli::{exit, HomeArgs};

/// `snowpea gateway …`.
#[derive(Debug, Args)]
pub struct GatewayArgs {
    /// What to do.
    #[command(subcommand)]
    pub command: GatewayCommand,
    /// Snowpea home (default: $SNOWPEA_HOME, else ~/.snowpea); accepted after the
    /// subcommand's arguments too.
    #[arg(long, value_name = "DIR", global = true)]
    pub home: Option<PathBuf>,
}

/// The `gateway.*` methods.
#[derive(Debug, Subcommand)]
pub enum GatewayCommand {
    /// Bind a chat platform (gateway.bind). Without --agent/--session each chat gets its own
    /// new session in --workdir (default: the current directory).
    Bind {
        /// telegram, discord or slack.
        platform: String,
        /// Credential name: a key of credentials.json or an environment variable of the
        /// daemon (e.g. TELEGRAM_BOT_TOKEN). Never the token itself.
        #[arg(long, value_name = "NAME")]
        credentials: String,
        /// Route to this named agent.
        #[arg(long, conflicts_with_all = ["session", "workdir", "mode"])]
        agent: Option<String>,
        /// Route every chat to this existing session.
        #[arg(long, conflicts_with_all = ["workdir", "mode"])]
        session: Option<String>,
        /// Workdir of the new sessions.
        #[arg(long, value_name = "DIR")]
        workdir: Option<PathBuf>,
        /// Permission mode of the new sessions: plan, accept or auto.
        #[arg(long)]
        mode: Option<String>,
        /// Only this chat / channel id.
        #[arg(long, value_name = "ID")]
        channel: Option<String>,
        /// The platform user allowed to answer approvals from chat.
        #[arg(long, value_name = "ID")]
        user: Option<String>,
    },
    /// List the bindings (gateway.list).
    List {
        /// Print the JSON result.
        #[arg(long)]
        json: bool,
    },
    /// Remove a binding (gateway.unbind).
    Unbind {
        /// The binding id (gw-…).
        binding_id: String,
    },
    /// Reconcile the automatic bindings with settings.gateway (gateway.sync).
    Sync,
}

/// Runs `snowpea gateway …`; returns the exit code.
pub async fn gateway(args: GatewayArgs) -> i32 {
    let (method, params) = match request(&args.command) {
        Ok(r) => r,
        Err(m) => {
            eprintln!("snowpea gateway: {m}");
            return exit::USAGE;
        }
    };
    let home = match (HomeArgs {
        home: args.home.clone(),
    })
    .resolve()
    {
        Ok(h) => h,
        Err(e) => {
            eprintln!("snowpea gateway: {e:#}");
            return exit::USAGE;
        }
    };
    let not_running = |why: String| {
        eprintln!(
            "snowpea gateway: the suite is not running ({why}); start it with `snowpea supervisor start`"
        );
        exit::NOT_RUNNING
    };
    let opts = match ConnectOptions::from_home(home.root()) {
        Ok(o) => o
            .with_client_kind("cli")
            .with_call_timeout(Duration::from_secs(30))
            .with_reconnect(ReconnectPolicy {
                max_attempts: Some(0),
                ..ReconnectPolicy::default()
            }),
        Err(e) => return not_running(e.to_string()),
    };
    let client = match Client::connect(opts).await {
        Ok(c) => c,
        Err(e) => return not_running(e.to_string()),
    };
    let result = client.call(method, params).await;
    client.close().await;
    match result {
        Ok(v) => {
            match &args.command {
                GatewayCommand::List { json: false } => print_table(&v),
                _ => println!("{}", serde_json::to_string_pretty(&v).unwrap_or_default()),
            }
            exit::OK
        }
        Err(e) => {
            eprintln!("snowpea gateway: {e}");
            exit::FAILURE
        }
    }
}

/// The method and params of a subcommand.
fn request(cmd: &GatewayCommand) -> Result<(&'static str, Value), String> {
    Ok(match cmd {
        GatewayCommand::Bind {
            platform,
            credentials,
            agent,
            session,
            workdir,
            mode,
            channel,
            user,
        } => {
            let target = match (agent, session) {
                (Some(a), _) => json!({ "agent": a }),
                (None, Some(s)) => json!({ "session": s }),
                (None, None) => {
                    let dir = match workdir {
                        Some(d) => d.clone(),
                        None => std::env::current_dir().map_err(|e| e.to_string())?,
                    };
                    let dir = std::fs::canonicalize(&dir)
                        .map_err(|e| format!("--workdir {}: {e}", dir.display()))?;
                    let mut ns = json!({ "workdir": dir.display().to_string() });
                    if let Some(m) = mode {
                        ns["mode"] = json!(m);
                    }
                    json!({ "new_session": ns })
                }
            };
            let mut p =
                json!({ "platform": platform, "credentialsRef": credentials, "target": target });
            if let Some(c) = channel {
                p["channelId"] = json!(c);
            }
            if let Some(u) = user {
                p["userId"] = json!(u);
            }
            ("gateway.bind", p)
        }
        GatewayCommand::List { .. } => ("gateway.list", json!({})),
        GatewayCommand::Unbind { binding_id } => {
            ("gateway.unbind", json!({ "bindingId": binding_id }))
        }
        GatewayCommand::Sync => ("gateway.sync", json!({})),
    })
}

fn print_table(v: &Value) {
    let rows = v.get("bindings").and_then(Value::as_array);
    let Some(rows) = rows.filter(|r| !r.is_empty()) else {
        println!("no bindings");
        return;
    };
    println!(
        "{:<16} {:<9} {:<8} {:<6} {:<10} {:<10} target",
        "binding", "platform", "state", "source", "channel", "user"
    );
    for b in rows {
        let s = |k: &str| b.get(k).and_then(Value::as_str).unwrap_or("-").to_owned();
        println!(
            "{:<16} {:<9} {:<8} {:<6} {:<10} {:<10} {}",
            s("bindingId"),
            s("platform"),
            s("state"),
            s("source"),
            s("channelId"),
            s("userId"),
            s("target")
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bind_builds_the_target_from_the_flags() {
        let dir = std::env::temp_dir();
        let (m, p) = request(&GatewayCommand::Bind {
            platform: "telegram".into(),
            credentials: "TELEGRAM_BOT_TOKEN".into(),
            agent: None,
            session: None,
            workdir: Some(dir.clone()),
            mode: Some("accept".into()),
            channel: None,
            user: Some("42".into()),
        })
        .unwrap();
        assert_eq!(m, "gateway.bind");
        assert_eq!(p["target"]["new_session"]["mode"], "accept");
        assert_eq!(
            p["target"]["new_session"]["workdir"],
            std::fs::canonicalize(dir).unwrap().display().to_string()
        );
        assert_eq!(p["userId"], "42");
        let (_, p) = request(&GatewayCommand::Bind {
            platform: "discord".into(),
            credentials: "dc".into(),
            agent: Some("helper".into()),
            session: None,
            workdir: None,
            mode: None,
            channel: Some("c1".into()),
            user: None,
        })
        .unwrap();
        assert_eq!(p["target"], json!({"agent": "helper"}));
        assert_eq!(p["channelId"], "c1");
    }
}
