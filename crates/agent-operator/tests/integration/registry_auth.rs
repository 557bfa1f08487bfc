//! `spec.imagePolicy` with a registry that needs credentials: the
//! distribution project's registry (`hack/registry/`, htpasswd basic
//! authentication) on loopback, an image pushed by crane after `crane auth
//! login`, and `kubernetes.io/dockerconfigjson` Secrets named by
//! `spec.imagePullSecretRef`.
//!
//! - The right credentials resolve the tag: the image is sent by digest.
//! - Wrong credentials and none are `Stalled`/`RegistryUnauthorized` before
//!   any control plane request, also after another AgentDeployment pulled
//!   the same image with good ones (no credentials cross between them), the registry is not asked again and again
//!   (its own log counts the refused requests), and the password shows in
//!   no status, event or operator log (the suite's secret scan).
//! - Fixing the Secret is enough: the Secret watch wakes the pass, which
//!   resolves and creates.

use crate::support;

use std::path::Path;
use std::process::{Child, Command};
use std::time::Duration;

use k8s_openapi::api::core::v1::Secret;
use kube::Api;
use serde_json::{Value, json};
use support::leaks::{REGISTRY_BASIC, REGISTRY_PASSWORD, WRONG_REGISTRY_PASSWORD};
use support::{Harness, apply_json, condition};
use test_support::manifests::AgentDeploymentManifest;
use test_support::prerequisites::tool;

use crate::registry_resolve::{crane_with, push_image_with};

const TIMEOUT: Duration = Duration::from_secs(90);
/// The user of the registry's htpasswd file.
const USER: &str = "agent";
/// bcrypt (cost 4) of [`REGISTRY_PASSWORD`], the registry's htpasswd entry.
const PASSWORD_BCRYPT: &str = "$2a$04$xZrODjh/YPbMlkW1NbgW3eBNoFcchCea7yVyEc8Y/Kob3GuNFCZmy";

/// The distribution registry, serving from memory with htpasswd
/// authentication on a loopback port; killed when dropped.
struct AuthRegistry {
    child: Child,
    /// `127.0.0.1:<port>`.
    host: String,
    log: std::path::PathBuf,
}

impl Drop for AuthRegistry {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl AuthRegistry {
    async fn start(dir: &Path) -> Self {
        let htpasswd = dir.join("htpasswd");
        std::fs::write(&htpasswd, format!("{USER}:{PASSWORD_BCRYPT}\n")).unwrap();
        // A port the kernel picked, free again once the listener is dropped
        // (the registry takes no port 0 and would not tell which it got).
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .expect("a free loopback port")
            .port();
        let host = format!("127.0.0.1:{port}");
        let config = dir.join("config.yml");
        std::fs::write(
            &config,
            format!(
                "version: 0.1\nlog:\n  level: info\n  accesslog:\n    disabled: false\nstorage:\n  inmemory: {{}}\nhttp:\n  addr: {host}\n\
                 auth:\n  htpasswd:\n    realm: agent-operator-tests\n    path: {}\n",
                htpasswd.display()
            ),
        )
        .unwrap();
        let log = dir.join("registry.log");
        let file = std::fs::File::create(&log).expect("the registry's log");
        let child = Command::new(tool("registry"))
            .arg("serve")
            .arg(&config)
            .stdout(file.try_clone().expect("the registry's log"))
            .stderr(file)
            .spawn()
            .expect("starting the distribution registry");
        let registry = AuthRegistry { child, host, log };
        agent_operator::controlplane::client::install_crypto_provider();
        let url = format!("http://{}/v2/", registry.host);
        support::eventually(Duration::from_secs(30), "the registry answers", || async {
            let status = reqwest::get(&url).await.ok()?.status();
            (status == reqwest::StatusCode::UNAUTHORIZED).then_some(())
        })
        .await;
        registry
    }

