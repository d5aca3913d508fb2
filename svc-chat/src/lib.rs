//! svc-chat (issue 22): the `gateway.*` family — Telegram, Discord and Slack chats bound to
//! sessions — in a supervised process of its own, so platform connections (long-lived, talking
//! to the outside world) can fail or hang without a session ever noticing.
//!
//! * [`store`] is `state/chat.db`: bindings, platform cursors, conversations.
//! * [`binding`] validates targets and resolves credentials; [`api`] + [`rpc`] serve
//!   `gateway.*`; [`chat`] is the hub (connections, routing, `gateway.event`).
//! * [`platform`] holds the adapters; [`inbound`] turns chat messages into prompts and
//!   [`commands`]; [`relay`] sends answers, typing, approvals and questions back;
//!   [`format`] converts Markdown and splits to each platform's limit.
//! * [`targets`] checks a binding's session/agent target and removes bindings whose target
//!   was deleted (svc-session's `ChatInternalService.TargetRemoved`).
//! * [`daemon`] is svc-chat's protocol-client connection to the gateway.

pub mod api;
pub mod binding;
pub mod chat;
pub mod commands;
pub mod daemon;
pub mod error;
pub mod format;
pub mod inbound;
pub mod platform;
pub mod relay;
pub mod rpc;
pub mod store;
pub mod targets;

use std::sync::Arc;

use snowpea_common::bus::{BusHub, BusService};
use snowpea_common::service::ServiceArgs;

/// Runs the service until SIGTERM/SIGINT.
pub async fn run(args: ServiceArgs) -> anyhow::Result<()> {
    let store = Arc::new(store::Store::open(&args.home.database("chat"))?);
    let bus = BusHub::new();
    let (ready_tx, ready_rx) = tokio::sync::oneshot::channel::<Arc<snowpea_sdk::Client>>();
    let daemon = daemon::Daemon::new(args.home.root().to_owned(), move |client| {
        let _ = ready_tx.send(client);
    });
    let chat = chat::Chat::new(args.home.clone(), store, bus.clone(), daemon);
    chat.restore().await?;
    targets::recheck_at_start(&chat);
    let api = api::GatewayApi { chat: chat.clone() };
    // Automatic bindings follow settings.gateway at start and on every change.
    if let Err(e) = api.sync().await {
        tracing::warn!(error = %e, "gateway.sync at start failed");
    }
    follow_settings(&bus, api.clone());
    let weak = Arc::downgrade(&chat);
    tokio::spawn(async move {
        let Ok(client) = ready_rx.await else { return };
        let Some(chat) = weak.upgrade() else { return };
        relay::Relay::register_handlers(&chat, &client);
        tokio::spawn(relay::Relay::pump(Arc::downgrade(&chat), client.clone()));
        // Conversations of before a restart: relay what their sessions did meanwhile.
        let store = chat.store.clone();
        if let Ok(Ok(convs)) =
            snowpea_common::db::blocking("conversations", move || store.conversations()).await
        {
            for c in convs {
                chat.relay.attach(
                    &chat,
                    &client,
                    &c.binding_id,
                    &c.channel,
                    &c.session_id,
                    c.last_seq,
                );
            }
        }
    });
    let services = snowpea_common::service::Services::new()
        .add_service(rpc::GatewayRpc::new(api).into_server())
        .add_service(rpc::ChatInternalRpc::new(chat.clone()).into_server())
        .add_service(BusService::new(bus).into_server());
    snowpea_common::service::serve("chat", &args.socket, services, std::future::pending()).await
}

fn follow_settings(bus: &Arc<BusHub>, api: api::GatewayApi) {
    let mut rx = bus.settings_changes();
    tokio::spawn(async move {
        loop {
            match rx.recv().await {
                Ok(change) if change.keys.iter().any(|k| k == "gateway") => {
                    if let Err(e) = api.sync().await {
                        tracing::warn!(error = %e, "gateway.sync after a settings change failed");
                    }
                }
                Ok(_) => {}
                Err(tokio::sync::broadcast::error::RecvError::Lagged(_)) => {}
                Err(_) => return,
            }
        }
    });
}
