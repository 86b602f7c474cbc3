//! Turning a tool call into a verdict.
//!
//! Every built-in rule and every policy rule looks at the call; each may object with a
//! decision. The strictest decision wins, and among equally strict objections the first in
//! this order names the verdict: the built-in rules in [`BUILTIN_RULES`] order, then the
//! policy's own rules in the order they are written (after [`crate::Policy::within`], the
//! operator's rules come before the client's). When nothing objects the call is allowed by
//! the rule `default`.

use crate::call::{Access, SessionUsage, ToolCall};
use crate::catalog::{COMMAND_TOOLS, RUN_CODE_TOOL, SHELL_LANGUAGE, SHELL_TOOL, is_shell_program};
use crate::decision::{Decision, Verdict};
use crate::host::Host;
use crate::path::{is_within, normalize};
use crate::policy::{Network, Policy};
use crate::secrets::is_secret;

/// The built-in rules, in the order that breaks ties between equally strict objections:
///
/// - `budget` — the session has used its `call_budget`;
/// - `tools.allowlist` — the tool is not in `tools`;
/// - `shell.disabled` — the `shell` tool, `run_code` in `shell`, or a command whose program
///   is a shell, while `shell` is false;
/// - `run_code.language` — `run_code` without a language or in one not in
///   `run_code_languages`;
/// - `commands.allowlist` — `run_command` or `start_process` without a command, or with one
///   that no entry of `commands` is a prefix of;
/// - `paths.writable` — a written path, after folding `..`, is outside every writable path
///   (or is not absolute);
/// - `secrets` — a read path holds secrets and `read_secrets` is false;
/// - `network.internal` — the destination is a private, link-local, metadata or otherwise
///   internal address or name, which no policy can open;
/// - `network.destination` — the destination is malformed, or the network mode does not
///   reach it.
pub const BUILTIN_RULES: [&str; 9] = [
    "budget",
    "tools.allowlist",
    "shell.disabled",
    "run_code.language",
    "commands.allowlist",
    "paths.writable",
    "secrets",
    "network.internal",
    "network.destination",
];

impl Policy {
    /// Decides whether `call` may run, given what the session has used so far.
    ///
    /// Pure and total: any call, however malformed, gets a verdict, and a malformed one is
    /// denied rather than waved through.
    pub fn evaluate(&self, call: &ToolCall, usage: SessionUsage) -> Verdict {
        let builtin = [
            self.check_budget(usage),
            self.check_tools(call),
            self.check_shell(call),
            self.check_language(call),
            self.check_command(call),
            self.check_writes(call),
            self.check_secrets(call),
            check_internal(call),
            self.check_destination(call),
        ];
        let rules = self.rules.iter().map(|rule| rule.judge(call));
        builtin
            .into_iter()
            .chain(rules)
            .flatten()
            .reduce(|strictest, next| {
                if next.decision > strictest.decision {
                    next
                } else {
                    strictest
                }
            })
            .unwrap_or_else(|| Verdict {
                decision: Decision::Allow,
                rule: "default".to_owned(),
                reason: "no rule objected".to_owned(),
            })
    }

    fn check_budget(&self, usage: SessionUsage) -> Option<Verdict> {
        (usage.calls >= self.call_budget).then(|| {
            Verdict::deny(
                "budget",
                format!(
                    "this session has made {} tool calls, its whole budget of {}",
                    usage.calls, self.call_budget
                ),
            )
        })
    }

    fn check_tools(&self, call: &ToolCall) -> Option<Verdict> {
        let listed = self.tools.iter().any(|t| t == "*" || *t == call.tool);
        (!listed).then(|| {
            Verdict::deny(
                "tools.allowlist",
                format!("tool {:?} is not among this session's tools", call.tool),
            )
        })
    }

    fn check_shell(&self, call: &ToolCall) -> Option<Verdict> {
        if self.shell {
            return None;
        }
        let deny = |what: String| {
            Some(Verdict::deny(
                "shell.disabled",
                format!("{what}, and this session's policy does not allow a shell"),
            ))
        };
        if call.tool == SHELL_TOOL {
            return deny("the shell tool runs arbitrary commands".to_owned());
        }
        if call.tool == RUN_CODE_TOOL && call.language.as_deref() == Some(SHELL_LANGUAGE) {
            return deny("run_code in shell runs arbitrary commands".to_owned());
        }
        if COMMAND_TOOLS.contains(&call.tool.as_str())
            && let Some(program) = call.command.as_ref().and_then(|argv| argv.first())
            && is_shell_program(program)
        {
            return deny(format!("{program:?} is a shell"));
        }
        None
    }

