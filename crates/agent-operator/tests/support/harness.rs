//! [`Harness`], one operator test's world, and [`HarnessBuilder`], the one
//! way to set it up: the emulator's and the operator's flags as typed
//! methods (revision step, remote delete, scenarios, seeds, resync
//! interval), the request budget, and the envtest API server. The harness
//! checks the test's request budget when it is dropped (see
//! [`super::budget`]), then scans for leaked secret values (see
//! [`super::leaks`]).
//!
//! The in-process preset ([`HarnessBuilder::start_in_process`]) runs the
//! emulator and the operator's controllers inside the test process, for the
//! tests that reach into the operator's context (its client cache, its
//! settings): [`InProcessHarness`], with the same budget check and secret
//! scan when it is dropped.

use std::sync::Arc;
use std::time::Duration;

use agent_operator::api::AgentDeployment;
use agent_operator::controller::Context;
use agent_operator::controller::scaffold::Scope;
use control_plane_emulator::{EmulatorConfig, RunningEmulator};
use kube::Api;
use serde_json::Value;
use test_support::budget::{RequestLog, budget_message};
use test_support::envtest::TestEnv;

use super::budget::Budget;
use super::{EmulatorProcess, OperatorProcess};

/// One test's world: a namespace with the AgentControlPlane `default`, an
/// emulator, its client, and an operator watching the namespace.
///
/// When it is dropped at the end of a test that did not panic, it checks the
/// emulator's request log against [`Harness::budget`] and panics with the
/// violations (see [`super::budget`]), then scans for leaked secret values
/// (see [`super::leaks`]).
pub struct Harness {
    /// Kubernetes client (cluster-admin).
    pub client: kube::Client,
    /// The test's namespace.
    pub ns: String,
    /// AgentDeployments of the namespace.
    pub api: Api<AgentDeployment>,
    /// The emulator.
    pub emulator: EmulatorProcess,
    /// A control plane client of the test workspace (acts "outside").
    pub cp: agent_operator::controlplane::ControlPlaneClient,
    /// The operator, unless the test stopped it.
    pub operator: Option<OperatorProcess>,
    /// The request budget checked when the harness is dropped; default
    /// [`Budget::default`] (20 requests per route and resource, 60 per route
    /// without an id, 600 in all, per minute), or the one of
    /// [`HarnessBuilder::budget`], widened by the loops the operator's flags
    /// ask for ([`Budget::allowing_operator_flags`]). A test may tighten or
    /// loosen it.
    pub budget: Budget,
    /// The cluster-admin kubeconfig, for the secret scan at the end.
    pub kubeconfig: std::path::PathBuf,
    /// The test's name: the namespace prefix and the log file names.
    pub test: String,
    /// The operator watches every namespace, leader-elected
    /// ([`HarnessBuilder::cluster_wide`]).
    cluster_wide: bool,
    /// The namespaces the test added ([`Harness::namespace`],
    /// [`Harness::team`]), scanned for leaked secrets at the end too.
    teams: std::sync::Mutex<Vec<String>>,
}

impl Drop for Harness {
    /// Checks [`Harness::budget`], then scans the namespace's Events and
    /// statuses and the operator and emulator logs for secret values
    /// ([`super::leaks::check_namespace_blocking`]). When the test is
    /// already failing, the budget is not checked and the scan still runs
    /// without panicking ([`super::leaks::scan_namespace_after_panic`]).
    fn drop(&mut self) {
        let teams = std::mem::take(self.teams.get_mut().unwrap_or_else(|e| e.into_inner()));
        let namespaces = std::iter::once(&self.ns).chain(&teams);
        if std::thread::panicking() {
            for ns in namespaces {
                super::leaks::scan_namespace_after_panic(&self.kubeconfig, ns);
            }
        } else {
            super::budget::check_budget_blocking(&self.emulator.base_url, &self.budget);
            for ns in namespaces {
                super::leaks::check_namespace_blocking(&self.kubeconfig, ns);
            }
        }
    }
}

/// Builds a [`Harness`]: a fresh namespace named after the test on the
/// shared envtest API server (or [`Self::on`] another), the emulator with
/// its flags, the AgentControlPlane `default` pointing at it, and an
/// operator with its flags (none with [`Self::without_operator`]). The one
/// setup of the operator tests, e.g.
/// `Harness::quick("op-drift").resync_seconds(0.5).start().await`.
///
/// Flags other than the revision step and the delete time accumulate in the
/// order of the calls; the emulator refuses flags its binary would refuse
/// (the test panics naming them).
pub struct HarnessBuilder<'e> {
    test: String,
    env: Option<&'e TestEnv>,
    step_seconds: Option<f64>,
    delete_seconds: Option<f64>,
    emulator: Vec<String>,
    operator: Vec<String>,
    start_operator: bool,
    cluster_wide: bool,
    budget: Budget,
}

