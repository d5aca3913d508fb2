//! The gateway's layer rule (docs/ARCHITECTURE.md "Gateway layers"): no two files of
//! `gateway/src` import each other, directly or round a circle — the test kit's walk
//! ([`snowpea_testkit::layers`], which every crate's `src` is held to), here with no
//! allow-list and the edges this rule is about checked to be seen.

use std::path::Path;

use snowpea_testkit::layers::{cycles, graph};

#[test]
fn gateway_src_has_no_import_cycle() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let edges = graph(&src);
    assert!(
        edges.len() > 20,
        "the module walk found too few files: {:?}",
        edges.keys()
    );
    // The walk must see the references this rule is about, or it proves nothing.
    assert!(
        edges["dispatch/router.rs"].contains("route/table.rs"),
        "router.rs → route/table.rs not seen: {edges:?}"
    );
    let found = cycles(&edges);
    assert!(
        found.is_empty(),
        "gateway/src has import cycles (files that reach each other through `crate::`/`super::` \
         references): {found:#?}\nedges: {edges:#?}"
    );
}
