//! The Kubernetes side of a scenario: kube-apiserver's own
//! `apiserver_request_total` (its `/metrics`), by verb, group, resource and
//! subresource, before and after.
//!
//! kube-apiserver names the verb of this metric by HTTP method, not by the
//! RBAC verb: `POST` (create), `PUT` (update), `PATCH` (merge and JSON
//! patches), `APPLY` (server-side apply, a PATCH of
//! `application/apply-patch+yaml`), `DELETE`, `DELETECOLLECTION`, `GET`,
//! `LIST` and `WATCH`. An event the operator creates through core/v1 is a
//! `POST` of `events` in group `""`; a status write (server-side apply of
//! the status subresource) an `APPLY` of subresource `status`.
//!
//! Beside the requests, `apiserver_watch_events_total` (by group and kind)
//! counts the events kube-apiserver encoded and sent to watches: each write
//! of an object costs one per watch of its kind, so this is what more
//! watches of one kind cost the API server. They are kept under the pseudo
//! verb [`SENT`].
//!
//! And the `process_cpu_seconds_total` of kube-apiserver and of its etcd
//! (read from etcd's own `/metrics`), under the pseudo verb [`CPU`]: on a
//! small machine they, not the operator, bound how fast a fleet's writes
//! are admitted (docs/BENCHMARKS.md, "Capacity").

use std::collections::BTreeMap;
use std::fmt::Write as _;

/// (verb, group, resource, subresource).
pub type Key = (String, String, String, String);

/// `apiserver_request_total` summed over codes and scopes: (verb, group,
/// resource, subresource) → requests.
#[derive(Clone, Debug, Default)]
pub struct ApiRequests(pub BTreeMap<Key, f64>);

/// The verbs of the metric that write.
const WRITES: [&str; 6] = [
    "POST",
    "PUT",
    "PATCH",
    "APPLY",
    "DELETE",
    "DELETECOLLECTION",
];

/// The pseudo verb of [`ApiRequests`] under which the watch events sent are
/// kept (`apiserver_watch_events_total`; its resource is the kind).
pub const SENT: &str = "SENT";

/// The pseudo verb of [`ApiRequests`] under which the CPU seconds
/// (`process_cpu_seconds_total`, user plus system) of kube-apiserver and of
/// etcd are kept, the process as the resource.
pub const CPU: &str = "CPU";

/// The resource of [`CPU`] that is kube-apiserver's.
const KUBE_APISERVER: &str = "kube-apiserver";

/// The resource of [`CPU`] that is etcd's.
const ETCD: &str = "etcd";

fn label<'a>(labels: &'a str, name: &str) -> &'a str {
    let key = format!("{name}=\"");
    labels
        .split(',')
        .find_map(|l| l.strip_prefix(key.as_str()))
        .map_or("", |v| v.trim_end_matches('"'))
}

/// A key of [`ApiRequests`] from its parts.
pub fn key(verb: &str, group: &str, resource: &str, subresource: &str) -> Key {
    (
        verb.to_owned(),
        group.to_owned(),
        resource.to_owned(),
        subresource.to_owned(),
    )
}

/// The `process_cpu_seconds_total` sample of a metrics text.
fn process_cpu(text: &str) -> Option<f64> {
    text.lines()
        .find_map(|line| line.strip_prefix("process_cpu_seconds_total "))
        .and_then(|v| v.trim().parse().ok())
}

impl ApiRequests {
    /// Reads kube-apiserver's `/metrics` as the benchmark's (admin) client,
    /// and the CPU seconds of etcd from its `/metrics` at `etcd_url` (plain
    /// HTTP on loopback, as the test environment serves it); what does not
    /// answer is left out, and said.
    pub async fn read(client: &kube::Client, etcd_url: &str) -> Self {
        let request = http::Request::get("/metrics")
            .body(Vec::new())
            .expect("a GET request");
        let mut out = match client.request_text(request).await {
            Ok(text) => Self::parse(&text),
            Err(e) => {
                eprintln!("reading kube-apiserver /metrics: {e}");
                Self::default()
            }
        };
        let etcd = async {
            reqwest::get(format!("{etcd_url}/metrics"))
                .await?
                .error_for_status()?
                .text()
                .await
        };
        match etcd.await {
            Ok(text) => {
                if let Some(v) = process_cpu(&text) {
                    out.0.insert(key(CPU, "", ETCD, ""), v);
                }
            }
            Err(e) => eprintln!("reading etcd /metrics: {e}"),
        }
        out
    }

