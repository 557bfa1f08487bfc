//! `sourceConfig.resourceSpec`: the sizing of a deployment, typed in the
//! schema (camelCase, units and ranges) and mapped explicitly to the wire
//! `resource_spec` (snake_case).
//!
//! Source: docs/control-plane-api.md "Deployment" (`resource_spec`: `min_scale`,
//! `max_scale`, `cpu` 0.1–8, `cpu_limit`, `memory_mb`, `memory_limit_mb`,
//! the `queue_*` equivalents, `redis_memory_mb`, labels, annotations, service
//! account, image pull secrets, Kubernetes-shaped volumes, mounts, init
//! containers and sidecars, `db_*` sizing). Ranges no source states
//! are set wide (the CRD may be stricter than the service, never the other
//! way round for what a source states). The Rust value stays a JSON object
//! so that numbers reach the service exactly as written (`1` stays `1`, not
//! `1.0`), which keeps drift detection exact.

use serde_json::{Map, Value, json};

/// The kind of value of a resource field, with its unit and range.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Kind {
    /// A replica count: integer 0–1000.
    Scale,
    /// CPU in cores: number 0.1–8 (docs/control-plane-api.md "Deployment").
    Cores,
    /// Memory in MiB: integer 1–262144 (256 GiB).
    Mebibytes,
    /// Storage in GiB: integer 1–65536.
    Gibibytes,
    /// A positive count: integer 1–100000.
    Count,
    /// A map of strings (labels, annotations).
    StringMap,
    /// A Kubernetes object name (DNS-1123 subdomain).
    ObjectName,
    /// `[{name}]` of Secrets holding registry credentials.
    NameList,
    /// A list of Kubernetes `Volume` objects (core/v1), validated by their
    /// own schema, passed through as written.
    Volumes,
    /// A list of Kubernetes `VolumeMount` objects (core/v1).
    VolumeMounts,
    /// A list of Kubernetes `Container` objects (core/v1): `name` and
    /// `image` checked, the rest passed through as written.
    Containers,
}

