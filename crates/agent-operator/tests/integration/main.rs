//! Every integration test of the crate in one test binary (`cargo test
//! --test integration`), one module per former test file: the crate and the
//! test support are compiled and linked once instead of once per file.
//! Filter by module, e.g. `cargo test -p agent-operator --test integration operator_drift::`.
//! `crates/agent-operator/tests/zz_secret_scan.rs` stays a binary of its own: it reads the logs
//! this one writes, so it runs after it.

#[path = "../common/mod.rs"]
mod common;
#[path = "../contract_common/mod.rs"]
mod contract_common;
#[path = "../support/mod.rs"]
mod support;

mod agentctl_cli;
mod agentserver_emulator;
mod agentserver_real;
mod alert_rules;
mod alert_rules_chart;
mod alert_series;
mod answer_shapes;
mod cluster_planes;
mod contract_agent_server;
mod contract_datasets;
mod contract_deployments;
mod contract_errors;
mod contract_logs;
mod contract_retries;
mod control_plane_status;
mod crds;
mod dashboard;
mod doc_citations;
mod docs;
mod e2e_lifecycle;
mod envtest_smoke;
mod fault_control_plane;
mod fault_crash_fleet;
mod fault_kubernetes;
mod gitops_examples;
mod gitops_health;
mod gitops_previews;
mod gitops_promotion;
mod hostile_input;
mod image;
mod install_manifests;
mod install_policy;
mod kubectl_experience;
mod listener_status;
mod operations_http;
mod operations_leader;
mod operator_admission;
mod operator_adoption;
mod operator_agents_lifecycle;
mod operator_assistant;
mod operator_control_plane;
mod operator_crash_safety;
mod operator_cron;
mod operator_cron_crash;
mod operator_deletion;
mod operator_deletion_order;
mod operator_display_name;
mod operator_drift;
mod operator_expiry;
mod operator_image_policy;
mod operator_integrations;
mod operator_observe;
mod operator_out_of_band;
mod operator_patches;
mod operator_pause_events;
mod operator_promotion;
mod operator_rbac;
mod operator_redeploy;
mod operator_request_budget;
mod operator_revisions;
mod operator_rollback;
mod operator_secret_references;
mod operator_secrets;
mod operator_service_statuses;
mod operator_serving;
mod operator_status;
mod operator_suite;
mod operator_unheld_drift;
mod operator_unmanaged;
mod operator_verify;
mod outbound_requests;
mod ownership;
mod promotion_truth;
mod proptest_decoding;
mod readme_outputs;
mod reference_docs;
mod registry;
mod registry_auth;
mod registry_resolve;
mod release;
mod scaffold_kind;
mod secrets_hash;
mod security_metrics;
mod security_network;
mod security_policy;
mod security_policy_operator;
mod security_rbac;
mod security_tls;
mod setup_prerequisites;
mod sharding;
mod shipped_manifests;
mod status_churn;
mod supported_versions;
mod tenants;
mod troubleshooting_advice;
mod upgrade_recorded;
mod upgrades;
