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