    fn check_language(&self, call: &ToolCall) -> Option<Verdict> {
        if call.tool != RUN_CODE_TOOL {
            return None;
        }
        let Some(language) = &call.language else {
            return Some(Verdict::deny(
                "run_code.language",
                "run_code was called without a language".to_owned(),
            ));
        };
        (!self.run_code_languages.contains(language)).then(|| {
            Verdict::deny(
                "run_code.language",
                format!(
                    "run_code language {language:?} is not among this session's languages ({})",
                    list(&self.run_code_languages)
                ),
            )
        })
    }

    fn check_command(&self, call: &ToolCall) -> Option<Verdict> {
        if !COMMAND_TOOLS.contains(&call.tool.as_str()) {
            return None;
        }
        let argv = match call.command.as_deref() {
            None | Some([]) => {
                return Some(Verdict::deny(
                    "commands.allowlist",
                    format!("{} was called without a command", call.tool),
                ));
            }
            Some(argv) => argv,
        };
        let allowed = self.commands.iter().any(|prefix| argv.starts_with(prefix));
        (!allowed).then(|| {
            Verdict::deny(
                "commands.allowlist",
                format!(
                    "`{}` does not start with any of this session's allowed commands",
                    argv.join(" ")
                ),
            )
        })
    }

    fn check_writes(&self, call: &ToolCall) -> Option<Verdict> {
        let writable: Vec<String> = self
            .writable_paths
            .iter()
            .filter_map(|dir| normalize(dir))
            .collect();
        call.paths
            .iter()
            .filter(|used| used.access == Access::Write)
            .find_map(|used| {
                let Some(path) = normalize(&used.path) else {
                    return Some(Verdict::deny(
                        "paths.writable",
                        format!(
                            "{} would write {:?}, which is not absolute",
                            call.tool, used.path
                        ),
                    ));
                };
                (!writable.iter().any(|dir| is_within(&path, dir))).then(|| {
                    Verdict::deny(
                        "paths.writable",
                        format!(
                            "{} would write {path}, outside the writable paths ({})",
                            call.tool,
                            list(&self.writable_paths)
                        ),
                    )
                })
            })
    }

    fn check_secrets(&self, call: &ToolCall) -> Option<Verdict> {
        if self.read_secrets {
            return None;
        }
        call.paths
            .iter()
            .find(|used| used.access == Access::Read && is_secret(&used.path))
            .map(|used| {
                Verdict::deny(
                    "secrets",
                    format!(
                        "{} holds secrets, and this session's policy does not allow reading them",
                        normalize(&used.path).unwrap_or_else(|| used.path.clone())
                    ),
                )
            })
    }

    fn check_destination(&self, call: &ToolCall) -> Option<Verdict> {
        let destination = call.destination.as_ref()?;
        let host = match Host::parse(&destination.host) {
            Ok(host) => host,
            Err(why) => {
                return Some(Verdict::deny(
                    "network.destination",
                    format!("{:?} is not a valid host: {why}", destination.host),
                ));
            }
        };
        if host.is_loopback() {
            return None;
        }
        let shown = match destination.port {
            Some(port) => format!("{host}:{port}"),
            None => host.to_string(),
        };
        match &self.network {
            Network::Open => None,
            Network::None => Some(Verdict::deny(
                "network.destination",
                format!("this session has no network, so {shown} is unreachable"),
            )),
            Network::Allowlist { hosts } => {
                let listed = hosts
                    .iter()
                    .any(|pattern| pattern.matches(&host, destination.port));
                (!listed).then(|| {
                    Verdict::deny(
                        "network.destination",
                        format!("{shown} is not in this session's network allowlist"),
                    )
                })
            }
        }
    }
}

fn check_internal(call: &ToolCall) -> Option<Verdict> {
    let destination = call.destination.as_ref()?;
    let host = Host::parse(&destination.host).ok()?;
    if host.is_loopback() {
        return None;
    }
    host.internal().map(|why| {
        Verdict::deny(
            "network.internal",
            format!("{host} is {why}; sandboxes never reach internal addresses"),
        )
    })
}

fn list(items: &[String]) -> String {
    if items.is_empty() {
        "none".to_owned()
    } else {
        items.join(", ")
    }
}

#[cfg(test)]
#[path = "evaluate_tests.rs"]
mod tests;
