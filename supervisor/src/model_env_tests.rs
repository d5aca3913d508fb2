use super::*;

fn env_of(pairs: &[(&str, &str)]) -> impl Fn(&str) -> Option<String> {
    let map: BTreeMap<String, String> = pairs
        .iter()
        .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
        .collect();
    move |k| map.get(k).cloned()
}

#[test]
fn keys_are_recorded_as_fingerprints_and_the_provider_as_it_is() {
    let env = ModelEnv::capture(
        &env_of(&[
            ("SNOWPEA_PROVIDER", "fake:/x/demo.json"),
            ("ANTHROPIC_API_KEY", "sk-ant-secret"),
            ("OPENAI_API_KEY", "  "),
            ("UNRELATED", "y"),
        ]),
        "token",
    );
    assert_eq!(env.provider(), Some("fake:/x/demo.json"));
    assert_eq!(env.vars.len(), 2, "{env:?}");
    let key = &env.vars["ANTHROPIC_API_KEY"];
    assert_eq!(key.value, None);
    assert_eq!(key.fingerprint.as_deref().map(str::len), Some(16));
    let json = serde_json::to_string(&env).unwrap();
    assert!(!json.contains("sk-ant-secret"), "{json}");
}

#[test]
fn a_key_or_provider_set_here_but_not_in_the_suite_is_a_difference() {
    let suite = ModelEnv::capture(&env_of(&[]), "t");
    let caller = ModelEnv::capture(
        &env_of(&[
            ("SNOWPEA_PROVIDER", "fake:/x/demo.json"),
            ("ANTHROPIC_API_KEY", "k"),
        ]),
        "t",
    );
    let d = caller.differences(&suite);
    assert_eq!(d.len(), 2, "{d:?}");
    let text: Vec<String> = d.iter().map(ToString::to_string).collect();
    assert!(
        text.contains(&"ANTHROPIC_API_KEY is set here; the suite runs without it".to_owned()),
        "{text:?}"
    );
    assert!(
        text.contains(
            &"SNOWPEA_PROVIDER=fake:/x/demo.json here; the suite runs without it".to_owned()
        ),
        "{text:?}"
    );
}

#[test]
fn another_value_differs_the_same_value_does_not_and_an_unset_one_is_not_compared() {
    let suite = ModelEnv::capture(
        &env_of(&[
            ("SNOWPEA_PROVIDER", "fake:/a.json"),
            ("OPENAI_API_KEY", "same"),
            ("ANTHROPIC_API_KEY", "old"),
        ]),
        "t",
    );
    let caller = ModelEnv::capture(
        &env_of(&[
            ("SNOWPEA_PROVIDER", "fake:/b.json"),
            ("OPENAI_API_KEY", "same"),
            ("ANTHROPIC_API_KEY", "new"),
        ]),
        "t",
    );
    let d = caller.differences(&suite);
    let names: Vec<&str> = d.iter().map(|d| d.name.as_str()).collect();
    assert_eq!(names, ["ANTHROPIC_API_KEY", "SNOWPEA_PROVIDER"]);
    assert_eq!(
        d[1].to_string(),
        "SNOWPEA_PROVIDER=fake:/b.json here; the suite runs with fake:/a.json"
    );
    assert_eq!(
        d[0].to_string(),
        "ANTHROPIC_API_KEY here differs from the suite's"
    );
    // A plain shell keeps whatever the suite runs with.
    assert!(ModelEnv::default().differences(&suite).is_empty());
}

#[test]
fn the_restart_command_spells_out_the_provider_and_hides_keys() {
    let caller = ModelEnv::capture(
        &env_of(&[
            ("SNOWPEA_PROVIDER", "fake:/my dir/demo.json"),
            ("ANTHROPIC_API_KEY", "sk-secret"),
        ]),
        "t",
    );
    let cmd = caller.restart_command(None);
    assert_eq!(
        cmd,
        "snowpea supervisor stop && ANTHROPIC_API_KEY=… SNOWPEA_PROVIDER='fake:/my dir/demo.json' snowpea supervisor start"
    );
    assert!(!cmd.contains("sk-secret"));
    let with_home = caller.restart_command(Some(Path::new("/h")));
    assert!(
        with_home.starts_with("snowpea supervisor stop --home /h && ")
            && with_home.ends_with("snowpea supervisor start --home /h"),
        "{with_home}"
    );
    let msg = mismatch_message(&caller.differences(&ModelEnv::default()), &caller, None);
    assert!(
        msg.contains("Restart it to use them:\n  snowpea supervisor stop"),
        "{msg}"
    );
}

#[test]
fn the_record_round_trips_through_the_home() {
    let dir = tempfile::tempdir().unwrap();
    let home = Home::new(dir.path());
    home.ensure_dirs().unwrap();
    assert_eq!(ModelEnv::read(&home), None);
    let env = ModelEnv::capture(&env_of(&[("OPENAI_API_KEY", "k")]), "t");
    env.write(&home).unwrap();
    assert_eq!(ModelEnv::read(&home), Some(env));
    use std::os::unix::fs::PermissionsExt;
    let mode = std::fs::metadata(ModelEnv::path(&home))
        .unwrap()
        .permissions()
        .mode();
    assert_eq!(mode & 0o777, 0o600);
}

#[test]
fn a_fake_script_is_checked_before_a_suite_starts_with_it() {
    let dir = tempfile::tempdir().unwrap();
    let cwd = dir.path();
    let err = check_fake_script("fake:/missing/file.json", cwd).unwrap_err();
    assert!(err.contains("cannot read /missing/file.json"), "{err}");
    assert!(err.contains("fake:$PWD/examples/demo.json"), "{err}");
    assert!(check_fake_script("fake:", cwd)
        .unwrap_err()
        .contains("names no script"));

    std::fs::write(cwd.join("bad.json"), "{not json").unwrap();
    let err = check_fake_script("fake:bad.json", cwd).unwrap_err();
    assert!(err.contains("is not JSON"), "{err}");
    std::fs::write(cwd.join("list.json"), "[]").unwrap();
    let err = check_fake_script("fake:list.json", cwd).unwrap_err();
    assert!(err.contains("must hold a JSON object"), "{err}");
    std::fs::write(cwd.join("typo.json"), r#"{"stepz": []}"#).unwrap();
    let err = check_fake_script("fake:typo.json", cwd).unwrap_err();
    assert!(err.contains("`stepz` is not a field of a script"), "{err}");
    std::fs::write(cwd.join("steps.json"), r#"{"steps": [1]}"#).unwrap();
    assert!(check_fake_script("fake:steps.json", cwd).is_err());

    // A good relative script comes back absolute; a vendor name as it is.
    std::fs::write(cwd.join("ok.json"), r#"{"steps": [{"text": "hi"}]}"#).unwrap();
    let ok = check_fake_script("fake:ok.json", cwd).unwrap();
    let abs = std::fs::canonicalize(cwd.join("ok.json")).unwrap();
    assert_eq!(ok, format!("fake:{}", abs.display()));
    assert_eq!(check_fake_script("openai", cwd).unwrap(), "openai");
}

#[test]
fn the_repositorys_demo_script_passes_the_check() {
    let repo = Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap();
    check_fake_script("fake:examples/demo.json", repo).unwrap();
}
