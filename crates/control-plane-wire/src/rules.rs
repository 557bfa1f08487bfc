//! Rules of the service itself that both sides apply: the secret names the
//! platform reserves, and what an install or build command may hold. The
//! operator refuses a spec that breaks them before any request (its
//! `api::preflight`, and the CRD schema built from the same constants); the
//! emulator answers such a request as the service does.
//!
//! Sources: docs/control-plane-api.md "Build commands" and "Reserved
//! variable names". Schema-only rules (patterns of Kubernetes names, CEL
//! rules) stay in the operator (`agent_operator::api::rules`).

/// An install or build command (`source_config.install_command`,
/// `build_command`; docs/control-plane-api.md "Build commands", seen only in
/// the official CLI, which refuses "shell control characters and the like"
/// without saying which). The rule here is an allowlist, stricter than the
/// CLI on purpose: letters, digits, spaces and `. _ / : = @ + , % ~ -`,
/// starting with a non-space. So `npm ci`, `yarn install --frozen-lockfile`
/// or `NODE_ENV=production pnpm run build` pass, and everything a shell
/// would interpret is refused: newlines and other control characters, `;`,
/// `&` (so `&&`), `|` (so `||`), backticks, `$` (so `$(`), `<` and `>`
/// redirections, quotes, brackets, `*`, `?`, `!`, `#` and `\`.
///
/// RE2 syntax (what the Kubernetes API server uses for `pattern` and CEL
/// `matches`), also valid for the `regex` crate.
pub const BUILD_COMMAND_PATTERN: &str = r"^[A-Za-z0-9._/:=@+,%~-][A-Za-z0-9 ._/:=@+,%~-]*$";

/// Longest accepted install or build command, in bytes.
pub const MAX_COMMAND_LENGTH: u32 = 1024;

/// What a command that breaks [`BUILD_COMMAND_PATTERN`] is told, after the
/// field's name (the CRD's CEL message, the operator's and, with the field's
/// wire name, the emulator's).
pub const BUILD_COMMAND_MESSAGE: &str = "must be one command of letters, digits, spaces and . _ / : = @ + , % ~ - (no newline or control characters, no ; & | ` $ < > quotes or brackets: nothing a shell interprets)";

/// Checks an install or build command against [`BUILD_COMMAND_PATTERN`] and
/// [`MAX_COMMAND_LENGTH`] without a regex engine (used by the operator's
/// preflight and by the emulator).
///
/// Errors: a message starting with `field` (as given, e.g. `buildCommand` or
/// `'build_command'`): too long, or [`BUILD_COMMAND_MESSAGE`].
pub fn check_build_command(field: &str, command: &str) -> Result<(), String> {
    let allowed = |b: u8| b.is_ascii_alphanumeric() || b" ._/:=@+,%~-".contains(&b);
    let ok = command.len() <= MAX_COMMAND_LENGTH as usize
        && command.bytes().next().is_some_and(|b| b != b' ')
        && command.bytes().all(allowed);
    if ok {
        Ok(())
    } else if command.len() > MAX_COMMAND_LENGTH as usize {
        Err(format!("{field} is longer than {MAX_COMMAND_LENGTH} bytes"))
    } else {
        Err(format!("{field} {BUILD_COMMAND_MESSAGE}"))
    }
}

/// Secret names the platform reserves for itself everywhere
/// (docs/control-plane-api.md "Reserved variable names", seen in the
/// official CLI, which drops them): the service refuses a deployment that
/// sets one.
pub const RESERVED_NAMES: &[&str] = &[
    "LANGCHAIN_TRACING_V2",
    "LANGSMITH_TRACING_V2",
    "LANGCHAIN_ENDPOINT",
    "LANGCHAIN_PROJECT",
    "LANGSMITH_PROJECT",
    "LANGSMITH_LANGGRAPH_GIT_REPO",
    "LANGGRAPH_GIT_REPO_PATH",
    "LANGCHAIN_API_KEY",
    "LANGSMITH_CONTROL_PLANE_API_KEY",
    "POSTGRES_URI",
    "POSTGRES_PASSWORD",
    "DATABASE_URI",
    "LANGSMITH_LANGGRAPH_GIT_REF",
    "LANGSMITH_LANGGRAPH_GIT_REF_SHA",
    "LANGGRAPH_AUTH_TYPE",
    "LANGSMITH_AUTH_ENDPOINT",
    "LANGSMITH_TENANT_ID",
    "LANGSMITH_AUTH_VERIFY_TENANT_ID",
    "LANGSMITH_HOST_PROJECT_ID",
    "LANGSMITH_HOST_PROJECT_NAME",
    "LANGSMITH_HOST_REVISION_ID",
    "LOG_JSON",
    "LOG_DICT_TRACEBACKS",
    "REDIS_URI",
    "LANGCHAIN_CALLBACKS_BACKGROUND",
    "DD_TRACE_PSYCOPG_ENABLED",
    "DD_TRACE_REDIS_ENABLED",
    "LANGSMITH_DEPLOYMENT_NAME",
    "LANGGRAPH_CLOUD_LICENSE_KEY",
];

/// Secret names allowed only on a self-hosted data plane, that is with a
/// listener (docs/control-plane-api.md "Reserved variable names").
pub const SELF_HOSTED_ONLY_NAMES: &[&str] = &[
    "LANGSMITH_API_KEY",
    "LANGSMITH_ENDPOINT",
    "POSTGRES_URI_CUSTOM",
    "REDIS_URI_CUSTOM",
    "PATH",
    "PORT",
    "MOUNT_PREFIX",
    "LSD_ENV",
    "LSD_DD_API_KEY",
    "LSD_DD_ENDPOINT",
    "LSD_DEPLOYMENT_TYPE",
];

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn build_commands_allow_plain_commands_only() {
        for ok in [
            "npm ci",
            "yarn install --frozen-lockfile",
            "NODE_ENV=production pnpm run build",
            "npm run build -- --prod",
            "bun install @scope/pkg@1.2.3",
        ] {
            assert_eq!(check_build_command("buildCommand", ok), Ok(()), "{ok}");
        }
        for bad in [
            "npm ci; rm -rf /",
            "npm ci && curl x",
            "npm ci || true",
            "npm ci | tee log",
            "echo `id`",
            "echo $(id)",
            "npm ci > out",
            "npm ci < in",
            "npm ci\nrm -rf /",
            "npm ci\u{7}",
            "echo 'x'",
            " npm ci",
            "",
        ] {
            let e = check_build_command("buildCommand", bad).unwrap_err();
            assert!(e.starts_with("buildCommand "), "{e}");
        }
        let long = check_build_command("'build_command'", &"a".repeat(1025)).unwrap_err();
        assert_eq!(long, "'build_command' is longer than 1024 bytes");
    }

    #[test]
    fn reserved_and_self_hosted_names_do_not_overlap() {
        for name in SELF_HOSTED_ONLY_NAMES {
            assert!(!RESERVED_NAMES.contains(name), "{name}");
        }
    }
}
