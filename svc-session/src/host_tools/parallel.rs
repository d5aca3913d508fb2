//! Which calls of one model step run side by side (capabilities `hostToolParallel` and
//! `batchedFileTools`, issue 21).
//!
//! * A host tool registered `parallel: "safe"` may overlap other such calls; `"never"`
//!   (the default) runs alone.
//! * `batchedFileTools`: the read-only file tools (`read_file`, `list_dir`, `glob`,
//!   `grep`) called in one step run as one batch, side by side.
//!
//! Consecutive calls that may overlap form one batch; every other call is a batch of its
//! own. Batches run in the model's order, so a `"never"` call or a write never overlaps
//! anything, and results reach the model in the order it asked.

use snowpea_session_llm::provider::ToolCall;

/// The built-in file tools `batchedFileTools` runs side by side (all tagged `read`).
pub const BATCHED_FILE_TOOLS: &[&str] = &["read_file", "list_dir", "glob", "grep"];

/// Splits `calls` into batches (module doc); `overlaps(name)` says whether a call of that
/// tool may run beside others.
pub fn batches(calls: &[ToolCall], overlaps: impl Fn(&str) -> bool) -> Vec<Vec<&ToolCall>> {
    let mut out: Vec<Vec<&ToolCall>> = Vec::new();
    let mut open = false;
    for call in calls {
        let together = overlaps(&call.name);
        match out.last_mut() {
            Some(batch) if together && open => batch.push(call),
            _ => out.push(vec![call]),
        }
        open = together;
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn call(name: &str) -> ToolCall {
        ToolCall {
            id: format!("c-{name}"),
            name: name.into(),
            arguments: serde_json::json!({}),
        }
    }

    #[test]
    fn consecutive_overlapping_calls_share_a_batch_others_run_alone() {
        let calls: Vec<ToolCall> = ["a", "b", "n", "c", "n", "n", "d"]
            .into_iter()
            .map(call)
            .collect();
        let b = batches(&calls, |n| n != "n");
        let names: Vec<Vec<&str>> = b
            .iter()
            .map(|b| b.iter().map(|c| c.name.as_str()).collect())
            .collect();
        assert_eq!(
            names,
            vec![
                vec!["a", "b"],
                vec!["n"],
                vec!["c"],
                vec!["n"],
                vec!["n"],
                vec!["d"]
            ]
        );
        assert!(batches(&[], |_| true).is_empty());
    }
}
