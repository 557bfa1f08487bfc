//! TLS to a control plane (docs/SECURITY.md, "What the operator can
//! touch"): the emulator behind an HTTPS front whose certificate is signed
//! by a CA the test generates (`test_support::tls`). An AgentControlPlane
//! with `caBundleSecretRef` naming that CA is Ready; without it, or with
//! another CA, it is not, and its Ready condition says the certificate is
//! not trusted, the verifier's verdict and how to trust a private CA. The
//! refused control planes never reach the emulator: no connection passes
//! the front's TLS handshake until the CA is trusted.

use crate::support;

use std::net::SocketAddr;
use std::time::Duration;

use agent_operator::api::AgentControlPlane;
use agent_operator::api::conditions::{READY, find};
use k8s_openapi::api::core::v1::Secret;
use kube::Api;
use serde_json::json;
use support::{Harness, WORKSPACE, apply_json};
use test_support::tls::{TestCa, TlsFront};

const TIMEOUT: Duration = Duration::from_secs(60);

/// (status, reason, message) of the `Ready` condition of the current
/// generation, if any.
fn ready(plane: &AgentControlPlane) -> Option<(String, String, String)> {
    let status = plane.status.as_ref()?;
    let c = find(&status.conditions, READY)?;
    (c.observed_generation == plane.metadata.generation)
        .then(|| (c.status.clone(), c.reason.clone(), c.message.clone()))
}

