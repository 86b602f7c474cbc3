//! The names the policy knows: the gateway's tools, the languages `run_code` speaks, and the
//! programs that count as a shell.
//!
//! They live here rather than in the gateway because a policy file is checked when it loads:
//! a typo such as `tools = ["read_flie"]` should fail there, not silently deny a tool for a
//! whole session.

/// Every tool the gateway serves. The first 23 are ARF's names, kept so ARF clients work
/// unchanged; `shell` exists only in sessions whose policy sets `shell = true`.
pub const TOOLS: [&str; 29] = [
    // ARF's deployment tools.
    "clone_repo",
    "checkout_ref",
    "detect_stack",
    "install_node_deps",
    "install_python_deps",
    "write_env_file",
    "start_process",
    "stop_process",
    "check_port",
    "http_health_check",
    "stream_logs",
    "capture_preview_metadata",
    "export_artifacts",
    // ARF's coding and file tools.
    "run_code",
    "install_package",
    "read_file",
    "write_file",
    "list_directory",
    "search_in_files",
    "functions_mapping",
    "bracket_tracker",
    "export_artifact",
    "session_reset",
    // Forge's additions.
    "edit_file",
    "delete_path",
    "move_path",
    "run_command",
    "validate_code",
    "shell",
];

/// The tool that runs whatever it is given; only sessions with `shell = true` may call it.
pub const SHELL_TOOL: &str = "shell";

/// The tool whose `language` is checked against `run_code_languages`.
pub const RUN_CODE_TOOL: &str = "run_code";

/// Tools that run an argv the caller chose, so the command allowlist applies to them.
pub const COMMAND_TOOLS: [&str; 2] = ["run_command", "start_process"];

/// Languages `run_code` can run. `shell` takes effect only when the policy allows a shell.
pub const LANGUAGES: [&str; 3] = ["python", "node", "shell"];

/// The language name that means "a shell script" to `run_code`.
pub const SHELL_LANGUAGE: &str = "shell";

/// Programs that interpret arbitrary command strings. An allowlisted command that starts with
/// one of these would be a raw shell under another name, so with `shell = false` it is denied
/// whatever the allowlist says. Matched on the file name of `argv[0]`, so `/bin/bash` counts.
pub const SHELLS: [&str; 20] = [
    "sh",
    "bash",
    "rbash",
    "dash",
    "ash",
    "zsh",
    "ksh",
    "mksh",
    "pdksh",
    "yash",
    "fish",
    "csh",
    "tcsh",
    "busybox",
    "nu",
    "elvish",
    "xonsh",
    "pwsh",
    "powershell",
    "toybox",
];

/// Whether `name` is one of [`TOOLS`].
pub fn is_tool(name: &str) -> bool {
    TOOLS.contains(&name)
}

/// Whether `argv0` names a shell interpreter, by its last path component.
pub fn is_shell_program(argv0: &str) -> bool {
    let name = argv0.rsplit('/').next().unwrap_or(argv0);
    SHELLS.contains(&name)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tool_names_are_unique() {
        let mut names = TOOLS.to_vec();
        names.sort_unstable();
        names.dedup();
        assert_eq!(names.len(), TOOLS.len());
    }

    #[test]
    fn shells_are_recognised_by_file_name() {
        for shell in ["sh", "/bin/bash", "/usr/local/bin/zsh", "busybox"] {
            assert!(is_shell_program(shell), "{shell}");
        }
        for program in ["python", "/usr/bin/shasum", "bashful", "", "/"] {
            assert!(!is_shell_program(program), "{program}");
        }
    }
}
