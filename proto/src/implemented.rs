//! Which protocol methods this build implements: the one declaration the docs' status
//! column (`docs/protocol.md` "Method index", `implemented` in `docs/protocol.json`) and the
//! gateway's `not_implemented` answer both read, so the docs cannot disagree with the daemon.
//!
//! A method is implemented when a service's trait impl overrides its rpc (the generated
//! default answers gRPC `UNIMPLEMENTED`), when the gateway answers it itself (`system.*`),
//! or, for a server→client method, when the daemon sends it. The e2e contract test
//! (`e2e/tests/suite/implemented.rs`) calls every client-callable method through the real
//! suite and fails when this list and the services disagree.

/// JSON-RPC names of the implemented methods, sorted and unique.
pub const IMPLEMENTED: &[&str] = &[
    "agent.bindChannel",
    "agent.create",
    "agent.delete",
    "agent.list",
    "agent.spawn",
    "approval.ask",
    "approval.list",
    "approval.request",
    "approval.respond",
    "audio.capabilities",
    "audio.install",
    "audio.record.start",
    "audio.record.stop",
    "audio.speak",
    "audio.transcribe",
    "audio.voices",
    "backend.set",
    "checkpoint.delete",
    "checkpoint.diff",
    "checkpoint.list",
    "checkpoint.restore",
    "command.list",
    "command.run",
    "file.complete",
    "gateway.bind",
    "gateway.list",
    "gateway.sync",
    "gateway.unbind",
    "job.cancel",
    "job.delete",
    "job.list",
    "job.nextRunForClient",
    "job.preview",
    "job.runNow",
    "job.schedule",
    "job.update",
    "llm.sample",
    "lsp.catalog",
    "lsp.status",
    "mcp.add",
    "mcp.catalog",
    "mcp.list",
    "mcp.reload",
    "mcp.remove",
    "mcp.test",
    "mcp.update",
    "memory.delete",
    "memory.ingest",
    "memory.list",
    "memory.search",
    "memory.write",
    "permission.allowlist.add",
    "permission.allowlist.list",
    "permission.allowlist.remove",
    "provider.configure",
    "provider.list",
    "provider.loginWeb",
    "provider.models",
    "provider.remove",
    "provider.test",
    "question.list",
    "question.request",
    "question.respond",
    "session.artifacts",
    "session.attach",
    "session.attachments",
    "session.close",
    "session.compact",
    "session.continue",
    "session.create",
    "session.deleteSaved",
    "session.interrupt",
    "session.list",
    "session.notice",
    "session.prompt",
    "session.rename",
    "session.resume",
    "session.setActive",
    "session.setAgent",
    "session.setBrowserProvider",
    "session.setEffort",
    "session.setMode",
    "session.setModel",
    "session.steer",
    "session.toolContent",
    "settings.get",
    "settings.set",
    "setup.applyDefaults",
    "setup.catalog",
    "setup.status",
    "site.delete",
    "site.get",
    "site.list",
    "site.mark",
    "site.markPart",
    "site.put",
    "skill.create",
    "skill.install",
    "skill.list",
    "skill.read",
    "skill.reload",
    "skill.remove",
    "skill.search",
    "skill.write",
    "system.checkUpdate",
    "system.health",
    "system.hello",
    "system.info",
    "system.reloadSettings",
    "system.restart",
    "system.shutdown",
    "system.update",
    "team.guide.delete",
    "team.guide.get",
    "team.guide.list",
    "team.guide.set",
    "team.start",
    "team.status",
    "tool.invoke",
    "tool.list",
    "tool.progress",
    "tool.register",
    "tool.unregister",
    "usage.summary",
    "web.search",
];

/// True when `method` (a JSON-RPC name) is in [`IMPLEMENTED`].
pub fn is_implemented(method: &str) -> bool {
    IMPLEMENTED.binary_search(&method).is_ok()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::schema::schema;

    #[test]
    fn every_name_is_a_json_method_of_the_descriptor() {
        for name in IMPLEMENTED {
            assert!(
                schema().method(name).is_some(),
                "{name} is not a json_method"
            );
        }
    }

    #[test]
    fn the_list_is_sorted_and_unique() {
        for pair in IMPLEMENTED.windows(2) {
            assert!(
                pair[0] < pair[1],
                "{} must come before {}",
                pair[1],
                pair[0]
            );
        }
    }

    #[test]
    fn lookup_agrees_with_the_list() {
        assert!(is_implemented("session.create"));
        assert!(is_implemented("checkpoint.list"));
        assert!(is_implemented("lsp.status"));
        assert!(!is_implemented("no.such.method"));
    }
}
