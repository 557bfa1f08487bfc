//! The pure core of reconciling an `AgentAssistant`: its assistant id (a
//! UUIDv5 of the object's UID, crash-safe without a marker), the create
//! and patch bodies, and the one step of a pass ([`decide`]) on what the
//! agent server answered.
//!
//! Source: docs/control-plane-api.md "Assistants" (`POST /assistants` with
//! a client-chosen `assistant_id` and `if_exists: do_nothing`; a PATCH
//! makes one new version and merges `metadata`; `POST
//! /assistants/{id}/latest` sets the version that serves).

use agent_server_wire::{Assistant, AssistantCreate, AssistantPatch, IfExists};
use serde_json::{Map, Value};

use crate::api::assistant::{AgentAssistantSpec, RejectedAssistantRequest};
use crate::api::deployment::{DriftField, ManagementPolicy};
use crate::plan::policy::drift_field;

/// Namespace of the UUIDv5 assistant ids: the ids of this operator's
/// assistants are `uuid5(ASSISTANT_ID_NAMESPACE, "<object UID>")`.
pub const ASSISTANT_ID_NAMESPACE: uuid::Uuid =
    uuid::Uuid::from_u128(0x6a1f_3c52_8e0b_4d7a_9b2e_5f1c_0d3a_7e41);

/// The assistant id of an object: `spec.assistantId` when set (adoption),
/// else the UUIDv5 of its UID. The same object always gets the same id, so
/// a create repeated after a crash finds the first one.
pub fn assistant_id(spec: &AgentAssistantSpec, uid: &str) -> String {
    match &spec.assistant_id {
        Some(id) => id.to_ascii_lowercase(),
        None => uuid::Uuid::new_v5(&ASSISTANT_ID_NAMESPACE, uid.as_bytes()).to_string(),
    }
}

/// The name the assistant gets: `spec.name`, else the resource's name.
fn name(spec: &AgentAssistantSpec, object_name: &str) -> String {
    spec.name.clone().unwrap_or_else(|| object_name.to_owned())
}

/// The body of `POST /assistants` for `spec` (`if_exists: do_nothing`).
pub fn create_body(spec: &AgentAssistantSpec, id: &str, object_name: &str) -> AssistantCreate {
    AssistantCreate {
        graph_id: spec.graph_id.clone(),
        assistant_id: Some(id.to_owned()),
        config: Some(Value::Object(spec.config.clone().unwrap_or_default())),
        context: Some(Value::Object(spec.context.clone().unwrap_or_default())),
        metadata: spec.metadata.clone(),
        if_exists: Some(IfExists::DoNothing),
        name: Some(name(spec, object_name)),
        description: spec.description.clone(),
    }
}

/// The fields of `current` that differ from `spec`, as one PATCH body;
/// `None` when nothing differs. `metadata` differs when a key of the spec
/// is missing or has another value (the server merges it, so keys it holds
/// besides are not a difference). An empty or absent `config`/`context`
/// equals `{}`, and the two are compared as the server holds them (it
/// mirrors `config.configurable` and `context` into each other, so a spec
/// that sets one is not drift from a server that shows both).
pub fn patch_body(
    spec: &AgentAssistantSpec,
    current: &Assistant,
    object_name: &str,
) -> Option<AssistantPatch> {
    let mut patch = AssistantPatch::default();
    let mut any = false;
    if current.graph_id != spec.graph_id {
        patch.graph_id = Some(spec.graph_id.clone());
        any = true;
    }
    let want_name = name(spec, object_name);
    if current.name.as_deref() != Some(want_name.as_str()) {
        patch.name = Some(want_name);
        any = true;
    }
    if let Some(d) = &spec.description
        && current.description.as_ref() != Some(d)
    {
        patch.description = Some(d.clone());
        any = true;
    }
    let want_config = spec.config.clone().unwrap_or_default();
    let want_context = spec.context.clone().unwrap_or_default();
    let held = served(
        as_object(Some(&current.config)),
        as_object(current.context.as_ref()),
    );
    if held != served(want_config.clone(), want_context.clone()) {
        let (config, context) = sent(want_config, want_context);
        patch.config = Some(Value::Object(config));
        patch.context = context.map(Value::Object);
        any = true;
    }
    if let Some(m) = &spec.metadata
        && m.iter().any(|(k, v)| current.metadata.get(k) != Some(v))
    {
        patch.metadata = Some(m.clone());
        any = true;
    }
    any.then_some(patch)
}