impl<'e> HarnessBuilder<'e> {
    fn emulator_flag(mut self, flag: &str, value: impl ToString) -> Self {
        self.emulator.push(flag.to_owned());
        self.emulator.push(value.to_string());
        self
    }

    /// Each revision status step of the emulator takes `seconds`
    /// (`--step-seconds`: AWAITING_BUILD → BUILDING → AWAITING_DEPLOY →
    /// DEPLOYING → DEPLOYED); the last call counts.
    pub fn step_seconds(mut self, seconds: f64) -> Self {
        self.step_seconds = Some(seconds);
        self
    }

    /// A remote delete completes after `seconds` (`--delete-seconds`); the
    /// last call counts.
    pub fn delete_seconds(mut self, seconds: f64) -> Self {
        self.delete_seconds = Some(seconds);
        self
    }

    /// One emulator scenario rule, `OUTCOME:field=value` (`--scenario`), e.g.
    /// `BUILD_FAILED:repo_ref=broken`; repeatable.
    pub fn scenario(self, rule: &str) -> Self {
        self.emulator_flag("--scenario", rule)
    }

    /// [`Self::scenario`] for each of `rules`.
    pub fn scenarios(self, rules: &[&str]) -> Self {
        rules.iter().fold(self, |b, rule| b.scenario(rule))
    }

    /// A listener seeded in the emulator, `WORKSPACE=ID:COMPUTE:NS,...`
    /// (`--listener`).
    pub fn listener(self, seed: &str) -> Self {
        self.emulator_flag("--listener", seed)
    }

    /// A GitHub integration seeded in the emulator,
    /// `WORKSPACE=ID:NAME:REPO,...` (`--integration`).
    pub fn integration(self, seed: &str) -> Self {
        self.emulator_flag("--integration", seed)
    }

    /// The URL every deployment of the emulator reports
    /// (`--agent-server-url`).
    pub fn agent_server_url(self, url: &str) -> Self {
        self.emulator_flag("--agent-server-url", url)
    }

    /// Other flags of the emulator, as its binary takes them, after those
    /// set so far.
    pub fn emulator_flags(mut self, args: &[&str]) -> Self {
        self.emulator.extend(args.iter().map(|a| (*a).to_owned()));
        self
    }

    /// The operator re-checks a steady resource every `seconds`
    /// (`--resync-interval-seconds`; the budget widens for it).
    pub fn resync_seconds(self, seconds: f64) -> Self {
        self.operator_flags(&["--resync-interval-seconds", &seconds.to_string()])
    }

    /// Other flags of the operator process, after those set so far (default:
    /// none, the shipped intervals). The budget widens for the loops they
    /// ask for ([`Budget::allowing_operator_flags`]).
    pub fn operator_flags(mut self, args: &[&str]) -> Self {
        self.operator.extend(args.iter().map(|a| (*a).to_owned()));
        self
    }

    /// Start no operator (the test starts its own with
    /// [`Harness::start_operator`] or [`OperatorProcess`], or none).
    pub fn without_operator(mut self) -> Self {
        self.start_operator = false;
        self
    }

    /// The tenant shape, as users run the operator: it watches every
    /// namespace (no `--namespace`), leader-elected on the Lease
    /// `agent-operator-<test>` in the operator's namespace as the pod
    /// `<test>-0`, as the shipped ServiceAccount under the cluster-wide
    /// ClusterRole. Teams join with [`Harness::team`]. It needs an API server
    /// of the test's own ([`Self::on`] with `common::own_env`): on the shared
    /// one it would reconcile every other test's objects, so `start` panics
    /// without one.
    pub fn cluster_wide(mut self) -> Self {
        self.cluster_wide = true;
        self
    }

    /// The request budget before the operator's flags widen it (default
    /// [`Budget::default`]), e.g. [`Budget::fleet`].
    pub fn budget(mut self, budget: Budget) -> Self {
        self.budget = budget;
        self
    }

    /// On `env` instead of the shared envtest API server (a test that
    /// restarts or breaks its own).
    pub fn on(mut self, env: &'e TestEnv) -> Self {
        self.env = Some(env);
        self
    }

