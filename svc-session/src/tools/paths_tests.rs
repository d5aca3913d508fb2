use std::path::Path;

use super::*;

fn workdir() -> (tempfile::TempDir, std::path::PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let canonical = std::fs::canonicalize(dir.path()).unwrap();
    (dir, canonical)
}

#[test]
fn relative_path_joins_workdir() {
    let (_d, wd) = workdir();
    let r = resolve(&wd, "src/main.rs").unwrap();
    assert_eq!(r.path, wd.join("src/main.rs"));
    assert!(!r.outside_workdir);
    assert_eq!(r.display, "src/main.rs");
}

#[test]
fn workdir_itself_displays_as_dot() {
    let (_d, wd) = workdir();
    let r = resolve(&wd, ".").unwrap();
    assert_eq!(r.path, wd);
    assert!(!r.outside_workdir);
    assert_eq!(r.display, ".");
}

#[test]
fn dotdot_inside_stays_inside() {
    let (_d, wd) = workdir();
    let r = resolve(&wd, "a/b/../../c/./d.txt").unwrap();
    assert_eq!(r.path, wd.join("c/d.txt"));
    assert!(!r.outside_workdir);
}

#[test]
fn dotdot_escape_is_detected() {
    let (_d, wd) = workdir();
    let r = resolve(&wd, "../elsewhere/x.txt").unwrap();
    assert!(r.outside_workdir, "{r:?}");
    assert_eq!(r.path, wd.parent().unwrap().join("elsewhere/x.txt"));
    assert!(Path::new(&r.display).is_absolute());

    let r = resolve(&wd, "sub/../../../../../../../../etc/passwd").unwrap();
    assert!(r.outside_workdir);
    assert_eq!(r.path, Path::new("/etc/passwd").canonicalize().unwrap());
}

#[test]
fn absolute_paths() {
    let (_d, wd) = workdir();
    let inside = resolve(&wd, wd.join("f.txt").to_str().unwrap()).unwrap();
    assert!(!inside.outside_workdir);
    assert_eq!(inside.display, "f.txt");
    let outside = resolve(&wd, "/tmp").unwrap();
    assert!(outside.outside_workdir);
}

#[test]
fn sibling_with_common_prefix_is_outside() {
    // `/x/work-other` must not count as inside `/x/work`.
    let base = tempfile::tempdir().unwrap();
    let wd = base.path().canonicalize().unwrap().join("work");
    std::fs::create_dir(&wd).unwrap();
    std::fs::create_dir(base.path().join("work-other")).unwrap();
    let r = resolve(&wd, "../work-other/f").unwrap();
    assert!(r.outside_workdir);
}

#[test]
fn symlink_escape_is_detected() {
    let (_d, wd) = workdir();
    let outside = tempfile::tempdir().unwrap();
    std::fs::write(outside.path().join("secret.txt"), "s").unwrap();
    std::os::unix::fs::symlink(outside.path(), wd.join("link")).unwrap();

    // An existing file behind the link.
    let r = resolve(&wd, "link/secret.txt").unwrap();
    assert!(r.outside_workdir, "{r:?}");
    assert_eq!(
        r.path,
        outside.path().canonicalize().unwrap().join("secret.txt")
    );

    // A file that does not exist yet behind the link (a write would land outside).
    let r = resolve(&wd, "link/new/dir/file.txt").unwrap();
    assert!(r.outside_workdir, "{r:?}");

    // The link itself.
    assert!(resolve(&wd, "link").unwrap().outside_workdir);
}

#[test]
fn dangling_symlink_escape_is_detected() {
    let (_d, wd) = workdir();
    let outside = tempfile::tempdir().unwrap();
    let target = outside.path().join("not-yet.txt");
    std::os::unix::fs::symlink(&target, wd.join("dangling")).unwrap();
    let r = resolve(&wd, "dangling").unwrap();
    assert!(r.outside_workdir, "{r:?}");
    assert_eq!(
        r.path,
        outside.path().canonicalize().unwrap().join("not-yet.txt")
    );
}

#[test]
fn symlink_inside_workdir_is_fine() {
    let (_d, wd) = workdir();
    std::fs::create_dir(wd.join("real")).unwrap();
    std::os::unix::fs::symlink(wd.join("real"), wd.join("alias")).unwrap();
    let r = resolve(&wd, "alias/f.txt").unwrap();
    assert!(!r.outside_workdir);
    assert_eq!(r.path, wd.join("real/f.txt"));
    assert_eq!(r.display, "real/f.txt");
}

#[test]
fn symlink_loop_does_not_hang() {
    let (_d, wd) = workdir();
    std::os::unix::fs::symlink(wd.join("b"), wd.join("a")).unwrap();
    std::os::unix::fs::symlink(wd.join("a"), wd.join("b")).unwrap();
    let r = resolve(&wd, "a/x").unwrap();
    assert!(r.path.ends_with("x"));
}

#[test]
fn non_canonical_workdir_is_canonicalised() {
    let (_d, wd) = workdir();
    std::fs::create_dir(wd.join("inner")).unwrap();
    let odd = wd.join("inner/..");
    let r = resolve(&odd, "f").unwrap();
    assert_eq!(r.path, wd.join("f"));
    assert!(!r.outside_workdir);
}

#[test]
fn bad_input_is_an_error() {
    let (_d, wd) = workdir();
    assert!(resolve(&wd, "").is_err());
    assert!(resolve(&wd, "a\0b").is_err());
}

#[test]
fn lexical_normalisation() {
    assert_eq!(
        normalize_lexically(Path::new("/a/./b/../c")),
        Path::new("/a/c")
    );
    assert_eq!(normalize_lexically(Path::new("/../..")), Path::new("/"));
    assert_eq!(normalize_lexically(Path::new("a/../..")), Path::new(".."));
    assert_eq!(normalize_lexically(Path::new("a/..")), Path::new("."));
}