/// `config` and `context` as the agent server holds them: it keeps
/// `config.configurable` and `context` equal (a non-empty `configurable`
/// becomes the `context`, else a non-empty `context` becomes the
/// `configurable`), and an empty `configurable` is no `configurable`. Two
/// pairs that serve alike compare equal in this form. Source:
/// docs/control-plane-api.md "Assistants" (config and context).
fn served(
    mut config: Map<String, Value>,
    mut context: Map<String, Value>,
) -> (Map<String, Value>, Map<String, Value>) {
    let configurable = config
        .get("configurable")
        .and_then(Value::as_object)
        .filter(|c| !c.is_empty())
        .cloned();
    if config
        .get("configurable")
        .is_some_and(|c| c.as_object().is_some_and(Map::is_empty))
    {
        config.remove("configurable");
    }
    match configurable {
        Some(c) => context = c,
        None if !context.is_empty() => {
            config.insert("configurable".to_owned(), Value::Object(context.clone()));
        }
        None => {}
    }
    (config, context)
}

/// The `config` and `context` a PATCH sends so that the server holds the
/// spec's: never both a non-empty `configurable` and a `context` (the
/// server refuses that with a 400), and never an empty `config` (the
/// server keeps the old one for `{}`: `{"configurable": {}}` replaces it).
fn sent(
    config: Map<String, Value>,
    context: Map<String, Value>,
) -> (Map<String, Value>, Option<Map<String, Value>>) {
    let has_configurable = config
        .get("configurable")
        .and_then(Value::as_object)
        .is_some_and(|c| !c.is_empty());
    if has_configurable {
        return (config, None);
    }
    let mut config = config;
    if config.is_empty() {
        config.insert("configurable".to_owned(), Value::Object(Map::new()));
    }
    (config, Some(context))
}

/// `v` as an object; `null`, absent or not an object is `{}`.
fn as_object(v: Option<&Value>) -> Map<String, Value> {
    v.and_then(Value::as_object).cloned().unwrap_or_default()
}

/// The one step of a pass on the agent server.
#[derive(Clone, Debug, PartialEq)]
pub enum Step {
    /// The assistant does not exist: `POST /assistants`.
    Create(Box<AssistantCreate>),
    /// It differs from the spec (a spec change, or drift made outside):
    /// one `PATCH /assistants/{id}`, one new version.
    Patch(Box<AssistantPatch>),
    /// `spec.version` is pinned and another version serves: `POST
    /// /assistants/{id}/latest`.
    SetLatest(i64),
    /// It is as the spec says.
    Nothing,
    /// The request this pass would make was refused for this generation:
    /// it is not sent again until the spec changes.
    Held(RejectedAssistantRequest),
    /// `managementPolicy: Observe`: nothing is sent; the assistant differs
    /// from the spec in these fields (none: it equals the spec).
    Observe(Vec<DriftField>),
    /// `managementPolicy: Observe` and the assistant does not exist:
    /// nothing is created.
    NothingToObserve,
}

impl Step {
    /// The request the step makes, as it is named in status and messages.
    pub fn request(&self) -> &'static str {
        match self {
            Step::Create(_) => "POST /assistants",
            Step::Patch(_) => "PATCH /assistants/{id}",
            Step::SetLatest(_) => "POST /assistants/{id}/latest",
            Step::Nothing | Step::Held(_) | Step::Observe(_) | Step::NothingToObserve => "",
        }
    }
}

/// What [`decide`] knows.
#[derive(Clone, Debug)]
pub struct Known<'a> {
    /// The spec.
    pub spec: &'a AgentAssistantSpec,
    /// The resource's name (the default assistant name).
    pub object_name: &'a str,
    /// `metadata.generation`.
    pub generation: Option<i64>,
    /// The assistant id ([`assistant_id`]).
    pub id: &'a str,
    /// `GET /assistants/{id}`: `None` is a 404.
    pub current: Option<&'a Assistant>,
    /// `status.rejectedRequest`.
    pub rejected: Option<&'a RejectedAssistantRequest>,
    /// `spec.managementPolicy`.
    pub policy: ManagementPolicy,
}

