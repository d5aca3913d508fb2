//! `checkpoint.diff` of one path: the unified diff (`similar`, through the file tools'
//! [`crate::tools::fs::make_diff`]) from the current file to the state a restore would put
//! back, with `binary`, `changedSince` and `restorable`.

use std::path::Path;

use snowpea_proto::session::v1 as pb;

use super::blobs::Blobs;
use super::capture::Current;
use super::files::Files;
use super::restore::{self, PathPlan};

/// Bytes looked at to decide whether content is binary (a NUL byte in them).
const SNIFF_BYTES: usize = 8192;

fn binary(bytes: &[u8]) -> bool {
    bytes[..bytes.len().min(SNIFF_BYTES)].contains(&0) || std::str::from_utf8(bytes).is_err()
}

/// The diff entry of `pp` in `workdir`.
pub fn file_diff(blobs: &Blobs, workdir: &Path, pp: &PathPlan) -> pb::checkpoint_diff_result::File {
    file_diff_in(&Files::Local, blobs, workdir, pp)
}

/// [`file_diff`] through `files` (a remote session's backend).
pub fn file_diff_in(
    files: &Files,
    blobs: &Blobs,
    workdir: &Path,
    pp: &PathPlan,
) -> pb::checkpoint_diff_result::File {
    let mut out = pb::checkpoint_diff_result::File {
        path: pp.path.clone(),
        ..Default::default()
    };
    let Some(target) = files.target(workdir, &pp.path) else {
        return out;
    };
    let now = files.current(&target);
    out.changed_since = pp.changed_since(&now);
    let wanted = if pp.refused().is_some() {
        None
    } else {
        restore::wanted(blobs, pp).ok()
    };
    out.restorable = wanted.is_some();
    let Some(wanted) = wanted else {
        return out;
    };
    let current: Option<Vec<u8>> = match now {
        Current::Absent => None,
        Current::File { bytes, .. } => Some(bytes),
        Current::TooLarge { .. } | Current::Other => {
            out.binary = true;
            return out;
        }
    };
    if current.as_deref().is_some_and(binary) || wanted.as_deref().is_some_and(binary) {
        out.binary = true;
        return out;
    }
    let old = current.map(|b| String::from_utf8_lossy(&b).into_owned());
    let new = wanted
        .map(|b| String::from_utf8_lossy(&b).into_owned())
        .unwrap_or_default();
    out.patch = crate::tools::fs::make_diff(&pp.path, old.as_deref(), &new).diff;
    out
}
