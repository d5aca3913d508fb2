//! Compiles every `.proto` under `snowpea/` with protox (pure Rust, no system protoc),
//! embeds the descriptor set exactly as protox encodes it (custom options survive), and
//! generates prost messages plus tonic clients/servers with default `unimplemented` stubs,
//! so a service implements only the methods it has (DESIGN.md §3).

use std::path::{Path, PathBuf};

fn collect(dir: &Path, out: &mut Vec<PathBuf>) {
    let mut entries: Vec<_> = std::fs::read_dir(dir)
        .expect("read proto dir")
        .map(|e| e.expect("dir entry").path())
        .collect();
    entries.sort();
    for path in entries {
        if path.is_dir() {
            collect(&path, out);
        } else if path.extension().is_some_and(|e| e == "proto") {
            out.push(path);
        }
    }
}

/// Writes `impl Notification` for every message with the `notification` option,
/// `impl SessionEventPayload` for every message with the `event_kind` option and
/// `impl ServerRequest` for the params of every server→client rpc (the traits live in
/// `src/typed.rs`), plus the tables [`NOTIFICATIONS`]/[`EVENT_KINDS`] the
/// one-constructor-each test walks.
fn typed_impls(descriptor: &[u8], out: &Path) -> Result<(), Box<dyn std::error::Error>> {
    use prost_reflect::DescriptorPool;
    let pool = DescriptorPool::decode(descriptor)?;
    let notification = pool
        .get_extension_by_name("snowpea.rpc.v1.notification")
        .ok_or("option snowpea.rpc.v1.notification is declared")?;
    let event_kind = pool
        .get_extension_by_name("snowpea.rpc.v1.event_kind")
        .ok_or("option snowpea.rpc.v1.event_kind is declared")?;
    let mut code = String::new();
    let mut notifications = String::new();
    let mut kinds = String::new();
    for message in pool.all_messages() {
        let options = message.options();
        // Nested messages are never notifications or event payloads.
        if message.parent_message().is_some() {
            continue;
        }
        let path = format!(
            "crate::snowpea::{}::{}",
            message
                .package_name()
                .split('.')
                .skip(1)
                .collect::<Vec<_>>()
                .join("::"),
            message.name()
        );
        let full = message.full_name();
        if options.has_extension(&notification) {
            let method = options.get_extension(&notification);
            let method = method.as_str().ok_or("notification option is a string")?;
            code.push_str(&format!(
                "impl crate::typed::Notification for {path} {{\n    const METHOD: &'static str = {method:?};\n    const MESSAGE: &'static str = {full:?};\n}}\n"
            ));
            notifications.push_str(&format!(
                "    crate::typed::Constructor {{ name: {method:?}, message: {full:?}, encode_default: crate::typed::encode_default_notification::<{path}> }},\n"
            ));
        }
        if options.has_extension(&event_kind) {
            let kind = options.get_extension(&event_kind);
            let kind = kind.as_str().ok_or("event_kind option is a string")?;
            code.push_str(&format!(
                "impl crate::typed::SessionEventPayload for {path} {{\n    const KIND: &'static str = {kind:?};\n    const MESSAGE: &'static str = {full:?};\n}}\n"
            ));
            kinds.push_str(&format!(
                "    crate::typed::Constructor {{ name: {kind:?}, message: {full:?}, encode_default: crate::typed::encode_default_event::<{path}> }},\n"
            ));
        }
    }
    // Server→client requests: the input message of every SERVER_TO_CLIENT rpc.
    let json_method = pool
        .get_extension_by_name("snowpea.rpc.v1.json_method")
        .ok_or("option snowpea.rpc.v1.json_method is declared")?;
    let direction = pool
        .get_extension_by_name("snowpea.rpc.v1.direction")
        .ok_or("option snowpea.rpc.v1.direction is declared")?;
    for service in pool.services() {
        for method in service.methods() {
            let options = method.options();
            if !options.has_extension(&json_method)
                || options.get_extension(&direction).as_enum_number() != Some(2)
            {
                continue;
            }
            let name = options.get_extension(&json_method);
            let name = name.as_str().ok_or("json_method option is a string")?;
            let input = method.input();
            if input.parent_message().is_some() {
                continue;
            }
            let path = format!(
                "crate::snowpea::{}::{}",
                input
                    .package_name()
                    .split('.')
                    .skip(1)
                    .collect::<Vec<_>>()
                    .join("::"),
                input.name()
            );
            let full = input.full_name();
            code.push_str(&format!(
                "impl crate::typed::ServerRequest for {path} {{\n    const METHOD: &'static str = {name:?};\n    const MESSAGE: &'static str = {full:?};\n}}\n"
            ));
        }
    }
    code.push_str(&format!(
        "/// Every typed notification: method, params message, encoder of its default.\npub const NOTIFICATIONS: &[crate::typed::Constructor] = &[\n{notifications}];\n"
    ));
    code.push_str(&format!(
        "/// Every typed `session.event` kind: kind, payload message, encoder of its default.\npub const EVENT_KINDS: &[crate::typed::Constructor] = &[\n{kinds}];\n"
    ));
    std::fs::write(out, code)?;
    Ok(())
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let root = PathBuf::from(std::env::var("CARGO_MANIFEST_DIR")?);
    let out_dir = PathBuf::from(std::env::var("OUT_DIR")?);
    println!("cargo:rerun-if-changed={}", root.join("snowpea").display());

    let mut files = Vec::new();
    collect(&root.join("snowpea"), &mut files);
    for f in &files {
        println!("cargo:rerun-if-changed={}", f.display());
    }
    let relative: Vec<PathBuf> = files
        .iter()
        .map(|f| f.strip_prefix(&root).expect("under root").to_path_buf())
        .collect();

    let mut compiler = protox::Compiler::new([&root])?;
    compiler.include_source_info(true).include_imports(true);
    compiler.open_files(&relative)?;
    // Keep protox's own encoding: a round trip through prost_types drops custom options.
    std::fs::write(
        out_dir.join("snowpea_descriptor.bin"),
        compiler.encode_file_descriptor_set(),
    )?;

    typed_impls(
        &compiler.encode_file_descriptor_set(),
        &out_dir.join("snowpea_typed.rs"),
    )?;

    // prost resolves field types across the whole set (imports included); well-known
    // types map to prost-types and are not regenerated.
    let fds = compiler.file_descriptor_set();
    tonic_prost_build::configure()
        .build_server(true)
        .build_client(true)
        .generate_default_stubs(true)
        .include_file("snowpea_includes.rs")
        .compile_fds(fds)?;
    Ok(())
}
