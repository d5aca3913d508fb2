//! `gen-protocol`: writes `docs/protocol.md`, `docs/protocol.json` and `sdk/src/protocol.ts`
//! from the proto schema (DESIGN.md §3), or with `--check` reports which of them drifted.
//!
//! Exit codes: 0 written / up to date, 1 a generated file drifted (`--check`), 2 bad arguments
//! or an I/O error.

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::{bail, Context as _};
use snowpea_proto::gen;

const USAGE: &str = "\
gen-protocol: render the Snowpea protocol docs and bindings from proto/snowpea/**.proto

USAGE:
    cargo run -p snowpea-proto --bin gen-protocol -- [--check] [--root DIR]

Writes, relative to the workspace root:
    docs/protocol.md      protocol reference (the spec's sections and tables)
    docs/protocol.json    the protocol as JSON Schema (served at GET /protocol.json)
    sdk/src/protocol.ts   TypeScript bindings

OPTIONS:
    --check      regenerate in memory and exit 1 if any file differs (CI)
    --root DIR   workspace root (default: the directory above the snowpea-proto crate)
    -h, --help   print this help

EXIT CODES:
    0  files written, or up to date with --check
    1  --check found drifted files
    2  bad arguments or an I/O error";

struct Args {
    check: bool,
    root: PathBuf,
}

fn parse_args() -> anyhow::Result<Option<Args>> {
    let mut args = Args {
        check: false,
        root: gen::default_root(),
    };
    let mut it = std::env::args().skip(1);
    while let Some(arg) = it.next() {
        match arg.as_str() {
            "--check" => args.check = true,
            "--root" => args.root = it.next().context("--root needs a directory")?.into(),
            "-h" | "--help" => return Ok(None),
            other => bail!("unknown argument {other:?} (see --help)"),
        }
    }
    Ok(Some(args))
}

fn run() -> anyhow::Result<ExitCode> {
    let Some(args) = parse_args()? else {
        println!("{USAGE}");
        return Ok(ExitCode::SUCCESS);
    };
    if args.check {
        let drifted = gen::drifted(&args.root);
        if drifted.is_empty() {
            println!("gen-protocol: generated files are up to date");
            return Ok(ExitCode::SUCCESS);
        }
        for path in &drifted {
            eprintln!(
                "gen-protocol: {path} is out of date with proto/; run `{}`",
                gen::FIX_COMMAND
            );
        }
        return Ok(ExitCode::from(1));
    }
    let written = gen::write_all(&args.root)
        .with_context(|| format!("writing generated files under {}", args.root.display()))?;
    for path in written {
        println!("gen-protocol: wrote {}", path.display());
    }
    Ok(ExitCode::SUCCESS)
}

fn main() -> ExitCode {
    match run() {
        Ok(code) => code,
        Err(err) => {
            eprintln!("gen-protocol: error: {err:#}");
            ExitCode::from(2)
        }
    }
}
