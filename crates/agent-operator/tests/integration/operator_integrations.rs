//! Issue 11, items 6-8, against a real kube-apiserver + etcd (envtest), the
//! operator binary and the emulator (through [`support::Harness`],
//! which checks the request budget on drop):
//! - item 6: `sourceConfig.integrationRef` resolves through
//!   `GET /v1/integrations/github/install` to the right `integration_id` on
//!   the remote, once for a fleet of ten; a repository the integration cannot read
//!   stalls `RepositoryNotAccessible` and an unknown name
//!   `IntegrationNotFound`, both without a create; `integrationId` and
//!   `integrationRef` together are refused at admission;
//! - item 7: `installCommand`/`buildCommand` with shell content are refused
//!   at admission (and by the emulator with 400); valid ones reach the
//!   remote, and a change is a PATCH and a new revision;
//! - item 8: every deployment type of docs/control-plane-api.md "Deployment" is created; any region
//!   passes admission as a lowercase label and maps by the official CLI's
//!   naming rule, without a request (no operator watches that namespace);
//! - issue 36, item 8: an `integrationId` that is no integration of the
//!   workspace is refused by the emulator's create (400) and stalls
//!   `InvalidSpec` after one create;
//! - `agentctl integrations list|repos` against the emulator, as a table and
//!   as JSON, never echoing the key.

use crate::{common, support};

use std::time::Duration;

use agent_operator::api::AgentControlPlane;
use agent_operator::api::conditions::reason;
use agent_operator::controlplane::Error as CpError;
use kube::Api;
use serde_json::{Value, json};
use support::{Harness, WORKSPACE, github_deployment, route, wait_for};

const TIMEOUT: Duration = Duration::from_secs(60);
/// The GitHub integration seeded in the emulator, named `acme`.
const INTEGRATION_ID: &str = "3f0d1c2e-5a4b-4c3d-8e2f-1a2b3c4d5e6f";
/// A repository `acme` can read.
const REPO: &str = "https://github.com/acme/support-agent";

/// The emulator's `--integration` seed: `acme`, reading [`REPO`] and
/// `acme/billing`.
fn seeded_integrations() -> String {
    format!("{WORKSPACE}={INTEGRATION_ID}:acme:{REPO},https://github.com/acme/billing")
}

/// The emulator's seed of the fixtures' integration
/// (`test_support::manifests::INTEGRATION_ID`, the `integrationId` of
/// [`github_deployment`]): a workspace with seeded integrations refuses any
/// other id.
fn fixture_integration() -> String {
    format!(
        "{WORKSPACE}={}:fixtures",
        test_support::manifests::INTEGRATION_ID
    )
}

/// An id that is no integration of the workspace.
const UNKNOWN_INTEGRATION_ID: &str = "3f0d1c2e-5a4b-4c3d-8e2f-00000000dead";

/// A github AgentDeployment naming its integration by `integration` instead
/// of an id, building `repo`.
fn by_ref(name: &str, integration: &str, repo: &str) -> Value {
    let mut m = github_deployment(name, "main");
    let sc = m["spec"]["sourceConfig"].as_object_mut().unwrap();
    sc.remove("integrationId");
    sc.insert("integrationRef".into(), json!({"name": integration}));
    sc.insert("repoUrl".into(), json!(repo));
    m
}

/// The API server's refusal of `manifest` (panics if it is accepted).
async fn refused(h: &Harness, manifest: Value) -> String {
    let name = manifest["metadata"]["name"].as_str().unwrap().to_owned();
    match h
        .api
        .patch(
            &name,
            &kube::api::PatchParams::apply("tests").force(),
            &kube::api::Patch::Apply(&manifest),
        )
        .await
    {
        Ok(_) => panic!("{name} was accepted"),
        Err(e) => e.to_string(),
    }
}

#[tokio::test]
async fn integration_ref_resolves_to_the_integration_id_once_for_a_fleet() {
    test_support::skip_without!(Envtest);
    let h = Harness::quick("op-integ-ref")
        .integration(&seeded_integrations())
        .start()
        .await;
    // "Acme": the name is compared without regard to case; ".git" too.
    let names: Vec<String> = (0..10).map(|i| format!("ref-{i}")).collect();
    for (i, name) in names.iter().enumerate() {
        let repo = if i == 0 {
            format!("{REPO}.git")
        } else {
            REPO.to_owned()
        };
        h.apply(by_ref(name, "Acme", &repo)).await;
    }
    for name in &names {
        let status = h.wait_ready(name, TIMEOUT).await.status.unwrap();
        let remote =
            h.cp.get_deployment(status.deployment_id.as_deref().unwrap())
                .await
                .unwrap();
        assert_eq!(
            remote.source_config.integration_id.as_deref(),
            Some(INTEGRATION_ID),
            "{name}"
        );
    }
    let counts = h.emulator.requests().await;
    assert_eq!(counts.count(route::CREATE), 10);
    assert_eq!(
        counts.count(route::INTEGRATIONS),
        1,
        "one integration list for the fleet"
    );
    assert_eq!(
        counts.count(route::INTEGRATION_REPOS),
        1,
        "one repository list for the fleet"
    );
}