/// Waits until `name` has a `Ready` condition of `status` for its current
/// generation; returns (reason, message).
async fn wait_ready_status(
    planes: &Api<AgentControlPlane>,
    name: &str,
    status: &str,
) -> (String, String) {
    let deadline = tokio::time::Instant::now() + TIMEOUT;
    loop {
        let plane = planes
            .get(name)
            .await
            .expect("reading the AgentControlPlane");
        match ready(&plane) {
            Some((s, reason, message)) if s == status => return (reason, message),
            last => assert!(
                tokio::time::Instant::now() < deadline,
                "{name}: not Ready={status} after {TIMEOUT:?}: {last:?}"
            ),
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

#[tokio::test]
async fn a_control_plane_over_https_is_trusted_only_with_its_ca_bundle() {
    test_support::skip_without!(Envtest);
    let h = Harness::builder("sec-tls").start().await;

    let ca = TestCa::new("control-plane-test-ca").expect("a CA");
    let other = TestCa::new("some-other-ca").expect("a CA");
    let serving = ca.serving(&["127.0.0.1", "localhost"]).expect("a cert");
    let upstream: SocketAddr = h
        .emulator
        .base_url
        .trim_start_matches("http://")
        .parse()
        .expect("the emulator listens on an IP address");
    let front = TlsFront::start(&serving, upstream)
        .await
        .expect("the HTTPS front");

    let secrets: Api<Secret> = Api::namespaced(h.client.clone(), &h.ns);
    for (name, pem) in [("cp-ca", ca.cert_pem()), ("cp-other-ca", other.cert_pem())] {
        apply_json(
            &secrets,
            name,
            json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": name},
                   "stringData": {"ca.crt": pem}}),
        )
        .await;
    }
    let planes: Api<AgentControlPlane> = Api::namespaced(h.client.clone(), &h.ns);
    let plane = |name: &str, ca: Option<&str>| {
        let mut spec = json!({
            "url": front.url,
            "workspaceId": WORKSPACE,
            "apiKeySecretRef": {"name": "cp-api-key", "key": "api-key"}
        });
        if let Some(ca) = ca {
            spec["caBundleSecretRef"] = json!({"name": ca, "key": "ca.crt"});
        }
        json!({"apiVersion": "agentserver.dev/v1alpha1", "kind": "AgentControlPlane",
               "metadata": {"name": name}, "spec": spec})
    };
    apply_json(&planes, "tls-no-ca", plane("tls-no-ca", None)).await;
    apply_json(
        &planes,
        "tls-other-ca",
        plane("tls-other-ca", Some("cp-other-ca")),
    )
    .await;

    for name in ["tls-no-ca", "tls-other-ca"] {
        let (reason, message) = wait_ready_status(&planes, name, "False").await;
        eprintln!("{name}: Ready=False {reason}: {message}");
        assert!(
            message.contains("TLS: the control plane's certificate is not trusted")
                && message.contains("invalid peer certificate: UnknownIssuer")
                && message.contains("spec.caBundleSecretRef"),
            "{name}: the reason is not clear: {reason}: {message}"
        );
    }
    assert_eq!(
        front.forwarded(),
        0,
        "a control plane whose certificate is refused received a request"
    );

    apply_json(&planes, "tls-trusted", plane("tls-trusted", Some("cp-ca"))).await;
    let (reason, message) = wait_ready_status(&planes, "tls-trusted", "True").await;
    assert_eq!(reason, "Authenticated", "{message}");
    assert!(message.contains(&front.url), "{message}");
    assert!(
        front.forwarded() > 0,
        "the trusted control plane was reached through the HTTPS front"
    );
}

/// docs/INSTALL.md, "Self-hosted LangSmith", as written: the shipped example
/// `examples/more/control-plane-self-hosted.yaml` (its host, CA and
/// workspace replaced by the test's) against the emulator behind TLS on a
/// port other than 443, with the operator allowed exactly that `host:port`
/// (`extraAllowedHosts` is `--allowed-hosts`). The AgentControlPlane is
/// Ready through its CA, and an AgentDeployment on it reaches Ready; a plane
/// on the same host but another port is `HostNotAllowed` and sends nothing.
#[tokio::test]
async fn the_self_hosted_quickstart_works_as_written() {
    test_support::skip_without!(Envtest);
    let h = Harness::builder("sec-self-hosted")
        .without_operator()
        .start()
        .await;
    let ca = TestCa::new("self-hosted-test-ca").expect("a CA");
    let serving = ca.serving(&["127.0.0.1"]).expect("a cert");
    let upstream: SocketAddr = h
        .emulator
        .base_url
        .trim_start_matches("http://")
        .parse()
        .unwrap();
    let front = TlsFront::start(&serving, upstream)
        .await
        .expect("the HTTPS front");
    let host_port = front.url.trim_start_matches("https://").to_owned();
    assert!(!host_port.ends_with(":443"), "{host_port}");

    // The example, as shipped, with this test's host, CA and workspace.
    let example = std::fs::read_to_string(
        test_support::repo_root().join("examples/more/control-plane-self-hosted.yaml"),
    )
    .unwrap();
    let pem: String = ca
        .cert_pem()
        .lines()
        .map(|l| format!("    {l}\n"))
        .collect();
    let placeholder = "    -----BEGIN CERTIFICATE-----\n    (the PEM bundle of your internal CA)\n    -----END CERTIFICATE-----\n";
    assert!(
        example.contains(placeholder),
        "the example's CA placeholder moved"
    );
    let text = example
        .replace(placeholder, &pem)
        .replace("https://langsmith.internal.example.com", &front.url)
        .replace("namespace: agents", &format!("namespace: {}", h.ns))
        .replace("3f2b5c9e-1d4a-4e6b-8a7c-0b1d2e3f4a5b", WORKSPACE);
    let secrets: Api<Secret> = Api::namespaced(h.client.clone(), &h.ns);
    apply_json(
        &secrets,
        "agent-platform-api-key",
        json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "agent-platform-api-key"},
               "stringData": {"api-key": support::API_KEY}}),
    )
    .await;
    let planes: Api<AgentControlPlane> = Api::namespaced(h.client.clone(), &h.ns);
    for doc in crate::install_manifests::documents(&text) {
        let name = doc["metadata"]["name"].as_str().unwrap().to_owned();
        if doc["kind"] == "Secret" {
            apply_json(&secrets, &name, doc).await;
        } else {
            apply_json(&planes, &name, doc).await;
        }
    }
    // The same host on another port is not in the list.
    let mut other = planes.get("self-hosted").await.unwrap();
    other.metadata = kube::api::ObjectMeta {
        name: Some("other-port".into()),
        ..Default::default()
    };
    other.status = None;
    other.spec.url = Some("https://127.0.0.1:1/api-host".into());
    planes.create(&Default::default(), &other).await.unwrap();

    let _operator = h.start_operator(&["--allowed-hosts", &host_port]);
    let (reason, message) = wait_ready_status(&planes, "self-hosted", "True").await;
    assert_eq!(reason, "Authenticated", "{message}");
    let (reason, message) = wait_ready_status(&planes, "other-port", "False").await;
    assert_eq!(reason, "HostNotAllowed", "{message}");
    assert!(
        message.contains("--allowed-hosts") && message.contains("extraAllowedHosts"),
        "the refusal names the flag and the Helm value: {message}"
    );

    let agd =
        support::AgentDeploymentManifest::docker("self-hosted-agent", "ghcr.io/acme/agent:1.0.0")
            .spec("controlPlaneRef", json!({"name": "self-hosted"}))
            .build();
    h.apply(agd).await;
    h.wait_ready("self-hosted-agent", TIMEOUT).await;
    assert!(
        front.forwarded() > 0,
        "every request went through the HTTPS front"
    );
}
