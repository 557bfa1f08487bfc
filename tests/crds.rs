//! The committed CRD YAML in `crds/` must equal what the Rust types generate
//! (`agent-operator crds --out crds`).

#[test]
fn committed_crds_match_the_types() {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("crds");
    let files = agent_operator::api::crd_files().expect("CRDs serialize");
    let mut committed_names: Vec<String> = std::fs::read_dir(&dir)
        .expect("crds/ exists")
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.ends_with(".yaml"))
        .collect();
    committed_names.sort();
    let mut generated_names: Vec<String> = files.iter().map(|(n, _)| n.clone()).collect();
    generated_names.sort();
    assert_eq!(
        committed_names, generated_names,
        "crds/ holds exactly the generated files"
    );
    for (name, yaml) in files {
        let committed = std::fs::read_to_string(dir.join(&name)).unwrap_or_else(|e| {
            panic!("crds/{name} missing ({e}); run `agent-operator crds --out crds`")
        });
        assert!(
            committed == yaml,
            "crds/{name} is out of date with the Rust types; run `cargo run -- crds --out crds` and commit"
        );
    }
}
