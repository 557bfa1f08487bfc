"""The official `langsmith` client against the emulator's LangSmith datasets.

Run by contract_datasets.rs with the langgraph virtualenv's Python (the
client pinned in hack/agent-server/constraints.txt). Arguments: API_URL
API_KEY WORKSPACE_ID (sent as X-Tenant-Id, as an organization key needs). Writes a dataset of 120 examples (more than one page), reads it
back by name and by id, lists its examples, checks the not-found and
conflict errors, deletes it; prints one JSON line of what it saw.
"""
import json
import sys
import uuid

from langsmith import Client
from langsmith.utils import LangSmithConflictError, LangSmithNotFoundError

api_url, api_key, workspace_id = sys.argv[1:4]
client = Client(api_url=api_url, api_key=api_key, workspace_id=workspace_id, auto_batch_tracing=False)
name = "echo-suite"
created = client.create_dataset(name, description="the echo graph's cases")
cases = [
    {
        "inputs": {"messages": [{"role": "user", "content": f"case {i}"}]},
        "outputs": {"answer": f"echo: case {i}"},
        "metadata": {"case": f"c{i:03}"},
    }
    for i in range(120)
]
uploaded = client.create_examples(dataset_id=created.id, examples=cases)
by_name = client.read_dataset(dataset_name=name)
by_id = client.read_dataset(dataset_id=created.id)
examples = list(client.list_examples(dataset_name=name))
one = client.read_example(examples[7].id)
try:
    client.create_dataset(name)
    conflict = False
except LangSmithConflictError:
    conflict = True
try:
    client.read_dataset(dataset_id=uuid.uuid4())
    missing_id = False
except LangSmithNotFoundError:
    missing_id = True
missing_name = not client.has_dataset(dataset_name="no-such-suite")
client.delete_dataset(dataset_id=created.id)
gone = not client.has_dataset(dataset_name=name)
print(
    json.dumps(
        {
            "uploaded": uploaded["count"] if isinstance(uploaded, dict) else uploaded.count,
            "same_id": by_name.id == created.id == by_id.id,
            "example_count": by_id.example_count,
            "description": by_id.description,
            "examples": len(examples),
            "first": {"inputs": examples[0].inputs, "outputs": examples[0].outputs,
                      "metadata": examples[0].metadata, "dataset_id": str(examples[0].dataset_id)},
            "cases_in_order": [e.metadata["case"] for e in examples] == [c["metadata"]["case"] for c in cases],
            "read_one": one.metadata["case"],
            "conflict": conflict,
            "missing_id": missing_id,
            "missing_name": missing_name,
            "gone": gone,
            "dataset_id": str(created.id),
        }
    )
)