    /// The requests the registry refused for want of valid credentials
    /// (its access log: `"HEAD /v2/acme/private/manifests/v1 HTTP/1.1" 401`),
    /// `/v2/` probes aside.
    fn refused(&self) -> Vec<String> {
        std::fs::read_to_string(&self.log)
            .unwrap_or_default()
            .lines()
            .filter_map(|l| {
                let (request, rest) = l.split_once(" HTTP/1.1\" ")?;
                let request = request.rsplit_once('"')?.1;
                rest.starts_with("401 ").then(|| request.to_owned())
            })
            .filter(|request| !request.ends_with(" /v2/"))
            .collect()
    }
}

/// A `kubernetes.io/dockerconfigjson` Secret `name` for `host` with
/// `password`.
async fn put_pull_secret(h: &Harness, name: &str, host: &str, password: &str) {
    use base64::Engine as _;
    let auth = base64::engine::general_purpose::STANDARD.encode(format!("{USER}:{password}"));
    let config = json!({"auths": {host: {"auth": auth}}}).to_string();
    let secrets: Api<Secret> = Api::namespaced(h.client.clone(), &h.ns);
    apply_json(
        &secrets,
        name,
        json!({
            "apiVersion": "v1", "kind": "Secret", "metadata": {"name": name},
            "type": "kubernetes.io/dockerconfigjson",
            "stringData": {".dockerconfigjson": config}
        }),
    )
    .await;
}

fn pinned(name: &str, image: &str, secret: Option<&str>) -> Value {
    let mut manifest = AgentDeploymentManifest::docker(name, image)
        .spec("imagePolicy", "Pin")
        .build();
    if let Some(secret) = secret {
        manifest["spec"]["imagePullSecretRef"] = json!({"name": secret});
    }
    manifest
}

#[tokio::test]
async fn a_registry_that_needs_credentials_is_pulled_with_the_pull_secret_only() {
    test_support::skip_without!(Envtest, Tools, Registry);
    let dir = tempfile::tempdir().unwrap();
    let registry = AuthRegistry::start(dir.path()).await;
    let host = registry.host.clone();
    let image = format!("{host}/acme/private:v1");

    // crane logs in (its own Docker config, not the user's) and pushes.
    let docker_config = dir.path().join("docker");
    std::fs::create_dir_all(&docker_config).unwrap();
    crane_with(
        Some(&docker_config),
        &["auth", "login", &host, "-u", USER, "-p", REGISTRY_PASSWORD],
    );
    let digest = push_image_with(
        Some(&docker_config),
        dir.path(),
        &image,
        "linux/amd64",
        "private",
    );
    assert!(
        std::fs::read_to_string(docker_config.join("config.json"))
            .unwrap()
            .contains(REGISTRY_BASIC),
        "crane's login is the basic credentials of the test"
    );

    // A long resync: the requests of the window below are the passes' own.
    let h = Harness::quick("op-image-auth")
        .resync_seconds(60.0)
        .start()
        .await;
    h.wait_control_plane_ready(TIMEOUT).await;
    put_pull_secret(&h, "regcred", &host, REGISTRY_PASSWORD).await;
    put_pull_secret(&h, "wrongcred", &host, WRONG_REGISTRY_PASSWORD).await;
    let mark = h.emulator.request_mark().await;

    h.apply(pinned("authorized", &image, Some("regcred"))).await;
    let ready = h.wait_ready("authorized", TIMEOUT).await;
    let resolved = ready.status.unwrap().resolved_image.expect("resolvedImage");
    assert_eq!(resolved.digest, digest, "the digest crane pushed");
    assert_eq!(resolved.pinned, format!("{host}/acme/private@{digest}"));

    // After a successful pull from that registry, credentials are still
    // the AgentDeployment's own: none, or wrong ones, pull nothing (an OCI
    // client shared by the whole process would reuse the first ones).
    h.apply(pinned("wrong-credentials", &image, Some("wrongcred")))
        .await;
    h.apply(pinned("no-credentials", &image, None)).await;

    for name in ["wrong-credentials", "no-credentials"] {
        let stalled = h.wait_stalled(name, "RegistryUnauthorized", TIMEOUT).await;
        let message = condition(&stalled, "Stalled").unwrap().message;
        assert!(
            message.contains(&host) && message.contains("imagePullSecretRef"),
            "{name}: {message}"
        );
    }
    // Some more seconds: the refusals are not repeated in a loop.
    let refused_then = registry.refused().len();
    tokio::time::sleep(Duration::from_secs(6)).await;
    let refused = registry.refused();
    println!(
        "FIGURE registry refusals (401) for the two refused AgentDeployments: {} until Stalled, \
         {} in the 6 s after",
        refused_then,
        refused.len() - refused_then
    );
    assert!(
        (2..=8).contains(&refused.len()) && refused.len() == refused_then,
        "each refused AgentDeployment asked, then Stalled without asking again: {refused:?}"
    );

    // The control plane heard only of the authorized one.
    let sent: Vec<String> = h
        .emulator
        .requests_since(mark)
        .await
        .into_iter()
        .filter(|r| r.route.starts_with("POST"))
        .map(|r| r.route)
        .collect();
    assert_eq!(
        sent,
        ["POST /v2/deployments"],
        "one create, for the authorized AgentDeployment only"
    );
    for name in ["wrong-credentials", "no-credentials"] {
        let status = h.api.get(name).await.unwrap().status.unwrap_or_default();
        assert!(status.deployment_id.is_none(), "{name}: {status:?}");
        assert!(status.resolved_image.is_none(), "{name}: {status:?}");
    }

    // The Secret fixed: the Secret watch wakes the pass, which resolves and
    // creates.
    put_pull_secret(&h, "wrongcred", &host, REGISTRY_PASSWORD).await;
    let fixed = h.wait_ready("wrong-credentials", TIMEOUT).await;
    assert_eq!(fixed.status.unwrap().resolved_image.unwrap().digest, digest);
}
