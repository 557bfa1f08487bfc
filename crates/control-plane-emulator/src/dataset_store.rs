//! The LangSmith datasets the emulator keeps ([`Datasets`]), apart from
//! their routes (`datasets.rs`), as the agent servers' store is apart from
//! theirs. Choices as in `datasets.rs`.

use std::collections::HashMap;

use serde_json::{Value, json};
use uuid::Uuid;

/// RFC 3339 with microseconds, as the service writes its times.
pub(crate) fn now() -> String {
    chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Micros, true)
}

/// The datasets of every workspace, in creation order.
#[derive(Debug, Default)]
pub(crate) struct Datasets {
    pub(crate) sets: Vec<Dataset>,
    /// The id of each workspace's `default` tracing project.
    pub(crate) projects: HashMap<String, (Uuid, String)>,
}

/// One dataset with its examples (in creation order).
#[derive(Debug)]
pub(crate) struct Dataset {
    /// The workspace of the API key that created it.
    pub(crate) workspace: String,
    pub(crate) id: Uuid,
    pub(crate) name: String,
    pub(crate) description: Option<String>,
    pub(crate) data_type: String,
    pub(crate) created_at: String,
    pub(crate) examples: Vec<Example>,
}

/// One example: its inputs, reference outputs and metadata as uploaded.
#[derive(Debug)]
pub(crate) struct Example {
    pub(crate) id: Uuid,
    pub(crate) inputs: Value,
    pub(crate) outputs: Option<Value>,
    pub(crate) metadata: Option<Value>,
    pub(crate) created_at: String,
}

impl Dataset {
    /// The dataset as the service answers it (the client's `Dataset`).
    pub(crate) fn shown(&self) -> Value {
        json!({
            "id": self.id,
            "name": self.name,
            "description": self.description,
            "data_type": self.data_type,
            "created_at": self.created_at,
            "modified_at": self.created_at,
            "example_count": self.examples.len(),
            "session_count": 0,
        })
    }
}

impl Example {
    /// The example as the service answers it (the client's `Example`).
    pub(crate) fn shown(&self, dataset_id: Uuid) -> Value {
        json!({
            "id": self.id,
            "dataset_id": dataset_id,
            "inputs": self.inputs,
            "outputs": self.outputs,
            "metadata": self.metadata,
            "created_at": self.created_at,
            "modified_at": self.created_at,
        })
    }
}

impl Datasets {
    /// The datasets of workspace `ws`, in creation order.
    pub(crate) fn of<'a>(&'a self, ws: &'a str) -> impl Iterator<Item = &'a Dataset> {
        self.sets.iter().filter(move |d| d.workspace == ws)
    }

    /// The dataset `id` of workspace `ws`.
    pub(crate) fn get_mut(&mut self, ws: &str, id: Uuid) -> Option<&mut Dataset> {
        self.sets
            .iter_mut()
            .find(|d| d.workspace == ws && d.id == id)
    }
}