#[tokio::test]
async fn an_inaccessible_repository_or_an_unknown_integration_stalls_without_a_create() {
    test_support::skip_without!(Envtest);
    let h = Harness::quick("op-integ-stall")
        .integration(&seeded_integrations())
        .start()
        .await;
    h.apply(by_ref(
        "outside",
        "acme",
        "https://github.com/acme/private-agent",
    ))
    .await;
    h.apply(by_ref("unknown", "initech", REPO)).await;
    let outside = h
        .wait_stalled("outside", reason::REPOSITORY_NOT_ACCESSIBLE, TIMEOUT)
        .await;
    let (_, _, message) = support::ready(&outside).unwrap();
    assert!(message.contains("acme/private-agent"), "{message}");
    let unknown = h
        .wait_stalled("unknown", reason::INTEGRATION_NOT_FOUND, TIMEOUT)
        .await;
    let (_, _, message) = support::ready(&unknown).unwrap();
    assert!(
        message.contains("initech") && message.contains("acme"),
        "{message}"
    );

    let counts = h.emulator.requests().await;
    assert_eq!(counts.count(route::CREATE), 0, "nothing created");
    // Only the AgentControlPlane probe lists deployments (once or twice as
    // the plane becomes Ready): no name lookup, which would come after the
    // integration check, was made for either resource.
    assert!(counts.count(route::LIST) <= 2, "{:?}", counts.0);
    assert!(counts.count(route::INTEGRATIONS) <= 2, "{:?}", counts.0);
    assert!(h.remote_deployments().await.is_empty());

    // Both ways of naming the integration at once are refused.
    let mut both = by_ref("both", "acme", REPO);
    both["spec"]["sourceConfig"]["integrationId"] = json!(INTEGRATION_ID);
    let e = refused(&h, both).await;
    assert!(
        e.contains("set at most one of sourceConfig.integrationId and sourceConfig.integrationRef"),
        "{e}"
    );
}

/// The `integrationId` path as the service answers it: an id that is not an
/// integration of the workspace is refused by the create (400, answered by
/// the emulator as for an unknown listener), and the resource stalls
/// `InvalidSpec` naming the id and the time the create may be sent again,
/// after one create that is not repeated; a known id creates, with no
/// integration lookup for either.
#[tokio::test]
async fn an_unknown_integration_id_is_refused_once_and_a_known_one_creates() {
    test_support::skip_without!(Envtest);
    let h = Harness::quick("op-integ-id")
        .integration(&seeded_integrations())
        .start()
        .await;
    for (name, id) in [
        ("unknown-id", UNKNOWN_INTEGRATION_ID),
        ("known-id", INTEGRATION_ID),
    ] {
        let mut m = github_deployment(name, "main");
        m["spec"]["sourceConfig"]["integrationId"] = json!(id);
        m["spec"]["sourceConfig"]["repoUrl"] = json!(REPO);
        h.apply(m).await;
    }
    let stalled = h
        .wait_stalled("unknown-id", reason::INVALID_SPEC, TIMEOUT)
        .await;
    let (_, _, message) = support::ready(&stalled).unwrap();
    assert!(
        message.contains(&format!(
            "bad request (400): Integration ID {UNKNOWN_INTEGRATION_ID} not found."
        )),
        "{message}"
    );
    let rejected = stalled
        .status
        .as_ref()
        .and_then(|s| s.rejected_request.clone())
        .expect("the refusal is recorded");
    assert!(
        message.contains(&format!(
            "not sent again until the spec or a Secret it uses changes, or until {}",
            rejected.retry_after_time
        )),
        "{message}"
    );
    let status = h.wait_ready("known-id", TIMEOUT).await.status.unwrap();
    let remote =
        h.cp.get_deployment(status.deployment_id.as_deref().unwrap())
            .await
            .unwrap();
    assert_eq!(
        remote.source_config.integration_id.as_deref(),
        Some(INTEGRATION_ID)
    );
    // The refused create is not sent again while nothing changes.
    tokio::time::sleep(Duration::from_secs(3)).await;
    let counts = h.emulator.requests().await;
    assert_eq!(counts.count(route::CREATE), 2, "{:?}", counts.0);
    assert_eq!(counts.count(route::INTEGRATIONS), 0, "{:?}", counts.0);
    assert_eq!(counts.count(route::INTEGRATION_REPOS), 0, "{:?}", counts.0);
    assert_eq!(h.remote_deployments().await.len(), 1);
}