    /// Parses the `apiserver_request_total`, `apiserver_watch_events_total`
    /// and `process_cpu_seconds_total` samples of a metrics text.
    pub fn parse(text: &str) -> Self {
        let mut out = BTreeMap::new();
        if let Some(v) = process_cpu(text) {
            out.insert(key(CPU, "", KUBE_APISERVER, ""), v);
        }
        for line in text.lines() {
            let (rest, sent) = if let Some(rest) = line.strip_prefix("apiserver_request_total{") {
                (rest, false)
            } else if let Some(rest) = line.strip_prefix("apiserver_watch_events_total{") {
                (rest, true)
            } else {
                continue;
            };
            let Some((labels, value)) = rest.rsplit_once("} ") else {
                continue;
            };
            let Ok(value) = value.trim().parse::<f64>() else {
                continue;
            };
            let k = if sent {
                // The kind under `kind` (older kube-apiservers) or
                // `resource` (newer ones).
                let kind = match label(labels, "kind") {
                    "" => label(labels, "resource"),
                    kind => kind,
                };
                key(SENT, label(labels, "group"), kind, "")
            } else {
                key(
                    label(labels, "verb"),
                    label(labels, "group"),
                    label(labels, "resource"),
                    label(labels, "subresource"),
                )
            };
            *out.entry(k).or_insert(0.0) += value;
        }
        Self(out)
    }

    /// What was sent between `before` and `self`.
    pub fn since(&self, before: &Self) -> Self {
        Self(
            self.0
                .iter()
                .map(|(k, v)| (k.clone(), v - before.0.get(k).copied().unwrap_or(0.0)))
                .filter(|(_, v)| *v > 0.0)
                .collect(),
        )
    }

    /// These requests less `own` (the benchmark's, counted client-side).
    pub fn less(&self, own: &[(Key, f64)]) -> Self {
        let mut out = self.0.clone();
        for (k, n) in own {
            if let Some(v) = out.get_mut(k) {
                *v = (*v - n).max(0.0);
            }
        }
        out.retain(|_, v| *v > 0.0);
        Self(out)
    }

    /// kube-apiserver's CPU seconds (user plus system) in this window.
    pub fn cpu_seconds(&self) -> f64 {
        self.cpu_of(KUBE_APISERVER)
    }

    /// etcd's CPU seconds (user plus system) in this window; 0 when its
    /// `/metrics` did not answer.
    pub fn etcd_cpu_seconds(&self) -> f64 {
        self.cpu_of(ETCD)
    }

    fn cpu_of(&self, process: &str) -> f64 {
        self.0
            .get(&key(CPU, "", process, ""))
            .copied()
            .unwrap_or(0.0)
    }

    /// Writes (create, update, patch, apply, delete), all resources, events
    /// included.
    pub fn writes(&self) -> f64 {
        self.0
            .iter()
            .filter(|((verb, ..), _)| WRITES.contains(&verb.as_str()))
            .map(|(_, v)| v)
            .sum()
    }

    /// Writes of the leader election's Lease (`coordination.k8s.io`
    /// leases): renewals every few seconds, so they follow the run's
    /// duration, not the number of objects.
    pub fn lease_writes(&self) -> f64 {
        self.0
            .iter()
            .filter(|((verb, group, resource, _), _)| {
                WRITES.contains(&verb.as_str())
                    && group == "coordination.k8s.io"
                    && resource == "leases"
            })
            // From +0.0: a float `sum` of nothing is -0.0, printed "-0".
            .fold(0.0, |sum, (_, v)| sum + v)
    }

    /// The writes about the objects ([`Self::writes`] less
    /// [`Self::lease_writes`]): the figure per AgentDeployment that the
    /// benchmark gates.
    pub fn object_writes(&self) -> f64 {
        self.writes() - self.lease_writes()
    }

    /// Requests of `verb`, all resources.
    pub fn of_verb(&self, verb: &str) -> f64 {
        self.0
            .iter()
            .filter(|((v, ..), _)| v == verb)
            .map(|(_, n)| n)
            .sum::<f64>()
            + 0.0 // an empty sum is -0.0
    }

    /// One line (the operator's writes per resource, LIST and WATCH calls),
    /// then the writes by verb and resource.
    pub fn render(&self, n: usize) -> String {
        let mut out = String::new();
        let writes = self.writes();
        let _ = writeln!(
            out,
            "    Kubernetes (operator): {writes:.0} writes ({:.2} per resource, events included; {:.2} without the {:.0} Lease renewals) | GET {:.0} | LIST {:.0} | WATCH {:.0} | kube-apiserver CPU {:.1} s ({:.1} ms per resource, the benchmark's applies included) | etcd CPU {:.1} s ({:.1} ms per resource)",
            writes / n.max(1) as f64,
            self.object_writes() / n.max(1) as f64,
            self.lease_writes(),
            self.of_verb("GET"),
            self.of_verb("LIST"),
            self.of_verb("WATCH"),
            self.cpu_seconds(),
            1000.0 * self.cpu_seconds() / n.max(1) as f64,
            self.etcd_cpu_seconds(),
            1000.0 * self.etcd_cpu_seconds() / n.max(1) as f64,
        );
        for ((verb, group, resource, sub), v) in &self.0 {
            if WRITES.contains(&verb.as_str())
                || verb == "LIST"
                || verb == "WATCH"
                || (verb == SENT && group == "agentserver.dev")
            {
                let mut what = resource.clone();
                if !group.is_empty() {
                    what = format!("{what}.{group}");
                }
                if !sub.is_empty() {
                    what = format!("{what}/{sub}");
                }
                let _ = writeln!(
                    out,
                    "      {verb:<7} {what:<44} {v:>8.0} ({:.2} per resource)",
                    v / n.max(1) as f64
                );
            }
        }
        out
    }
}