/// One field: CRD name (camelCase), wire name (snake_case), kind, docs.
pub type Field = (&'static str, &'static str, Kind, &'static str);

/// Every `resourceSpec` field, in the order of docs/control-plane-api.md
/// "Deployment".
pub const FIELDS: &[Field] = &[
    (
        "minScale",
        "min_scale",
        Kind::Scale,
        "Fewest replicas of the API server.",
    ),
    (
        "maxScale",
        "max_scale",
        Kind::Scale,
        "Most replicas of the API server.",
    ),
    (
        "cpu",
        "cpu",
        Kind::Cores,
        "CPU request of the API server, in cores (0.1-8).",
    ),
    (
        "cpuLimit",
        "cpu_limit",
        Kind::Cores,
        "CPU limit of the API server, in cores.",
    ),
    (
        "memoryMb",
        "memory_mb",
        Kind::Mebibytes,
        "Memory request of the API server, in MiB.",
    ),
    (
        "memoryLimitMb",
        "memory_limit_mb",
        Kind::Mebibytes,
        "Memory limit of the API server, in MiB.",
    ),
    (
        "queueMinScale",
        "queue_min_scale",
        Kind::Scale,
        "Fewest queue workers.",
    ),
    (
        "queueMaxScale",
        "queue_max_scale",
        Kind::Scale,
        "Most queue workers.",
    ),
    (
        "queueCpu",
        "queue_cpu",
        Kind::Cores,
        "CPU request of a queue worker, in cores.",
    ),
    (
        "queueCpuLimit",
        "queue_cpu_limit",
        Kind::Cores,
        "CPU limit of a queue worker, in cores.",
    ),
    (
        "queueMemoryMb",
        "queue_memory_mb",
        Kind::Mebibytes,
        "Memory request of a queue worker, in MiB.",
    ),
    (
        "queueMemoryLimitMb",
        "queue_memory_limit_mb",
        Kind::Mebibytes,
        "Memory limit of a queue worker, in MiB.",
    ),
    (
        "redisMemoryMb",
        "redis_memory_mb",
        Kind::Mebibytes,
        "Memory of the Redis instance, in MiB.",
    ),
    (
        "labels",
        "labels",
        Kind::StringMap,
        "Labels added to the data plane's pods.",
    ),
    (
        "annotations",
        "annotations",
        Kind::StringMap,
        "Annotations added to the data plane's pods.",
    ),
    (
        "serviceAccountName",
        "service_account_name",
        Kind::ObjectName,
        "Kubernetes ServiceAccount of the pods (self-hosted).",
    ),
    (
        "imagePullSecrets",
        "image_pull_secrets",
        Kind::NameList,
        "Secrets with registry credentials, `[{name}]` (self-hosted).",
    ),
    (
        "volumes",
        "volumes",
        Kind::Volumes,
        "Kubernetes `Volume` objects of the pods (self-hosted).",
    ),
    (
        "volumeMounts",
        "volume_mounts",
        Kind::VolumeMounts,
        "Kubernetes `VolumeMount` objects of the API server container (self-hosted).",
    ),
    (
        "initContainers",
        "init_containers",
        Kind::Containers,
        "Kubernetes `Container` objects run before the API server (self-hosted).",
    ),
    (
        "sidecars",
        "sidecars",
        Kind::Containers,
        "Kubernetes `Container` objects run beside the API server (self-hosted).",
    ),
    (
        "dbCpu",
        "db_cpu",
        Kind::Cores,
        "CPU request of the database, in cores.",
    ),
    (
        "dbCpuLimit",
        "db_cpu_limit",
        Kind::Cores,
        "CPU limit of the database, in cores.",
    ),
    (
        "dbMemoryMb",
        "db_memory_mb",
        Kind::Mebibytes,
        "Memory request of the database, in MiB.",
    ),
    (
        "dbMemoryLimitMb",
        "db_memory_limit_mb",
        Kind::Mebibytes,
        "Memory limit of the database, in MiB.",
    ),
    (
        "dbStorageGi",
        "db_storage_gi",
        Kind::Gibibytes,
        "Storage of the database, in GiB.",
    ),
    (
        "dbMaxConnections",
        "db_max_connections",
        Kind::Count,
        "Most connections to the database.",
    ),
];

/// `(minimum, maximum)` of a numeric kind.
fn range(kind: Kind) -> Option<(f64, f64)> {
    match kind {
        Kind::Scale => Some((0.0, 1000.0)),
        Kind::Cores => Some((0.1, 8.0)),
        Kind::Mebibytes => Some((1.0, 262_144.0)),
        Kind::Gibibytes => Some((1.0, 65_536.0)),
        Kind::Count => Some((1.0, 100_000.0)),
        _ => None,
    }
}

/// `{"type": "array", "items": <schema of T>}` with at most `max` items.
fn list_of<T: schemars::JsonSchema>(generator: &mut schemars::SchemaGenerator, max: u32) -> Value {
    let items = serde_json::to_value(generator.subschema_for::<T>()).unwrap_or(json!({}));
    json!({"type": "array", "maxItems": max, "items": items})
}

/// The schema of a list of Secret names (`imagePullSecrets`): at most 32
/// objects with a `name`, a DNS-1123 subdomain.
fn name_list_schema() -> Value {
    json!({
        "type": "array",
        "maxItems": 32,
        "items": {
            "type": "object",
            "required": ["name"],
            "properties": {"name": {
                "type": "string",
                "maxLength": 253,
                "pattern": super::rules::DNS_SUBDOMAIN_PATTERN,
                "description": "Name of the Secret (a DNS-1123 subdomain), in the namespace of the data plane's pods.",
            }},
        },
    })
}

/// The schema of a list of containers (`initContainers`, `sidecars`): at
/// most 16 objects with a `name` and an `image`, the rest as written.
///
/// Not the `Container` schema: it would add about 140 KB per field and take
/// the CRD past the 256 KiB that client-side `kubectl apply` can store in
/// its last-applied annotation.
fn containers_schema() -> Value {
    json!({
        "type": "array",
        "maxItems": 16,
        "items": {
            "type": "object",
            "required": ["name", "image"],
            "properties": {
                "name": {"type": "string", "maxLength": 63, "pattern": super::rules::DNS_LABEL_PATTERN,
                         "description": "Container name (a DNS-1123 label, unique in the pod)."},
                "image": {"type": "string", "maxLength": 512,
                          "description": "Container image reference, e.g. `registry.example.com/team/proxy:1.2`."},
            },
            "x-kubernetes-preserve-unknown-fields": true,
        },
    })
}

/// The schema of a field of `kind`, with its range ([`range`]) and
/// `description`.
fn field_schema(generator: &mut schemars::SchemaGenerator, kind: Kind, description: &str) -> Value {
    use k8s_openapi::api::core::v1::{Volume, VolumeMount};
    let mut schema = match kind {
        Kind::Cores => json!({"type": "number"}),
        Kind::Scale | Kind::Mebibytes | Kind::Gibibytes | Kind::Count => {
            json!({"type": "integer", "format": "int64"})
        }
        Kind::StringMap => json!({
            "type": "object",
            "maxProperties": 64,
            "additionalProperties": {"type": "string", "maxLength": 4096},
        }),
        Kind::ObjectName => json!({
            "type": "string",
            "maxLength": 253,
            "pattern": super::rules::DNS_SUBDOMAIN_PATTERN,
        }),
        Kind::NameList => name_list_schema(),
        Kind::Volumes => list_of::<Volume>(generator, 64),
        Kind::VolumeMounts => list_of::<VolumeMount>(generator, 64),
        Kind::Containers => containers_schema(),
    };
    if let Some((min, max)) = range(kind) {
        let (min, max) = if kind == Kind::Cores {
            (json!(min), json!(max))
        } else {
            (json!(min as i64), json!(max as i64))
        };
        schema["minimum"] = min;
        schema["maximum"] = max;
    }
    schema["description"] = json!(description);
    schema
}

/// OpenAPI schema of `resourceSpec`: every field of [`FIELDS`] typed, with
/// its range; unknown keys are not allowed (the API server prunes them, and
/// refuses them with `kubectl`'s strict field validation); `minScale` at
/// most `maxScale`, and a request at most its limit.
pub fn schema(generator: &mut schemars::SchemaGenerator) -> schemars::Schema {
    let properties: Map<String, Value> = FIELDS
        .iter()
        .map(|(crd, _, kind, doc)| ((*crd).to_owned(), field_schema(generator, *kind, doc)))
        .collect();
    let pairs = [
        ("minScale", "maxScale"),
        ("queueMinScale", "queueMaxScale"),
        ("cpu", "cpuLimit"),
        ("memoryMb", "memoryLimitMb"),
        ("queueCpu", "queueCpuLimit"),
        ("queueMemoryMb", "queueMemoryLimitMb"),
        ("dbCpu", "dbCpuLimit"),
        ("dbMemoryMb", "dbMemoryLimitMb"),
    ];
    let rules: Vec<Value> = pairs
        .iter()
        .map(|(low, high)| {
            json!({
                "rule": format!("!has(self.{low}) || !has(self.{high}) || self.{low} <= self.{high}"),
                "message": format!("{low} must not exceed {high}"),
            })
        })
        .collect();
    let value = json!({
        "type": "object",
        "description": "Sizing of the deployment (wire `resource_spec`); merged with the \
                        remote object, since the service replaces it whole on PATCH.",
        "properties": properties,
        "x-kubernetes-validations": rules,
    });
    schemars::Schema::try_from(value).unwrap_or_default()
}

/// The wire `resource_spec` of a `resourceSpec`: keys renamed by [`FIELDS`],
/// values unchanged.
///
/// Errors: the first key that is not a known field (possible only for an
/// object stored before the schema had this rule), as a message for
/// `Stalled`/`InvalidSpec`.
pub fn to_wire(spec: &Map<String, Value>) -> Result<Map<String, Value>, String> {
    spec.iter()
        .map(|(key, value)| {
            FIELDS
                .iter()
                .find(|(crd, ..)| crd == key)
                .map(|(_, wire, ..)| ((*wire).to_owned(), value.clone()))
                .ok_or_else(|| unknown(key))
        })
        .collect()
}

/// The `resourceSpec` of a wire `resource_spec` (the reverse of
/// [`to_wire`], for `agentctl export`): keys renamed by [`FIELDS`], values
/// unchanged, `null` values dropped (the service reads unset keys back as
/// `null`). Returns the spec and the wire keys the project does not model
/// (left out, so that the caller can name them).
pub fn from_wire(wire: &Map<String, Value>) -> (Map<String, Value>, Vec<String>) {
    let mut spec = Map::new();
    let mut unmodelled = Vec::new();
    for (key, value) in wire {
        if value.is_null() {
            continue;
        }
        match FIELDS.iter().find(|(_, w, ..)| w == key) {
            Some((crd, ..)) => {
                spec.insert((*crd).to_owned(), value.clone());
            }
            None => unmodelled.push(key.clone()),
        }
    }
    (spec, unmodelled)
}

fn unknown(key: &str) -> String {
    let hint = FIELDS
        .iter()
        .find(|(_, wire, ..)| *wire == key)
        .map(|(crd, ..)| format!(" (did you mean {crd}?)"))
        .unwrap_or_default();
    format!("sourceConfig.resourceSpec.{key} is not a known field{hint}")
}

/// Checks the keys and numeric ranges of a `resourceSpec` (the same rules as
/// [`schema`]), for `api::preflight::check`.
///
/// Errors: the first broken rule, naming the field.
pub fn check(spec: &Map<String, Value>) -> Result<(), String> {
    for (key, value) in spec {
        let Some((_, _, kind, _)) = FIELDS.iter().find(|(crd, ..)| crd == key) else {
            return Err(unknown(key));
        };
        if let Some((min, max)) = range(*kind) {
            let x = value.as_f64().ok_or_else(|| {
                format!("sourceConfig.resourceSpec.{key} must be a number, got {value}")
            })?;
            if !(min..=max).contains(&x) {
                return Err(format!(
                    "sourceConfig.resourceSpec.{key} must be between {min} and {max}, got {x}"
                ));
            }
        }
    }
    Ok(())
}

/// CEL condition over the whole AgentDeployment, checked once a remote
/// exists (`rules::REMOTE_EXISTS`): neither
/// `spec.sourceConfig.resourceSpec` nor any of its keys can be removed. The
/// operator sends only the keys the spec sets, merged into the remote
/// object (the service replaces `resource_spec` whole and fills in its own
/// defaults), so a removed key would keep its last value. Except while the
/// resource reports `DriftNotConverging`: the service did not keep what was
/// sent (a key it does not know), and dropping that key is the fix.
pub fn resource_spec_kept_condition() -> String {
    let rs = "spec.sourceConfig.resourceSpec";
    let keys: Vec<String> = FIELDS
        .iter()
        .map(|(name, ..)| format!("(!has(oldSelf.{rs}.{name}) || has(self.{rs}.{name}))"))
        .collect();
    // The one exception: a resource reporting DriftNotConverging, whose
    // service did not keep what was sent (an unknown key), may drop it.
    let not_converging = "(has(oldSelf.status.conditions) && oldSelf.status.conditions.exists(c, c.type == 'Ready' && c.reason == 'DriftNotConverging'))";
    format!(
        "!has(oldSelf.{rs}) || {not_converging} || (has(self.{rs}) && {})",
        keys.join(" && ")
    )
}

/// Message of [`resource_spec_kept_condition`].
pub const RESOURCE_SPEC_KEPT_MESSAGE: &str = "a key of spec.sourceConfig.resourceSpec (or resourceSpec itself) cannot be removed once the remote deployment exists: the operator sends only the keys the spec sets and the control plane keeps the others, so the removal would not take effect; set the key to the value you want instead (a key the control plane did not keep, reported as DriftNotConverging, may be removed)";

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wire_keys_map_back_nulls_dropped_unknown_named() {
        let wire = json!({"min_scale": 1, "cpu": 0.5, "labels": null, "gpu": 1});
        let (spec, unmodelled) = from_wire(wire.as_object().unwrap());
        assert_eq!(
            Value::Object(spec.clone()),
            json!({"minScale": 1, "cpu": 0.5})
        );
        assert_eq!(unmodelled, ["gpu"]);
        assert_eq!(
            Value::Object(to_wire(&spec).unwrap()),
            json!({"min_scale": 1, "cpu": 0.5})
        );
    }

    #[test]
    fn keys_map_to_the_wire_and_numbers_stay_as_written() {
        let spec = json!({"minScale": 1, "cpu": 0.5, "memoryLimitMb": 2048});
        let wire = to_wire(spec.as_object().unwrap()).unwrap();
        assert_eq!(
            Value::Object(wire),
            json!({"min_scale": 1, "cpu": 0.5, "memory_limit_mb": 2048})
        );
        let err = to_wire(json!({"min_scale": 1}).as_object().unwrap()).unwrap_err();
        assert!(err.contains("did you mean minScale"), "{err}");
    }

    #[test]
    fn check_enforces_ranges_and_known_keys() {
        assert!(check(json!({"cpu": 8, "maxScale": 3}).as_object().unwrap()).is_ok());
        assert!(check(json!({"cpu": 9999}).as_object().unwrap()).is_err());
        assert!(check(json!({"minScale": -1}).as_object().unwrap()).is_err());
        assert!(check(json!({"cpu": "lots"}).as_object().unwrap()).is_err());
        assert!(check(json!({"min_scael": 1}).as_object().unwrap()).is_err());
    }

    #[test]
    fn every_wire_name_is_snake_case_of_its_crd_name() {
        for (crd, wire, ..) in FIELDS {
            let snake: String = crd
                .chars()
                .flat_map(|c| {
                    if c.is_ascii_uppercase() {
                        vec!['_', c.to_ascii_lowercase()]
                    } else {
                        vec![c]
                    }
                })
                .collect();
            assert_eq!(&snake, wire);
        }
    }
}
