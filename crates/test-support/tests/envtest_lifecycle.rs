//! Lifecycle of the envtest control plane: nothing outlives its owner, and
//! the `testenv` binary runs a command against a fresh API server.

use std::net::{Ipv4Addr, SocketAddr, TcpStream};
use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use test_support::envtest::{TestEnv, TestEnvOptions};

/// The port of `https://127.0.0.1:<port>`.
fn port_of(server_url: &str) -> u16 {
    server_url
        .rsplit(':')
        .next()
        .and_then(|p| p.trim_end_matches('/').parse().ok())
        .unwrap_or_else(|| panic!("no port in {server_url}"))
}

fn is_listening(port: u16) -> bool {
    let addr = SocketAddr::from((Ipv4Addr::LOCALHOST, port));
    TcpStream::connect_timeout(&addr, Duration::from_millis(200)).is_ok()
}

/// Polls for up to `within` until nothing listens on `port`.
fn wait_until_closed(port: u16, within: Duration) -> bool {
    let deadline = Instant::now() + within;
    while Instant::now() < deadline {
        if !is_listening(port) {
            return true;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    false
}

/// `server:` of a kubeconfig written by the harness.
fn server_in(kubeconfig: &Path) -> String {
    let text = std::fs::read_to_string(kubeconfig).expect("reading the kubeconfig");
    text.lines()
        .find_map(|l| l.trim().strip_prefix("server: "))
        .expect("a server line")
        .to_owned()
}

fn testenv() -> Command {
    let mut command = Command::new(env!("CARGO_BIN_EXE_testenv"));
    command.env_remove("KUBECONFIG");
    command
}

fn crds_dir() -> String {
    test_support::repo_root().join("crds").display().to_string()
}

#[tokio::test]
async fn stop_kills_the_api_server_and_removes_its_directory() {
    test_support::skip_without!(Envtest);
    let env = TestEnv::start(TestEnvOptions::default())
        .await
        .expect("starting envtest");
    let port = port_of(env.server_url());
    let dir = env.dir().to_owned();
    assert!(is_listening(port));
    env.stop();
    assert!(
        wait_until_closed(port, Duration::from_secs(5)),
        "kube-apiserver still listens on {port} after stop()"
    );
    assert!(!dir.exists(), "{} was not removed", dir.display());
}

#[test]
fn testenv_runs_the_command_against_the_env_and_passes_its_exit_code() {
    test_support::skip_without!(Envtest);
    let out_dir = tempfile::tempdir().unwrap();
    let kubeconfig = out_dir.path().join("kubeconfig");
    // `kubectl` must resolve to the envtest one when it was built; `sh` is enough otherwise.
    let script = r#"
        test -s "$KUBECONFIG" || exit 90
        if command -v kubectl >/dev/null; then kubectl get ns default -o name || exit 91; fi
        exit 7
    "#;
    let output = testenv()
        .args(["--crds", &crds_dir(), "--kubeconfig-out"])
        .arg(&kubeconfig)
        .args(["--", "sh", "-c", script])
        .output()
        .expect("running testenv");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(7), "testenv stderr:\n{stderr}");
    let port = port_of(&server_in(&kubeconfig));
    assert!(
        wait_until_closed(port, Duration::from_secs(5)),
        "kube-apiserver still listens on {port} after testenv exited"
    );
}

#[test]
fn the_api_server_dies_when_testenv_is_killed() {
    test_support::skip_without!(Envtest);
    let out_dir = tempfile::tempdir().unwrap();
    let kubeconfig = out_dir.path().join("kubeconfig");
    // SIGKILL testenv (the command's parent): no destructor runs, only PDEATHSIG.
    let status = testenv()
        .args(["--crds", &crds_dir(), "--kubeconfig-out"])
        .arg(&kubeconfig)
        .args(["--", "sh", "-c", "kill -9 $PPID; exec sleep 5"])
        .status()
        .expect("running testenv");
    assert_eq!(
        std::os::unix::process::ExitStatusExt::signal(&status),
        Some(9)
    );
    let port = port_of(&server_in(&kubeconfig));
    assert!(
        wait_until_closed(port, Duration::from_secs(5)),
        "kube-apiserver still listens on {port} after testenv was killed"
    );
}

#[tokio::test]
async fn a_failing_api_server_is_reported_with_its_log() {
    test_support::skip_without!(Envtest);
    let opts = TestEnvOptions {
        extra_apiserver_args: vec!["--no-such-flag".to_owned()],
        ..TestEnvOptions::default()
    };
    let err = TestEnv::start(opts)
        .await
        .expect_err("kube-apiserver must refuse an unknown flag");
    let message = err.to_string();
    assert!(
        message.contains("kube-apiserver exited") && message.contains("unknown flag"),
        "{message}"
    );
}

#[tokio::test]
async fn a_restarted_api_server_keeps_its_port_certificates_and_objects() {
    test_support::skip_without!(Envtest);
    use k8s_openapi::api::core::v1::ConfigMap;
    use kube::Api;
    use kube::api::{ObjectMeta, PostParams};

    let mut env = TestEnv::start(TestEnvOptions::default())
        .await
        .expect("starting envtest");
    let url = env.server_url().to_owned();
    let client = env.client().await.expect("client");
    let maps: Api<ConfigMap> = Api::namespaced(client.clone(), "default");
    let created = maps
        .create(
            &PostParams::default(),
            &ConfigMap {
                metadata: ObjectMeta {
                    name: Some("kept".into()),
                    ..ObjectMeta::default()
                },
                data: Some([("k".to_owned(), "v".to_owned())].into()),
                ..ConfigMap::default()
            },
        )
        .await
        .expect("creating a ConfigMap");

    env.stop_apiserver();
    assert!(!env.is_running(), "is_running after stop_apiserver");
    assert!(
        wait_until_closed(port_of(&url), Duration::from_secs(5)),
        "kube-apiserver still listens after stop_apiserver"
    );
    env.start_apiserver().await.expect("starting it again");
    assert!(env.is_running());
    assert_eq!(env.server_url(), url, "same URL");

    // The client made before the restart still works: same port and CA.
    let read = maps.get("kept").await.expect("reading after the restart");
    assert_eq!(
        read.metadata.resource_version, created.metadata.resource_version,
        "the object survived in etcd unchanged"
    );
    let down = env.restart_apiserver().await.expect("restarting");
    assert!(down < Duration::from_secs(60), "{down:?}");
    let revision = env.compact_etcd().await.expect("compacting etcd");
    let rv: i64 = created
        .metadata
        .resource_version
        .as_deref()
        .and_then(|v| v.parse().ok())
        .expect("a numeric resourceVersion");
    assert!(revision >= rv, "compacted to {revision}, object at {rv}");
    maps.get("kept")
        .await
        .expect("reading after the compaction");
}
