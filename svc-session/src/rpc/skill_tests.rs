//! Service-level tests of the skills component through the app (`h.app.skills`):
//! write/create validation, and install's refusals.

use std::os::unix::fs::PermissionsExt;
use std::path::Path;

use serde_json::json;
use snowpea_proto::session::v1 as pb;

use crate::testkit::Harness;

fn put(path: &Path, text: &str) {
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(path, text).unwrap();
}

#[tokio::test]
async fn create_write_and_read_follow_the_rules() {
    let h = Harness::new(json!({})).await;
    let sk = &h.app.skills;
    let wd = h.workdir.to_string_lossy().into_owned();
    let content =
        "---\nname: my-skill\ndescription: A skill for the tests\n---\nbody\n".to_string();
    let p = pb::SkillCreateParams {
        name: "my-skill".into(),
        content: Some(content.clone()),
        workdir: wd.clone(),
        ..Default::default()
    };
    let r = sk.create(p.clone()).await.unwrap();
    let path = r.path.unwrap();
    assert!(
        path.ends_with(".snowpea/skills/my-skill/SKILL.md"),
        "{path}"
    );
    assert_eq!(
        std::fs::metadata(&path).unwrap().permissions().mode() & 0o777,
        0o600
    );
    assert!(sk
        .create(p.clone())
        .await
        .unwrap_err()
        .to_string()
        .contains("params.force"));
    sk.create(pb::SkillCreateParams { force: true, ..p })
        .await
        .unwrap();
    let read = sk
        .read(pb::SkillReadParams {
            name: "my-skill".into(),
            workdir: wd.clone(),
        })
        .await
        .unwrap();
    assert_eq!(
        (read.content.as_str(), read.scope.as_str()),
        (content.as_str(), "project")
    );
    // skill.write validates before writing: the file keeps its content.
    let e = sk
        .write(pb::SkillWriteParams {
            name: "my-skill".into(),
            content: "---\ndescription: no\n---\n".into(),
            workdir: wd.clone(),
            ..Default::default()
        })
        .await
        .unwrap_err();
    assert!(e.to_string().contains("params.content"), "{e}");
    assert_eq!(std::fs::read_to_string(&path).unwrap(), content);
    // Global scope, then it is listed and visible as a command.
    sk.write(pb::SkillWriteParams {
        name: "glob-skill".into(),
        content: "---\ndescription: A global skill here\n---\nG\n".into(),
        scope: "global".into(),
        workdir: wd.clone(),
    })
    .await
    .unwrap();
    assert!(h.home.root().join("skills/glob-skill/SKILL.md").exists());
    assert!(sk.catalog(None).iter().any(|e| e.name == "glob-skill"));
    let e = sk
        .read(pb::SkillReadParams {
            name: "missing".into(),
            workdir: wd,
        })
        .await
        .unwrap_err();
    assert!(matches!(e, snowpea_session_error::Error::NotFound(_)));
    sk.remove(pb::SkillRemoveParams {
        name: "glob-skill".into(),
    })
    .await
    .unwrap();
    assert!(!sk.catalog(None).iter().any(|e| e.name == "glob-skill"));
}