#[tokio::test]
async fn build_commands_are_checked_sent_and_a_change_is_a_new_revision() {
    test_support::skip_without!(Envtest);
    let h = Harness::quick("op-integ-build")
        .integration(&seeded_integrations())
        .integration(&fixture_integration())
        .start()
        .await;
    for (field, bad) in [
        ("buildCommand", "npm run build && curl http://evil"),
        ("buildCommand", "npm run build; rm -rf /"),
        ("installCommand", "npm ci\nrm -rf /"),
        ("installCommand", "npm ci $(id)"),
        ("buildCommand", "npm run build > /dev/null"),
        ("buildCommand", "echo `id`"),
    ] {
        let mut m = github_deployment("bad-build", "main");
        m["spec"]["sourceConfig"][field] = json!(bad);
        let e = refused(&h, m).await;
        assert!(
            e.contains(&format!("{field} must be one command")),
            "{bad:?}: {e}"
        );
    }
    // The emulator refuses the same content (400, an emulator choice).
    let mut body = support::github_create_body("raw-bad-build", "main");
    body.source_config.build_command = Some("npm run build | tee log".into());
    let e = h.cp.create_deployment(&body).await.unwrap_err();
    assert!(matches!(e, CpError::BadRequest { .. }), "{e:?}");
    assert!(e.to_string().contains("build_command"), "{e}");

    let name = "js-agent";
    let mut m = github_deployment(name, "main");
    m["spec"]["sourceConfig"]["installCommand"] = json!("npm ci");
    m["spec"]["sourceConfig"]["buildCommand"] = json!("NODE_ENV=production npm run build");
    h.apply(m.clone()).await;
    let status = h.wait_ready(name, TIMEOUT).await.status.unwrap();
    let id = status.deployment_id.unwrap();
    // The service does not read commands back (docs/control-plane-api.md,
    // "Answer shapes"): what it stored is read from the emulator's store.
    let remote = stored_source_config(&h, &id).await;
    assert_eq!(remote["install_command"], "npm ci");
    assert_eq!(remote["build_command"], "NODE_ENV=production npm run build");
    assert_eq!(
        h.cp.get_deployment(&id)
            .await
            .unwrap()
            .source_config
            .install_command,
        None,
        "not echoed"
    );
    let patches = h.emulator.requests().await.count(route::PATCH);

    m["spec"]["sourceConfig"]["buildCommand"] = json!("npm run build:prod");
    h.apply(m).await;
    wait_for(&h.api, name, TIMEOUT, "Ready on generation 2", |o| {
        (support::is_ready_now(o) && o.metadata.generation == Some(2)).then_some(())
    })
    .await;
    let remote = stored_source_config(&h, &id).await;
    assert_eq!(remote["build_command"], "npm run build:prod");
    assert_eq!(h.emulator.requests().await.count(route::PATCH), patches + 1);
    assert_eq!(h.revisions(&id).await.len(), 2, "a new build");
}

/// The `source_config` the emulator stored for deployment `id`.
async fn stored_source_config(h: &Harness, id: &str) -> Value {
    support::stored_deployment(&h.emulator.store().await, id)["source_config"].clone()
}

