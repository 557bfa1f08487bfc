//! The committed CRD YAML in `crds/` must equal what the Rust types generate
//! (`agent-operator crds --out crds`).

#[test]
fn committed_crds_match_the_types() {
    // crds/, and the Helm chart's copy that `crds.enabled` installs.
    for dir in ["crds", "deploy/helm/agent-operator/files/crds"] {
        committed_crds_in(dir);
    }
}

fn committed_crds_in(dir_name: &str) {
    let dir = test_support::repo_root().join(dir_name);
    let files = agent_operator::api::crd_files().expect("CRDs serialize");
    let mut committed_names: Vec<String> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{dir_name}/ exists: {e}"))
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.ends_with(".yaml"))
        .collect();
    committed_names.sort();
    let mut generated_names: Vec<String> = files.iter().map(|(n, _)| n.clone()).collect();
    generated_names.sort();
    assert_eq!(
        committed_names, generated_names,
        "{dir_name}/ holds exactly the generated files"
    );
    for (name, yaml) in files {
        let committed = std::fs::read_to_string(dir.join(&name))
            .unwrap_or_else(|e| panic!("{dir_name}/{name} missing ({e}); run `make generate`"));
        assert!(
            committed == yaml,
            "{dir_name}/{name} is out of date with the Rust types; run `make generate` and commit"
        );
    }
}

/// `kubectl explain` has something to say about every field: each property
/// of the three schemas has a description, and each number names its unit
/// or what it counts (item 6 of issue 9).
#[test]
fn every_field_is_described_for_kubectl_explain() {
    fn walk(schema: &serde_json::Value, path: &str, missing: &mut Vec<String>) {
        let props = schema["properties"].as_object();
        for (name, prop) in props.into_iter().flatten() {
            let here = format!("{path}.{name}");
            let description = prop["description"].as_str().unwrap_or("");
            if description.trim().is_empty() {
                missing.push(here.clone());
            }
            // Kubernetes' own embedded schemas (volumes) are described by
            // upstream; ours must name a unit or what is counted.
            let ours = !here.contains(".volumes") && !here.contains(".volumeMounts");
            if ours
                && matches!(prop["type"].as_str(), Some("integer" | "number"))
                && ![
                    "seconds",
                    "Seconds",
                    "cores",
                    "MiB",
                    "GiB",
                    "replicas",
                    "workers",
                    "connections",
                    "requests",
                    "Requests",
                    "times",
                    "generation",
                    "attempts",
                    "assistants",
                    "Assistants",
                    "previews",
                    "deployments",
                    "Deployments",
                    "events",
                    "Events",
                    "cases",
                    "Cases",
                    "fraction",
                ]
                .iter()
                .any(|unit| description.contains(unit))
            {
                missing.push(format!("{here} (no unit in {description:?})"));
            }
            walk(prop, &here, missing);
            walk(&prop["items"], &format!("{here}[]"), missing);
        }
    }
    for crd in agent_operator::api::crds() {
        let kind = crd.spec.names.kind.clone();
        let schema = serde_json::to_value(
            crd.spec.versions[0]
                .schema
                .as_ref()
                .and_then(|s| s.open_api_v3_schema.as_ref())
                .expect("a schema"),
        )
        .unwrap();
        let mut missing = Vec::new();
        walk(
            &schema["properties"]["spec"],
            &format!("{kind}.spec"),
            &mut missing,
        );
        walk(
            &schema["properties"]["status"],
            &format!("{kind}.status"),
            &mut missing,
        );
        assert!(
            missing.is_empty(),
            "fields without a (unit in their) description: {missing:#?}"
        );
    }
}

/// The committed CRD reference equals what the schemas generate.
#[test]
fn committed_reference_matches_the_schemas() {
    let path = test_support::repo_root().join("docs/reference.md");
    let committed = std::fs::read_to_string(&path).unwrap_or_default();
    assert!(
        committed == agent_operator::api::reference::markdown(),
        "docs/reference.md is out of date with the CRD schemas; run `make generate` and commit"
    );
}

/// Every condition reason the operator can write (the constants of
/// `api::conditions::reason`) has a row in docs/TROUBLESHOOTING.md.
#[test]
fn every_condition_reason_is_in_the_troubleshooting_guide() {
    let root = test_support::repo_root();
    let source =
        std::fs::read_to_string(root.join("crates/agent-operator/src/api/conditions.rs")).unwrap();
    let module = source
        .split("pub mod reason {")
        .nth(1)
        .and_then(|rest| rest.split("\n}").next())
        .expect("the reason module");
    let reasons: Vec<&str> = module
        .lines()
        .filter_map(|l| l.trim().strip_prefix("pub const "))
        .filter_map(|l| l.split('"').nth(1))
        .collect();
    assert!(reasons.len() > 20, "{reasons:?}");
    let guide = std::fs::read_to_string(root.join("docs/TROUBLESHOOTING.md")).unwrap();
    let missing: Vec<&&str> = reasons
        .iter()
        .filter(|r| !guide.contains(&format!("| `{r}` |")))
        .collect();
    assert!(
        missing.is_empty(),
        "reasons without a row in docs/TROUBLESHOOTING.md: {missing:?}"
    );
}