#[tokio::test]
async fn install_refuses_what_leaves_the_plugin_folder_and_links_on_request() {
    let h = Harness::new(json!({})).await;
    let sk = &h.app.skills;
    let t = tempfile::tempdir().unwrap();
    // A directory holding a symlink that points outside it.
    let evil = t.path().join("evil");
    put(&evil.join("plugin.json"), r#"{"name": "evil-plug"}"#);
    std::os::unix::fs::symlink("/etc/passwd", evil.join("passwd")).unwrap();
    let e = sk
        .install(pb::SkillInstallParams {
            source: evil.to_string_lossy().into(),
            link: false,
        })
        .await
        .unwrap_err();
    assert!(e.to_string().contains("outside the plugin folder"), "{e}");
    // An archive entry with an absolute path.
    let tar_path = t.path().join("abs.tar");
    {
        let mut b = tar::Builder::new(std::fs::File::create(&tar_path).unwrap());
        let mut hd = tar::Header::new_gnu();
        hd.set_size(2);
        hd.set_mode(0o644);
        hd.set_entry_type(tar::EntryType::Regular);
        // Written raw: the builder itself would refuse an absolute path.
        hd.as_old_mut().name[..9].copy_from_slice(b"/tmp/pwn1");
        hd.set_cksum();
        b.append(&hd, &b"hi"[..]).unwrap();
        b.finish().unwrap();
    }
    let e = sk
        .install(pb::SkillInstallParams {
            source: tar_path.to_string_lossy().into(),
            link: false,
        })
        .await
        .unwrap_err();
    assert!(e.to_string().contains("outside the plugin folder"), "{e}");
    assert!(!Path::new("/tmp/pwn1").exists());
    let left: Vec<_> = std::fs::read_dir(sk.plugins_dir())
        .unwrap()
        .flatten()
        .collect();
    assert!(left.is_empty(), "{left:?}");
    // A good archive with one top folder.
    let good = t.path().join("good.tar.gz");
    {
        let gz = flate2::write::GzEncoder::new(
            std::fs::File::create(&good).unwrap(),
            flate2::Compression::fast(),
        );
        let mut b = tar::Builder::new(gz);
        let body = b"---\nname: tarred\ndescription: came in an archive\n---\nT\n";
        let mut hd = tar::Header::new_gnu();
        hd.set_size(body.len() as u64);
        hd.set_mode(0o755);
        b.append_data(&mut hd, "tarred/SKILL.md", &body[..])
            .unwrap();
        b.into_inner().unwrap().finish().unwrap();
    }
    sk.install(pb::SkillInstallParams {
        source: good.to_string_lossy().into(),
        link: false,
    })
    .await
    .unwrap();
    let f = sk.plugins_dir().join("tarred/skills/tarred/SKILL.md");
    assert_eq!(
        std::fs::metadata(&f).unwrap().permissions().mode() & 0o777,
        0o600
    );
    // Installing it again is refused; a bad source string names the field.
    let e = sk
        .install(pb::SkillInstallParams {
            source: good.to_string_lossy().into(),
            link: false,
        })
        .await
        .unwrap_err();
    assert!(e.to_string().contains("already installed"), "{e}");
    let e = sk
        .install(pb::SkillInstallParams {
            source: "nonsense".into(),
            link: false,
        })
        .await
        .unwrap_err();
    assert!(e.to_string().contains("params.source"), "{e}");
    // link: a symlink, live edits, and remove leaves the directory alone.
    let dev = t.path().join("dev-plug");
    put(&dev.join("plugin.json"), r#"{"name": "dev-plug"}"#);
    put(
        &dev.join("skills/live/SKILL.md"),
        "---\ndescription: first version\n---\n",
    );
    sk.install(pb::SkillInstallParams {
        source: dev.to_string_lossy().into(),
        link: true,
    })
    .await
    .unwrap();
    assert!(std::fs::symlink_metadata(sk.plugins_dir().join("dev-plug"))
        .unwrap()
        .file_type()
        .is_symlink());
    put(
        &dev.join("skills/live/SKILL.md"),
        "---\ndescription: second version\n---\n",
    );
    sk.reload().await.unwrap();
    assert!(sk
        .catalog(None)
        .iter()
        .any(|e| e.name == "live" && e.summary == "second version"));
    sk.remove(pb::SkillRemoveParams {
        name: "dev-plug".into(),
    })
    .await
    .unwrap();
    assert!(dev.join("plugin.json").exists());
    let e = sk
        .install(pb::SkillInstallParams {
            source: good.to_string_lossy().into(),
            link: true,
        })
        .await
        .unwrap_err();
    assert!(e.to_string().contains("params.link"), "{e}");
}

#[tokio::test]
async fn search_lists_a_malformed_marketplace_file_as_unavailable() {
    let h = Harness::new(json!({})).await;
    std::fs::write(h.home.root().join("marketplaces.json"), "not json").unwrap();
    let r = h
        .app
        .skills
        .search(pb::SkillSearchParams { query: "x".into() })
        .await
        .unwrap();
    assert!(r.skills.is_empty());
    assert!(
        r.unavailable[0].starts_with("marketplaces.json: not JSON"),
        "{:?}",
        r.unavailable
    );
}
