//! Issue 40: a 16 MiB message of many tiny values is refused before the gateway builds it —
//! `[0,0,…]` params took 286 MB of JSON tree, a batch of 5.6 million `{}` members 19 GB —
//! and the gateway's peak memory stays bounded.

use serde_json::{json, Value};
use snowpea_proto::limits::WS_MESSAGE;

use super::harness::{GatewayProc, Opts, TestHome};

/// Peak RSS (`VmHWM`) of `pid` in MiB.
fn peak_mib(pid: u32) -> u64 {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("VmHWM:"))
                .and_then(|l| l.split_whitespace().nth(1))
                .and_then(|v| v.parse::<u64>().ok())
        })
        .unwrap_or(0)
        / 1024
}

/// Before the fix, the batch alone took the gateway past 19 GB; now the whole test stays
/// far below this.
const PEAK_MIB: u64 = 400;

#[tokio::test]
async fn a_message_of_millions_of_tiny_values_is_refused_with_bounded_memory() {
    let home = TestHome::new();
    let gw = GatewayProc::start(&home, Opts::default());
    let mut c = gw.authed().await;
    let room = WS_MESSAGE - 256;

    // Params of almost 16 MiB of `0,`: refused naming the request's id.
    let wide = format!(
        "{{\"jsonrpc\":\"2.0\",\"id\":\"wide\",\"method\":\"memory.write\",\"params\":{{\"text\":\"x\",\"tags\":[{}0]}}}}",
        "0,".repeat(room / 2)
    );
    c.send_raw(&wide).await;
    let r = c.response_to(&json!("wide")).await;
    assert_eq!(r["error"]["code"], -32600, "{r}");
    assert!(
        r["error"]["message"]
            .as_str()
            .unwrap()
            .contains("JSON values"),
        "{r}"
    );

    // A batch of 5.6 million empty objects: one refusal for the whole batch.
    let batch = format!("[{}{{}}]", "{},".repeat(room / 3));
    c.send_raw(&batch).await;
    let r = c.recv().await;
    assert_eq!(r["error"]["code"], -32600, "{r}");
    assert_eq!(r["id"], Value::Null, "{r}");

    // A batch over BATCH_MEMBERS (small in bytes): refused as a whole too.
    let members = vec![r#"{"jsonrpc":"2.0","method":"system.health"}"#; 1001].join(",");
    c.send_raw(&format!("[{members}]")).await;
    let r = c.recv().await;
    assert_eq!(r["error"]["code"], -32600, "{r}");
    assert!(
        r["error"]["message"].as_str().unwrap().contains("batch"),
        "{r}"
    );

    c.ok("system.health", json!({})).await;
    let peak = peak_mib(gw.pid());
    assert!(peak > 0 && peak < PEAK_MIB, "gateway peak RSS {peak} MiB");
}