    /// Creates the namespace, starts the emulator, installs the control
    /// plane and starts the operator.
    pub async fn start(self) -> Harness {
        let env = self
            .env
            .unwrap_or_else(|| crate::common::shared_env().env());
        let client = env.client().await.expect("building an envtest client");
        let ns = crate::common::test_namespace(&client, &self.test).await;
        let timing = [
            ("--step-seconds", self.step_seconds),
            ("--delete-seconds", self.delete_seconds),
        ];
        let timing: Vec<String> = timing
            .into_iter()
            .filter_map(|(flag, secs)| secs.map(|s| [flag.to_owned(), s.to_string()]))
            .flatten()
            .collect();
        let emulator_args: Vec<&str> = timing
            .iter()
            .chain(&self.emulator)
            .map(String::as_str)
            .collect();
        let emulator = EmulatorProcess::start_with(&self.test, &emulator_args).await;
        let cp = emulator.client();
        super::install_control_plane(&client, &ns, &emulator).await;
        let operator_args: Vec<&str> = self.operator.iter().map(String::as_str).collect();
        let kubeconfig = env.kubeconfig_path();
        assert!(
            !self.cluster_wide || self.env.is_some(),
            "a cluster-wide operator needs an API server of the test's own: .on(&env)"
        );
        let mut harness = Harness {
            api: Api::namespaced(client.clone(), &ns),
            client,
            ns,
            emulator,
            cp,
            operator: None,
            budget: if self.start_operator {
                self.budget.allowing_operator_flags(&operator_args)
            } else {
                self.budget
            },
            kubeconfig: kubeconfig.to_owned(),
            test: self.test,
            cluster_wide: self.cluster_wide,
            teams: Default::default(),
        };
        if self.start_operator {
            harness.operator = Some(harness.start_operator(&operator_args));
        }
        harness
    }
}

/// A controller of the operator that the in-process preset runs in the test
/// process, watching only the test's namespace.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum InProcessController {
    /// `controller::control_plane::run`.
    ControlPlane,
    /// `controller::listener::run`.
    Listener,
}

/// One test's world in the test process ([`HarnessBuilder::start_in_process`]):
/// a namespace, an emulator on loopback, the operator's context (acting as
/// its ServiceAccount) and the controllers asked for. Nothing is installed in
/// the namespace.
///
/// When it is dropped it stops its controllers, checks the emulator's request
/// log against [`InProcessHarness::budget`] (read in process, not over HTTP:
/// the emulator may run on the test's own runtime) unless the test is
/// already failing, then scans the namespace for leaked secret values.
pub struct InProcessHarness {
    /// Kubernetes client (cluster-admin).
    pub client: kube::Client,
    /// The test's namespace.
    pub ns: String,
    /// The emulator, in process.
    pub emulator: RunningEmulator,
    /// The operator's context the controllers run on.
    pub ctx: Arc<Context>,
    /// The request budget checked when the harness is dropped (default
    /// [`Budget::default`], or the one of [`HarnessBuilder::budget`]).
    pub budget: Budget,
    controllers: Vec<tokio::task::JoinHandle<()>>,
}

impl Drop for InProcessHarness {
    fn drop(&mut self) {
        for task in &self.controllers {
            task.abort();
        }
        if !std::thread::panicking() {
            let log: RequestLog = serde_json::from_value(self.emulator.state().request_log())
                .expect("the emulator's request log");
            let violations: Vec<String> = self
                .budget
                .violations(&log.entries)
                .iter()
                .map(ToString::to_string)
                .collect();
            assert!(
                violations.is_empty(),
                "{}",
                budget_message(&self.budget, &violations)
            );
        }
        super::scan_namespace_on_drop(&self.ns);
    }
}

impl HarnessBuilder<'_> {
    /// The in-process preset: a fresh namespace named after the test, the
    /// emulator of `config` in the test process, the operator's context
    /// ([`super::in_process_context`]) and `controllers` running on it in the
    /// namespace. The flags of the emulator and the operator process do not
    /// apply (the test panics if any was set); the budget does.
    pub async fn start_in_process(
        self,
        config: EmulatorConfig,
        controllers: &[InProcessController],
    ) -> InProcessHarness {
        assert!(
            self.emulator.is_empty()
                && self.operator.is_empty()
                && self.step_seconds.is_none()
                && self.delete_seconds.is_none(),
            "the in-process preset takes an EmulatorConfig, not process flags"
        );
        let env = self
            .env
            .unwrap_or_else(|| crate::common::shared_env().env());
        let client = env.client().await.expect("building an envtest client");
        let ns = crate::common::test_namespace(&client, &self.test).await;
        let emulator = control_plane_emulator::spawn(config)
            .await
            .expect("starting the emulator");
        let ctx = super::in_process_context().await;
        let controllers = controllers
            .iter()
            .map(|c| {
                let (ctx, scope) = (ctx.clone(), Scope::Namespace(ns.clone()));
                let never = futures::future::pending();
                match c {
                    InProcessController::ControlPlane => tokio::spawn(
                        agent_operator::controller::control_plane::run(ctx, scope, never),
                    ),
                    InProcessController::Listener => {
                        tokio::spawn(agent_operator::controller::listener::run(ctx, scope, never))
                    }
                }
            })
            .collect();
        InProcessHarness {
            client,
            ns,
            emulator,
            ctx,
            budget: self.budget,
            controllers,
        }
    }
}

