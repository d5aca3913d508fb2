//! Fails when `docs/protocol.md`, `docs/protocol.json` or `sdk/src/protocol.ts` drift from
//! the proto schema (DESIGN.md §3: nobody edits generated files by hand), naming the command
//! that rewrites them — like codex's `app-server-protocol/tests/schema_fixtures.rs`.

use snowpea_proto::gen;

#[test]
fn generated_protocol_files_are_up_to_date() {
    let root = gen::default_root();
    let drifted = gen::drifted(&root);
    assert!(
        drifted.is_empty(),
        "generated protocol files are out of date with proto/: {drifted:?}\n\
         regenerate them with `{}` and commit the result",
        gen::FIX_COMMAND
    );
}

#[test]
fn protocol_json_is_the_served_document() {
    // The gateway serves `protocol_json()` at GET /protocol.json; it must be the file we ship.
    let file = std::fs::read_to_string(gen::default_root().join("docs/protocol.json"))
        .expect("docs/protocol.json exists (run the generator)");
    let served: serde_json::Value = serde_json::from_str(&file).expect("valid JSON");
    assert_eq!(served, snowpea_proto::protocol_json());
    assert_eq!(served["protocolVersion"], snowpea_proto::PROTOCOL_VERSION);
    assert_eq!(served["transport"]["wsPath"], snowpea_proto::WS_PATH);
}