#[tokio::test]
async fn every_deployment_type_is_created_and_regions_map_by_the_cli_rule() {
    test_support::skip_without!(Envtest);
    let h = Harness::quick("op-integ-types")
        .integration(&seeded_integrations())
        .integration(&fixture_integration())
        .start()
        .await;
    let types = ["dev_free", "dev", "prod", "dev_zero", "dev_free_zero"];
    for t in types {
        let mut m = github_deployment(&format!("type-{}", t.replace('_', "-")), "main");
        m["spec"]["sourceConfig"]["deploymentType"] = json!(t);
        h.apply(m).await;
    }
    for t in types {
        let name = format!("type-{}", t.replace('_', "-"));
        let status = h.wait_ready(&name, TIMEOUT).await.status.unwrap();
        let remote =
            h.cp.get_deployment(status.deployment_id.as_deref().unwrap())
                .await
                .unwrap();
        assert_eq!(remote.source_config.deployment_type.as_deref(), Some(t));
    }
    let mut m = github_deployment("type-free-tier", "main");
    m["spec"]["sourceConfig"]["deploymentType"] = json!("free");
    let e = refused(&h, m).await;
    assert!(e.contains("deploymentType"), "{e}");

    // Regions: in a namespace no operator watches, so nothing is sent to
    // a real host (the machine is loopback only).
    let ns = common::test_namespace(&h.client, "op-integ-regions").await;
    let planes: Api<AgentControlPlane> = Api::namespaced(h.client.clone(), &ns);
    let plane = |name: &str, spec: Value| {
        let mut s = json!({
            "workspaceId": WORKSPACE,
            "apiKeySecretRef": {"name": "cp-api-key", "key": "api-key"}
        });
        s.as_object_mut()
            .unwrap()
            .extend(spec.as_object().unwrap().clone());
        json!({
            "apiVersion": "agentserver.dev/v1alpha1", "kind": "AgentControlPlane",
            "metadata": {"name": name}, "spec": s
        })
    };
    for (name, region, url) in [
        ("us", "us", "https://api.host.langchain.com"),
        ("eu", "eu", "https://eu.api.host.langchain.com"),
        ("ap", "ap", "https://ap.api.host.langchain.com"),
        (
            "us-west",
            "us-west-2",
            "https://us-west-2.api.host.langchain.com",
        ),
    ] {
        let stored =
            support::apply_json(&planes, name, plane(name, json!({"region": region}))).await;
        assert_eq!(stored.spec.base_url().as_deref(), Some(url), "{region}");
    }
    let pp = kube::api::PatchParams::apply("tests").force();
    for (name, spec, expected) in [
        ("upper", json!({"region": "EU"}), "spec.region"),
        ("dotted", json!({"region": "eu.api"}), "spec.region"),
        ("short", json!({"region": "e"}), "spec.region"),
        (
            "both",
            json!({"region": "eu", "url": "https://ls.example.com/api-host"}),
            "set exactly one of region and url",
        ),
    ] {
        let e = planes
            .patch(name, &pp, &kube::api::Patch::Apply(&plane(name, spec)))
            .await
            .expect_err(name)
            .to_string();
        assert!(e.contains(expected), "{name}: {e}");
    }
}

/// Runs `agentctl` with the emulator's URL, workspace and key in the
/// environment; returns (success, stdout, stderr). Panics if stdout or
/// stderr shows the API key (logging at `RUST_LOG=debug`).
fn agentctl(h: &Harness, args: &[&str]) -> (bool, String, String) {
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_agentctl"))
        .args(args)
        .env("AGENT_CONTROL_PLANE_URL", &h.emulator.base_url)
        .env("AGENT_WORKSPACE_ID", WORKSPACE)
        .env("AGENT_API_KEY", support::API_KEY)
        .env("RUST_LOG", "debug")
        .output()
        .expect("running agentctl");
    let (stdout, stderr) = (
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    );
    for text in [&stdout, &stderr] {
        assert!(
            !text.contains(support::API_KEY),
            "agentctl {args:?} echoed the key"
        );
    }
    (out.status.success(), stdout, stderr)
}

/// The whitespace-separated cells of each line of a table.
fn cells(table: &str) -> Vec<Vec<&str>> {
    table
        .lines()
        .map(|l| l.split_whitespace().collect())
        .collect()
}

#[tokio::test]
async fn agentctl_lists_integrations_and_their_repositories() {
    test_support::skip_without!(Envtest);
    let h = Harness::builder("op-integ-cli")
        .integration(&seeded_integrations())
        .without_operator()
        .start()
        .await;
    let (ok, out, err) = agentctl(&h, &["integrations", "list"]);
    assert!(ok, "{err}");
    assert_eq!(
        cells(&out),
        [
            vec!["NAME", "ID", "INSTALLATION", "ID"],
            vec!["acme", INTEGRATION_ID, "1000"]
        ],
        "{out}"
    );
    let (ok, out, err) = agentctl(&h, &["integrations", "repos", "ACME", "--output", "json"]);
    assert!(ok, "{err}");
    let repos: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(repos[0]["url"], REPO);
    assert_eq!(repos[1]["default_branch"], "main");
    let (ok, out, err) = agentctl(&h, &["integrations", "repos", INTEGRATION_ID]);
    assert!(ok, "{err}");
    assert_eq!(
        cells(&out)[2],
        ["https://github.com/acme/billing", "main"],
        "{out}"
    );
    let (ok, _, err) = agentctl(&h, &["integrations", "repos", "initech"]);
    assert!(!ok);
    assert!(err.contains("\"initech\""), "{err}");
    let (_, out, _) = agentctl(&h, &["integrations", "list", "--help"]);
    assert!(out.contains("AGENT_API_KEY"), "{out}");
    let counts = h.emulator.requests().await;
    assert_eq!(counts.count(route::INTEGRATIONS), 4);
    assert_eq!(counts.count(route::INTEGRATION_REPOS), 2);
}
