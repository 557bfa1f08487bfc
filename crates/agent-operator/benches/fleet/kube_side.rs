//! The Kubernetes side of a scenario: kube-apiserver's own
//! `apiserver_request_total` (its `/metrics`), by verb, resource and
//! subresource, before and after.

use std::collections::BTreeMap;
use std::fmt::Write as _;

/// `apiserver_request_total` summed over codes and scopes: (verb, resource,
/// subresource) → requests.
#[derive(Clone, Debug, Default)]
pub struct ApiRequests(pub BTreeMap<(String, String, String), f64>);

/// Verbs that write.
const WRITES: [&str; 4] = ["CREATE", "UPDATE", "PATCH", "DELETE"];

fn label<'a>(labels: &'a str, name: &str) -> &'a str {
    let key = format!("{name}=\"");
    labels
        .split(',')
        .find_map(|l| l.strip_prefix(key.as_str()))
        .map_or("", |v| v.trim_end_matches('"'))
}

impl ApiRequests {
    /// Reads kube-apiserver's `/metrics` as the benchmark's (admin) client;
    /// empty when it does not answer.
    pub async fn read(client: &kube::Client) -> Self {
        let request = http::Request::get("/metrics")
            .body(Vec::new())
            .expect("a GET request");
        match client.request_text(request).await {
            Ok(text) => Self::parse(&text),
            Err(e) => {
                eprintln!("reading kube-apiserver /metrics: {e}");
                Self::default()
            }
        }
    }

    /// Parses the `apiserver_request_total` samples of a metrics text.
    pub fn parse(text: &str) -> Self {
        let mut out = BTreeMap::new();
        for line in text.lines() {
            let Some(rest) = line.strip_prefix("apiserver_request_total{") else {
                continue;
            };
            let Some((labels, value)) = rest.rsplit_once("} ") else {
                continue;
            };
            let Ok(value) = value.trim().parse::<f64>() else {
                continue;
            };
            let key = (
                label(labels, "verb").to_owned(),
                label(labels, "resource").to_owned(),
                label(labels, "subresource").to_owned(),
            );
            *out.entry(key).or_insert(0.0) += value;
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

    /// Writes (create, update, patch, delete), all resources, events included.
    pub fn writes(&self) -> f64 {
        self.0
            .iter()
            .filter(|((verb, _, _), _)| WRITES.contains(&verb.as_str()))
            .map(|(_, v)| v)
            .sum()
    }

    /// LIST and WATCH calls.
    pub fn lists_and_watches(&self) -> (f64, f64) {
        let sum = |verb: &str| -> f64 {
            self.0
                .iter()
                .filter(|((v, _, _), _)| v == verb)
                .map(|(_, n)| n)
                .sum()
        };
        (sum("LIST"), sum("WATCH"))
    }

    /// One line (writes per resource after taking out `own_writes` and
    /// `own_lists` of the benchmark itself), then the writes by resource.
    pub fn render(&self, n: usize, own_writes: f64, own_lists: f64) -> String {
        let mut out = String::new();
        let writes = (self.writes() - own_writes).max(0.0);
        let (lists, watches) = self.lists_and_watches();
        let _ = writeln!(
            out,
            "    Kubernetes: {writes:.0} operator writes ({:.2} per resource; the benchmark's own {own_writes:.0} taken out) | LIST {:.0} (the benchmark's own {own_lists:.0} taken out) | WATCH {watches:.0}",
            writes / n.max(1) as f64,
            (lists - own_lists).max(0.0),
        );
        for ((verb, resource, sub), v) in &self.0 {
            if WRITES.contains(&verb.as_str()) {
                let what = if sub.is_empty() {
                    resource.clone()
                } else {
                    format!("{resource}/{sub}")
                };
                let _ = writeln!(out, "      {verb:<7} {what:<40} {v:>8.0}");
            }
        }
        out
    }
}