/// The fields of `current` that differ from `spec`: those of the PATCH
/// `Manage` would send ([`patch_body`]), or with `spec.version` pinned,
/// only the version that serves (what `Manage` would set with `/latest`),
/// each with both values as JSON. Pure.
pub fn drift(spec: &AgentAssistantSpec, current: &Assistant, object_name: &str) -> Vec<DriftField> {
    if let Some(pin) = spec.version {
        return if current.version == Some(pin) {
            Vec::new()
        } else {
            vec![drift_field("version", &pin, &current.version)]
        };
    }
    let Some(p) = patch_body(spec, current, object_name) else {
        return Vec::new();
    };
    let mut out = Vec::new();
    if let Some(g) = &p.graph_id {
        out.push(drift_field("graph_id", g, &current.graph_id));
    }
    if let Some(n) = &p.name {
        out.push(drift_field("name", n, &current.name));
    }
    if let Some(d) = &p.description {
        out.push(drift_field("description", d, &current.description));
    }
    if p.config.is_some() {
        // Compared as the server holds them (it mirrors
        // `config.configurable` and `context`): the desired pair as it
        // would be held, the remote one as it is.
        let want = served(
            spec.config.clone().unwrap_or_default(),
            spec.context.clone().unwrap_or_default(),
        );
        let held = served(
            as_object(Some(&current.config)),
            as_object(current.context.as_ref()),
        );
        if want.0 != held.0 {
            out.push(drift_field("config", &want.0, &current.config));
        }
        if want.1 != held.1 {
            out.push(drift_field("context", &want.1, &current.context));
        }
    }
    if let Some(m) = &p.metadata {
        out.push(drift_field("metadata", m, &current.metadata));
    }
    out
}