impl Harness {
    /// A [`HarnessBuilder`] for the test `test` (also the namespace prefix
    /// and the log file names): the emulator at its defaults, an operator at
    /// the shipped intervals.
    pub fn builder(test: &str) -> HarnessBuilder<'static> {
        HarnessBuilder {
            test: test.to_owned(),
            env: None,
            step_seconds: None,
            delete_seconds: None,
            emulator: Vec::new(),
            operator: Vec::new(),
            start_operator: true,
            cluster_wide: false,
            budget: Budget::default(),
        }
    }

    /// [`Self::builder`] with revisions that roll out in about a second
    /// (steps of 0.2 s) and remote deletes that take 0.5 s: the setup of
    /// most operator tests.
    pub fn quick(test: &str) -> HarnessBuilder<'static> {
        Self::builder(test).step_seconds(0.2).delete_seconds(0.5)
    }

    /// [`Self::quick`] with the budget of a fleet test ([`Budget::fleet`]):
    /// the setup of the fault suite.
    pub fn fleet(test: &str) -> HarnessBuilder<'static> {
        Self::quick(test).budget(Budget::fleet())
    }

    /// Starts an operator on the harness's namespace (on every namespace,
    /// leader-elected, with [`HarnessBuilder::cluster_wide`]) with `extra`
    /// flags, logging as the test (`target/test-logs/<test>-operator.log`),
    /// e.g. after the test prepared a state with
    /// [`HarnessBuilder::without_operator`]. The budget is left as it is.
    pub fn start_operator(&self, extra: &[&str]) -> OperatorProcess {
        if !self.cluster_wide {
            return OperatorProcess::start(&self.test, &self.kubeconfig, &self.ns, extra);
        }
        let lease = format!("agent-operator-{}", self.test);
        let pod = format!("{}-0", self.test);
        let mut args = vec![
            "--leader-elect",
            "--lease-name",
            &lease,
            "--lease-namespace",
            super::OPERATOR_NAMESPACE,
        ];
        args.extend_from_slice(extra);
        OperatorProcess::start_with(
            &self.kubeconfig,
            super::OperatorOptions {
                log_name: &self.test,
                namespaces: vec![],
                extra: args,
                env: vec![("POD_NAME", &pod)],
                ..super::OperatorOptions::default()
            },
        )
    }

    /// A further namespace named after `prefix`, with nothing in it, whose
    /// Events and objects are scanned for leaked secrets when the harness is
    /// dropped.
    pub async fn namespace(&self, prefix: &str) -> String {
        let ns = crate::common::test_namespace(&self.client, prefix).await;
        self.teams
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push(ns.clone());
        ns
    }

    /// A team of the tenant shape: a further namespace ([`Self::namespace`])
    /// with the AgentControlPlane `default` on `emulator` (the harness's own
    /// with `None`), its test key and workspace.
    pub async fn team(&self, prefix: &str, emulator: Option<&EmulatorProcess>) -> String {
        let ns = self.namespace(prefix).await;
        super::install_control_plane(&self.client, &ns, emulator.unwrap_or(&self.emulator)).await;
        ns
    }

    /// Waits until the AgentControlPlane `default` is `Ready=True` (its
    /// probe done, so that it is not counted against a resource).
    pub async fn wait_control_plane_ready(&self, timeout: Duration) {
        let planes: Api<agent_operator::api::AgentControlPlane> =
            Api::namespaced(self.client.clone(), &self.ns);
        super::eventually(timeout, "the AgentControlPlane to be Ready", || async {
            let plane = planes.get_opt("default").await.ok()??;
            let ready = agent_operator::api::conditions::find(
                &plane.status?.conditions,
                agent_operator::api::conditions::READY,
            )?
            .clone();
            (ready.status == "True").then_some(())
        })
        .await;
    }

    /// Waits until `name` is `Ready=True` for its current generation.
    pub async fn wait_ready(&self, name: &str, timeout: Duration) -> AgentDeployment {
        super::wait_for(&self.api, name, timeout, "Ready=True", |o| {
            super::is_ready_now(o).then(|| o.clone())
        })
        .await
    }

    /// Waits until `name` is `Ready=True` for its current generation on a
    /// revision other than `previous` (its `status.latestRevisionId` before
    /// a change).
    pub async fn wait_ready_past(
        &self,
        name: &str,
        previous: Option<&str>,
        timeout: Duration,
    ) -> AgentDeployment {
        super::wait_for(&self.api, name, timeout, "Ready on a new revision", |o| {
            let latest = o.status.as_ref()?.latest_revision_id.as_deref();
            (super::is_ready_now(o) && latest != previous).then(|| o.clone())
        })
        .await
    }

    /// Waits until `name` is `Stalled=True` with `reason` for its current
    /// generation.
    pub async fn wait_stalled(
        &self,
        name: &str,
        reason: &str,
        timeout: Duration,
    ) -> AgentDeployment {
        super::wait_for(
            &self.api,
            name,
            timeout,
            &format!("Stalled {reason}"),
            |o| super::is_stalled_with(o, reason).then(|| o.clone()),
        )
        .await
    }

    /// Server-side applies a manifest (field manager `tests`).
    pub async fn apply(&self, manifest: Value) -> AgentDeployment {
        let name = manifest["metadata"]["name"]
            .as_str()
            .expect("metadata.name")
            .to_owned();
        super::apply_json(&self.api, &name, manifest).await
    }

    /// Applies `manifest` ([`Self::apply`]), waits until it is `Ready=True`
    /// for its generation ([`Self::wait_ready`]), and returns the id of its
    /// remote deployment.
    pub async fn converge(&self, manifest: Value, timeout: Duration) -> String {
        let name = self
            .apply(manifest)
            .await
            .metadata
            .name
            .expect("metadata.name");
        self.wait_ready(&name, timeout)
            .await
            .status
            .and_then(|s| s.deployment_id)
            .expect("a Ready AgentDeployment records its deployment id")
    }

    /// Panics when any of `values` shows in the AgentDeployment `name` as
    /// the API server has it, in the notes of the events about it, or in
    /// the operator's log (which must be at debug level, so that the scan
    /// means something); the log must not show the control plane's API key
    /// either.
    pub async fn assert_unseen(&self, name: &str, values: &[&str]) {
        let obj_json =
            serde_json::to_string(&self.api.get(name).await.expect("reading the object"))
                .expect("serializing the object");
        for value in values {
            assert!(!obj_json.contains(value), "the object shows {value}");
        }
        for event in super::events_about(&self.client, &self.ns, name).await {
            let note = super::note_of(&event);
            assert!(
                !values.iter().any(|v| note.contains(v)),
                "event {:?} shows a value: {note}",
                event.reason
            );
        }
        let path = super::log_path(&self.test, "operator");
        let log = std::fs::read_to_string(&path).expect("the operator's log");
        assert!(
            log.contains("DEBUG"),
            "the log is at debug level, so the scan means something"
        );
        for value in values.iter().chain([&super::API_KEY]) {
            assert!(!log.contains(value), "the operator log shows {value}");
        }
    }

    /// Every remote deployment of the workspace.
    pub async fn remote_deployments(&self) -> Vec<agent_operator::controlplane::types::Deployment> {
        self.cp
            .list_all_deployments(&Default::default())
            .await
            .expect("listing remote deployments")
    }

    /// Requests the emulator logged about remote deployment `id` (any
    /// route with `{deployment_id}` = `id`: reads, patches, revisions), the
    /// test's own included.
    pub async fn requests_about(&self, id: &str) -> usize {
        self.emulator
            .request_log()
            .await
            .entries
            .iter()
            .filter(|r| r.deployment_id.as_deref() == Some(id))
            .count()
    }

    /// The AgentDeployment passes the harness's operator has finished so far
    /// (`agent_operator_reconciles_total{kind="AgentDeployment"}`, any
    /// outcome). Panics without an operator.
    pub async fn deployment_passes(&self) -> f64 {
        let operator = self.operator.as_ref().expect("the harness's operator");
        super::metric(
            &operator.metrics().await,
            "agent_operator_reconciles_total",
            &[("kind", "AgentDeployment")],
        )
        .unwrap_or(0.0)
    }

    /// The revisions of remote deployment `id`, newest first.
    pub async fn revisions(&self, id: &str) -> Vec<agent_operator::controlplane::types::Revision> {
        self.cp
            .list_all_revisions(id, &Default::default())
            .await
            .expect("listing revisions")
    }
}
