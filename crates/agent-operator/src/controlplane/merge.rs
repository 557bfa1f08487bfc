//! Merging a partial `resource_spec` into the current one.
//!
//! The service replaces `source_config.resource_spec` whole on PATCH (docs/control-plane-api.md
//! "Deployment": "a client that changes one field must send the merged
//! object"), so [`super::ControlPlaneClient::patch_deployment_merged`] reads
//! the deployment and merges the caller's partial object into it with the
//! rules of JSON Merge Patch (RFC 7386): objects merge key by key,
//! recursively; a `null` removes the key; any other value (arrays included)
//! replaces the old one.

use serde_json::Value;

use super::types::{Deployment, DeploymentPatch};

/// Applies `patch` to `target` with JSON Merge Patch rules (RFC 7386).
pub fn merge_patch(target: &mut Value, patch: &Value) {
    let Value::Object(patch_map) = patch else {
        *target = patch.clone();
        return;
    };
    if !target.is_object() {
        *target = Value::Object(serde_json::Map::new());
    }
    if let Value::Object(target_map) = target {
        for (key, value) in patch_map {
            if value.is_null() {
                target_map.remove(key);
            } else {
                merge_patch(target_map.entry(key.clone()).or_insert(Value::Null), value);
            }
        }
    }
}

/// The patch to send so that a partial `resource_spec` in `patch` changes
/// only the fields it names: `patch` with its `source_config.resource_spec`
/// replaced by the current one of `current` merged with it ([`merge_patch`]).
/// A patch without a `resource_spec` is returned unchanged.
pub fn with_merged_resource_spec(current: &Deployment, patch: &DeploymentPatch) -> DeploymentPatch {
    let mut out = patch.clone();
    if let Some(sc) = out.source_config.as_mut()
        && let Some(partial) = sc.resource_spec.as_ref()
    {
        let mut merged = current
            .source_config
            .resource_spec
            .clone()
            .unwrap_or_else(|| Value::Object(serde_json::Map::new()));
        merge_patch(&mut merged, partial);
        sc.resource_spec = Some(merged);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::controlplane::types::SourceConfig;
    use serde_json::json;

    #[test]
    fn rfc7386_examples() {
        let mut t = json!({"a": "b", "c": {"d": "e", "f": "g"}});
        merge_patch(&mut t, &json!({"a": "z", "c": {"f": null}}));
        assert_eq!(t, json!({"a": "z", "c": {"d": "e"}}));
        let mut t = json!({"a": ["b"]});
        merge_patch(&mut t, &json!({"a": ["c", "d"]}));
        assert_eq!(t, json!({"a": ["c", "d"]}));
        let mut t = json!({"a": "b"});
        merge_patch(&mut t, &json!({"a": {"bb": {"ccc": null}}}));
        assert_eq!(t, json!({"a": {"bb": {}}}));
        let mut t = json!(null);
        merge_patch(&mut t, &json!({"x": 1}));
        assert_eq!(t, json!({"x": 1}));
    }

    #[test]
    fn only_the_named_fields_change() {
        let current: Deployment = serde_json::from_value(json!({
            "id": "d", "name": "n",
            "source_config": {"resource_spec": {"min_scale": 1, "max_scale": 2, "cpu": 1,
                                                "labels": {"team": "a"}}}
        }))
        .unwrap();
        let patch = DeploymentPatch {
            source_config: Some(SourceConfig {
                resource_spec: Some(
                    json!({"max_scale": 5, "labels": {"tier": "gold"}, "cpu": null}),
                ),
                ..Default::default()
            }),
            ..Default::default()
        };
        let merged = with_merged_resource_spec(&current, &patch);
        assert_eq!(
            merged.source_config.unwrap().resource_spec.unwrap(),
            json!({"min_scale": 1, "max_scale": 5, "labels": {"team": "a", "tier": "gold"}})
        );
        let untouched = DeploymentPatch::default();
        assert!(with_merged_resource_spec(&current, &untouched).is_empty());
    }
}