/// The step of a pass. A step whose request was refused for this
/// generation is [`Step::Held`]. With `spec.version` pinned, the fields are
/// not compared (an older version serves on purpose). Under
/// `managementPolicy: Observe` no step sends anything: the drift is listed
/// instead ([`Step::Observe`], [`Step::NothingToObserve`]). Pure.
pub fn decide(k: &Known<'_>) -> Step {
    if k.policy == ManagementPolicy::Observe {
        return match k.current {
            None => Step::NothingToObserve,
            Some(a) => Step::Observe(drift(k.spec, a, k.object_name)),
        };
    }
    let step = match (k.current, k.spec.version) {
        (None, _) => Step::Create(Box::new(create_body(k.spec, k.id, k.object_name))),
        (Some(a), Some(pin)) if a.version != Some(pin) => Step::SetLatest(pin),
        (Some(_), Some(_)) => Step::Nothing,
        (Some(a), None) => match patch_body(k.spec, a, k.object_name) {
            Some(p) => Step::Patch(Box::new(p)),
            None => Step::Nothing,
        },
    };
    match (k.rejected, &step) {
        (Some(r), Step::Create(_) | Step::Patch(_) | Step::SetLatest(_))
            if Some(r.generation) == k.generation && r.request == step.request() =>
        {
            Step::Held(r.clone())
        }
        _ => step,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn spec(extra: Value) -> AgentAssistantSpec {
        let mut base = json!({"deploymentRef": {"name": "d"}, "graphId": "agent"});
        base.as_object_mut()
            .unwrap()
            .extend(extra.as_object().unwrap().clone());
        serde_json::from_value(base).unwrap()
    }

    fn remote(v: Value) -> Assistant {
        let mut base = json!({"assistant_id": "id", "graph_id": "agent", "name": "a",
            "description": null, "metadata": {}, "config": {}, "context": {}, "version": 1});
        base.as_object_mut()
            .unwrap()
            .extend(v.as_object().unwrap().clone());
        serde_json::from_value(base).unwrap()
    }

    fn rejected(generation: i64, request: &str) -> RejectedAssistantRequest {
        RejectedAssistantRequest {
            generation,
            request: request.into(),
            reason: "GraphNotFound".into(),
            message: "404".into(),
        }
    }

    #[test]
    fn the_id_is_stable_per_uid_and_adoption_wins() {
        let s = spec(json!({}));
        let a = assistant_id(&s, "0b8e7c9e-1111-4000-8000-000000000001");
        assert_eq!(a, assistant_id(&s, "0b8e7c9e-1111-4000-8000-000000000001"));
        assert_ne!(a, assistant_id(&s, "0b8e7c9e-1111-4000-8000-000000000002"));
        assert_eq!(uuid::Uuid::parse_str(&a).unwrap().get_version_num(), 5);
        let adopt = spec(json!({"assistantId": "6F1C2A3E-0000-4000-8000-000000000009"}));
        assert_eq!(
            assistant_id(&adopt, "x"),
            "6f1c2a3e-0000-4000-8000-000000000009"
        );
    }

    /// What, spec, current assistant, refused request, expected step.
    type Case<'a> = (
        &'a str,
        &'a AgentAssistantSpec,
        Option<&'a Assistant>,
        Option<RejectedAssistantRequest>,
        Step,
    );

    /// Asserts the step [`decide`] takes under `Manage` at generation 3
    /// in each case.
    fn assert_decides(cases: Vec<Case<'_>>) {
        for (what, s, current, rej, want) in cases {
            let k = Known {
                spec: s,
                object_name: "a",
                generation: Some(3),
                id: "id",
                current,
                rejected: rej.as_ref(),
                policy: ManagementPolicy::Manage,
            };
            assert_eq!(decide(&k), want, "{what}");
        }
    }

    /// The step that sends `p`.
    fn patch_of(p: AssistantPatch) -> Step {
        Step::Patch(Box::new(p))
    }

    #[test]
    fn an_assistant_is_created_left_or_patched_where_it_differs() {
        let plain = spec(json!({}));
        let changed = spec(json!({"config": {"configurable": {"model": "b"}}}));
        let same = remote(json!({}));
        let other_model = remote(json!({"config": {"configurable": {"model": "a"}}}));
        let renamed = remote(json!({"name": "by hand"}));
        let null_context = remote(json!({"context": null}));
        assert_decides(vec![
            (
                "absent: create",
                &plain,
                None,
                None,
                Step::Create(Box::new(create_body(&plain, "id", "a"))),
            ),
            (
                "as the spec says: nothing",
                &plain,
                Some(&same),
                None,
                Step::Nothing,
            ),
            (
                "null context is {}",
                &plain,
                Some(&null_context),
                None,
                Step::Nothing,
            ),
            (
                "spec change: one patch of the changed field",
                &changed,
                Some(&other_model),
                None,
                patch_of(AssistantPatch {
                    config: Some(json!({"configurable": {"model": "b"}})),
                    ..Default::default()
                }),
            ),
            (
                "drift outside (name): patched back",
                &plain,
                Some(&renamed),
                None,
                patch_of(AssistantPatch {
                    name: Some("a".into()),
                    ..Default::default()
                }),
            ),
        ]);
    }

    #[test]
    fn configurable_and_context_mirrored_by_the_server_are_no_drift() {
        let plain = spec(json!({}));
        let configurable = spec(json!({"config": {"configurable": {"model": "a"}}}));
        let context_only = spec(json!({"context": {"model": "a"}}));
        let other_context = spec(json!({"context": {"model": "b"}}));
        // What the real server holds for either of these: both mirrored.
        let mirrored =
            remote(json!({"config": {"configurable": {"model": "a"}}, "context": {"model": "a"}}));
        assert_decides(vec![
            (
                "configurable mirrored into context by the server: nothing",
                &configurable,
                Some(&mirrored),
                None,
                Step::Nothing,
            ),
            (
                "context mirrored into configurable by the server: nothing",
                &context_only,
                Some(&mirrored),
                None,
                Step::Nothing,
            ),
            (
                "configurable removed from the spec: {configurable: {}} replaces it",
                &plain,
                Some(&mirrored),
                None,
                patch_of(AssistantPatch {
                    config: Some(json!({"configurable": {}})),
                    context: Some(json!({})),
                    ..Default::default()
                }),
            ),
            (
                "context changed: sent alone, never beside a configurable",
                &other_context,
                Some(&mirrored),
                None,
                patch_of(AssistantPatch {
                    config: Some(json!({"configurable": {}})),
                    context: Some(json!({"model": "b"})),
                    ..Default::default()
                }),
            ),
        ]);
    }

    #[test]
    fn merged_metadata_is_no_drift_and_a_pinned_version_is_set_latest() {
        let pinned = spec(json!({"version": 2}));
        let meta = spec(json!({"metadata": {"team": "x"}}));
        let same = remote(json!({}));
        let v2 = remote(json!({"version": 2, "config": {"old": true}}));
        let merged_meta = remote(json!({"metadata": {"team": "x", "created_by": "ui"}}));
        assert_decides(vec![
            (
                "metadata merged by the server: extra keys are no drift",
                &meta,
                Some(&merged_meta),
                None,
                Step::Nothing,
            ),
            (
                "metadata key missing: patched",
                &meta,
                Some(&same),
                None,
                patch_of(AssistantPatch {
                    metadata: meta.metadata.clone(),
                    ..Default::default()
                }),
            ),
            (
                "pinned, another version serves: set latest",
                &pinned,
                Some(&same),
                None,
                Step::SetLatest(2),
            ),
            (
                "pinned and serving: fields not compared",
                &pinned,
                Some(&v2),
                None,
                Step::Nothing,
            ),
        ]);
    }

    #[test]
    fn a_refused_request_is_held_only_at_its_generation() {
        let plain = spec(json!({}));
        let changed = spec(json!({"config": {"configurable": {"model": "b"}}}));
        let other_model = remote(json!({"config": {"configurable": {"model": "a"}}}));
        assert_decides(vec![
            (
                "create refused at this generation: held",
                &plain,
                None,
                Some(rejected(3, "POST /assistants")),
                Step::Held(rejected(3, "POST /assistants")),
            ),
            (
                "refused at an older generation: tried again",
                &plain,
                None,
                Some(rejected(2, "POST /assistants")),
                Step::Create(Box::new(create_body(&plain, "id", "a"))),
            ),
            (
                "another request refused: not held",
                &changed,
                Some(&other_model),
                Some(rejected(3, "POST /assistants")),
                patch_of(AssistantPatch {
                    config: Some(json!({"configurable": {"model": "b"}})),
                    ..Default::default()
                }),
            ),
        ]);
    }

    /// Under `Observe` nothing is ever sent: a missing assistant is not
    /// created, a different one is listed field by field (a pinned version
    /// alone when pinned), a refused request does not matter.
    #[test]
    fn observe_sends_nothing_and_lists_the_drift() {
        let plain = spec(
            json!({"name": "a", "config": {"configurable": {"model": "b"}},
                                "metadata": {"team": "x"}}),
        );
        let pinned = spec(json!({"name": "a", "version": 2}));
        let same = remote(json!({"config": {"configurable": {"model": "b"}},
                                 "context": {"model": "b"}, "metadata": {"team": "x"}}));
        let changed = remote(json!({"graph_id": "other", "name": "ui-name",
                                    "config": {"configurable": {"model": "c"}},
                                    "context": {"model": "c"}, "metadata": {"team": "y"}}));
        let v1 = remote(json!({"version": 1}));
        let rej = rejected(3, "PATCH /assistants/{id}");
        let d = |f: &str, a: &str, b: &str| DriftField {
            field: f.into(),
            desired: a.into(),
            remote: b.into(),
        };
        let cases: Vec<(&str, &AgentAssistantSpec, Option<&Assistant>, Step)> = vec![
            ("missing: not created", &plain, None, Step::NothingToObserve),
            ("equal", &plain, Some(&same), Step::Observe(vec![])),
            (
                "changed in the UI",
                &plain,
                Some(&changed),
                Step::Observe(vec![
                    d("graph_id", "\"agent\"", "\"other\""),
                    d("name", "\"a\"", "\"ui-name\""),
                    d(
                        "config",
                        r#"{"configurable":{"model":"b"}}"#,
                        r#"{"configurable":{"model":"c"}}"#,
                    ),
                    d("context", r#"{"model":"b"}"#, r#"{"model":"c"}"#),
                    d("metadata", r#"{"team":"x"}"#, r#"{"team":"y"}"#),
                ]),
            ),
            (
                "pinned: the version alone",
                &pinned,
                Some(&v1),
                Step::Observe(vec![d("version", "2", "1")]),
            ),
        ];
        for (what, s, current, want) in cases {
            let k = Known {
                spec: s,
                object_name: "a",
                generation: Some(3),
                id: "id",
                current,
                rejected: Some(&rej),
                policy: ManagementPolicy::Observe,
            };
            let step = decide(&k);
            assert_eq!(step.request(), "", "{what}: sends nothing");
            assert_eq!(step, want, "{what}");
        }
    }

    #[test]
    fn the_create_body_is_idempotent_and_complete() {
        let s = spec(json!({"name": "n", "description": "d", "metadata": {"k": 1}}));
        let body = serde_json::to_value(create_body(&s, "id", "obj")).unwrap();
        assert_eq!(
            body,
            json!({"graph_id": "agent", "assistant_id": "id", "config": {}, "context": {},
                "metadata": {"k": 1}, "if_exists": "do_nothing", "name": "n", "description": "d"})
        );
    }
}
