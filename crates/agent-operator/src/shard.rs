//! Sharding (`--shard`): several operator Deployments split the objects of
//! one cluster by the label [`SHARD_LABEL`], the Flux convention
//! (`sharding.fluxcd.io/key`), each shard electing its own leader.
//!
//! An operator started with `--shard <key>` watches only the objects
//! labelled `sharding.fluxcd.io/key=<key>`; one started without it watches
//! only the objects *without* that label (Flux's selector for its main
//! controller, `!sharding.fluxcd.io/key`). So every object belongs to
//! exactly one operator whatever mix of shards runs, and no object is
//! reconciled by two. Every kind the operator reconciles is sharded the
//! same way (AgentDeployment, AgentControlPlane, AgentListener,
//! AgentAssistant, AgentCron): a control plane's request budget lives in one process,
//! so a workspace's AgentControlPlane and everything that uses it carry the
//! same key (docs/INSTALL.md, "Sharding"); an object whose control plane is
//! in another shard is blocked ([`Shard::foreign_plane`]). Secrets are not
//! labelled by users and stay watched whole (metadata only) by every shard.

use std::collections::BTreeMap;

/// The label that assigns an object to a shard (the Flux convention).
pub const SHARD_LABEL: &str = "sharding.fluxcd.io/key";

/// The longest shard key: a label value (and a DNS label), 63 characters.
pub const MAX_KEY_LEN: usize = 63;

/// Which objects this operator reconciles: those labelled with its key, or,
/// unsharded (the default), those without the label.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Shard {
    key: Option<String>,
}

/// A shard key that is not a DNS label.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
#[error(
    "shard key {0:?} must be a DNS label: 1 to 63 lowercase letters, digits or '-', starting and ending with a letter or digit"
)]
pub struct InvalidKey(pub String);

impl Shard {
    /// The shard of `key` (`--shard`); `None` or a blank key is the
    /// unsharded operator.
    ///
    /// The key is a DNS label (lowercase letters, digits, `-`; at most
    /// [`MAX_KEY_LEN`]), so that it is both a label value and a suffix of
    /// the Lease's name. Errors: [`InvalidKey`].
    pub fn new(key: Option<&str>) -> Result<Self, InvalidKey> {
        let Some(key) = key.map(str::trim).filter(|k| !k.is_empty()) else {
            return Ok(Self::default());
        };
        let alnum = |c: char| c.is_ascii_lowercase() || c.is_ascii_digit();
        let valid = key.len() <= MAX_KEY_LEN
            && key.chars().all(|c| alnum(c) || c == '-')
            && key.starts_with(alnum)
            && key.ends_with(alnum);
        if !valid {
            return Err(InvalidKey(key.to_owned()));
        }
        Ok(Self {
            key: Some(key.to_owned()),
        })
    }

    /// This operator's key; `None` when unsharded.
    pub fn key(&self) -> Option<&str> {
        self.key.as_deref()
    }

    /// The label selector of every watch of a sharded kind:
    /// `sharding.fluxcd.io/key=<key>`, or `!sharding.fluxcd.io/key` when
    /// unsharded.
    pub fn selector(&self) -> String {
        match &self.key {
            Some(key) => format!("{SHARD_LABEL}={key}"),
            None => format!("!{SHARD_LABEL}"),
        }
    }

    /// `config` restricted to this shard's objects ([`Self::selector`]).
    pub fn watch(&self, config: kube::runtime::watcher::Config) -> kube::runtime::watcher::Config {
        config.labels(&self.selector())
    }

    /// Whether an object with `labels` belongs to this shard (what the
    /// API server's selector decides for a watch).
    pub fn owns(&self, labels: &BTreeMap<String, String>) -> bool {
        labels.get(SHARD_LABEL).map(String::as_str) == self.key()
    }

    /// The Lease this shard elects its leader on: `base` when unsharded,
    /// `<base>-<key>` for a shard, so that each shard has a leader of its
    /// own while the replicas of one shard share a Lease.
    pub fn lease_name(&self, base: &str) -> String {
        match &self.key {
            Some(key) => format!("{base}-{key}"),
            None => base.to_owned(),
        }
    }

    /// Why an AgentControlPlane with `labels`, read by name, must not be
    /// used by this shard: it belongs to another one (its request budget is
    /// kept by that shard's process). `None` when it is this shard's.
    pub fn foreign_plane(&self, labels: &BTreeMap<String, String>) -> Option<String> {
        if self.owns(labels) {
            return None;
        }
        let theirs = match labels.get(SHARD_LABEL) {
            Some(key) => format!("shard {key:?}"),
            None => "the unsharded operator".to_owned(),
        };
        let ours = match self.key() {
            Some(key) => format!("shard {key:?}"),
            None => "the unsharded operator".to_owned(),
        };
        Some(format!(
            "it belongs to {theirs} (label {SHARD_LABEL}) and this is {ours}: a control plane and \
             every object that uses it must carry the same {SHARD_LABEL} label (docs/INSTALL.md, \"Sharding\")"
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn labels(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect()
    }

    #[test]
    fn unsharded_watches_the_objects_without_the_label() {
        let main = Shard::new(None).unwrap();
        assert_eq!(main, Shard::new(Some("  ")).unwrap());
        assert_eq!(main.key(), None);
        assert_eq!(main.selector(), "!sharding.fluxcd.io/key");
        assert!(main.owns(&labels(&[("app", "x")])));
        assert!(!main.owns(&labels(&[(SHARD_LABEL, "a")])));
        assert_eq!(main.lease_name("agent-operator"), "agent-operator");
    }

    #[test]
    fn a_shard_watches_its_key_and_elects_on_its_own_lease() {
        let a = Shard::new(Some("shard-1")).unwrap();
        assert_eq!(a.selector(), "sharding.fluxcd.io/key=shard-1");
        assert!(a.owns(&labels(&[(SHARD_LABEL, "shard-1")])));
        assert!(!a.owns(&labels(&[(SHARD_LABEL, "shard-2")])));
        assert!(!a.owns(&labels(&[])));
        assert_eq!(a.lease_name("agent-operator"), "agent-operator-shard-1");
    }

    #[test]
    fn a_key_must_be_a_dns_label() {
        for bad in ["A", "a_b", "-a", "a-", "a.b", &"a".repeat(64)] {
            assert_eq!(
                Shard::new(Some(bad)),
                Err(InvalidKey(bad.to_owned())),
                "{bad}"
            );
        }
        assert!(Shard::new(Some(&"a".repeat(63))).is_ok());
    }

    #[test]
    fn a_plane_of_another_shard_is_refused_with_both_keys() {
        let a = Shard::new(Some("a")).unwrap();
        assert_eq!(a.foreign_plane(&labels(&[(SHARD_LABEL, "a")])), None);
        let why = a.foreign_plane(&labels(&[(SHARD_LABEL, "b")])).unwrap();
        assert!(
            why.contains("shard \"b\"") && why.contains("shard \"a\""),
            "{why}"
        );
        let why = a.foreign_plane(&labels(&[])).unwrap();
        assert!(why.contains("the unsharded operator"), "{why}");
        let main = Shard::default();
        assert_eq!(main.foreign_plane(&labels(&[])), None);
        assert!(main.foreign_plane(&labels(&[(SHARD_LABEL, "b")])).is_some());
    }
}
