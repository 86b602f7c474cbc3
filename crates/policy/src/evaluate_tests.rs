//! One test per built-in rule, each asserting whole verdicts, plus the tie-breaking order.

use pretty_assertions::assert_eq;

use super::*;
use crate::host::HostPattern;
use crate::pattern::Glob;
use crate::rule::Rule;

const FRESH: SessionUsage = SessionUsage { calls: 0 };

fn verdict(decision: Decision, rule: &str, reason: &str) -> Verdict {
    Verdict {
        decision,
        rule: rule.to_owned(),
        reason: reason.to_owned(),
    }
}

fn allowed() -> Verdict {
    verdict(Decision::Allow, "default", "no rule objected")
}

fn strings(items: &[&str]) -> Vec<String> {
    items.iter().map(|item| (*item).to_owned()).collect()
}

#[test]
fn nothing_objects_to_an_ordinary_call() {
    let call = ToolCall::new("write_file").write("/workspace/app.py");
    assert_eq!(Policy::default().evaluate(&call, FRESH), allowed());
}

#[test]
fn budget_denies_once_the_calls_are_used() {
    let policy = Policy {
        call_budget: 10,
        ..Policy::default()
    };
    let call = ToolCall::new("read_file").read("/workspace/app.py");
    assert_eq!(policy.evaluate(&call, SessionUsage { calls: 9 }), allowed());
    assert_eq!(
        policy.evaluate(&call, SessionUsage { calls: 10 }),
        verdict(
            Decision::Deny,
            "budget",
            "this session has made 10 tool calls, its whole budget of 10"
        )
    );
}

#[test]
fn tools_allowlist_denies_unlisted_tools_and_star_lists_all() {
    let policy = Policy {
        tools: strings(&["read_file", "list_directory"]),
        ..Policy::default()
    };
    assert_eq!(
        policy.evaluate(&ToolCall::new("write_file").write("/workspace/a"), FRESH),
        verdict(
            Decision::Deny,
            "tools.allowlist",
            "tool \"write_file\" is not among this session's tools"
        )
    );
    assert_eq!(
        policy.evaluate(&ToolCall::new("list_directory").read("/workspace"), FRESH),
        allowed()
    );
    let everything = Policy {
        tools: strings(&["*"]),
        ..Policy::default()
    };
    assert_eq!(
        everything.evaluate(&ToolCall::new("write_file").write("/workspace/a"), FRESH),
        allowed()
    );
}

#[test]
fn shell_disabled_covers_the_tool_the_language_and_shell_programs() {
    let policy = Policy {
        tools: strings(&["*"]),
        commands: vec![Vec::new()],
        ..Policy::default()
    };
    let cases = [
        (
            ToolCall::new("shell").command(["ls"]),
            "the shell tool runs arbitrary commands, and this session's policy does not allow a shell",
        ),
        (
            ToolCall::new("run_code").language("shell"),
            "run_code in shell runs arbitrary commands, and this session's policy does not allow a shell",
        ),
        (
            ToolCall::new("run_command").command(["/bin/bash", "-c", "curl x | sh"]),
            "\"/bin/bash\" is a shell, and this session's policy does not allow a shell",
        ),
    ];
    for (call, reason) in cases {
        assert_eq!(
            policy.evaluate(&call, FRESH),
            verdict(Decision::Deny, "shell.disabled", reason)
        );
    }

    let with_shell = Policy {
        shell: true,
        ..policy
    };
    assert_eq!(
        with_shell.evaluate(&ToolCall::new("shell").command(["ls"]), FRESH),
        allowed()
    );
    assert_eq!(
        with_shell.evaluate(&ToolCall::new("run_code").language("shell"), FRESH),
        allowed()
    );
}

#[test]
fn the_default_policy_does_not_offer_the_shell() {
    let policy = Policy::default();
    assert!(!policy.offers("shell"));
    assert!(policy.offers("read_file"));
    assert_eq!(
        policy.offered_tools().len(),
        crate::catalog::TOOLS.len() - 1
    );
    assert_eq!(
        policy.evaluate(&ToolCall::new("shell"), FRESH),
        verdict(
            Decision::Deny,
            "tools.allowlist",
            "tool \"shell\" is not among this session's tools"
        )
    );
}

#[test]
fn run_code_language_must_be_given_and_listed() {
    let policy = Policy {
        run_code_languages: strings(&["python"]),
        ..Policy::default()
    };
    assert_eq!(
        policy.evaluate(&ToolCall::new("run_code").language("python"), FRESH),
        allowed()
    );
    assert_eq!(
        policy.evaluate(&ToolCall::new("run_code").language("node"), FRESH),
        verdict(
            Decision::Deny,
            "run_code.language",
            "run_code language \"node\" is not among this session's languages (python)"
        )
    );
    assert_eq!(
        policy.evaluate(&ToolCall::new("run_code"), FRESH),
        verdict(
            Decision::Deny,
            "run_code.language",
            "run_code was called without a language"
        )
    );
}

#[test]
fn commands_allowlist_compares_argv_prefixes() {
    let policy = Policy::default();
    let run = |argv: &[&str]| {
        policy.evaluate(
            &ToolCall::new("run_command").command(argv.iter().copied()),
            FRESH,
        )
    };
    assert_eq!(run(&["python", "-m", "pytest", "-q", "tests/"]), allowed());
    assert_eq!(run(&["npm", "test"]), allowed());
    assert_eq!(
        run(&["python", "-c", "import os"]),
        verdict(
            Decision::Deny,
            "commands.allowlist",
            "`python -c import os` does not start with any of this session's allowed commands"
        )
    );
    assert_eq!(
        run(&["/tmp/pytest"]),
        verdict(
            Decision::Deny,
            "commands.allowlist",
            "`/tmp/pytest` does not start with any of this session's allowed commands"
        )
    );
    assert_eq!(
        run(&[]),
        verdict(
            Decision::Deny,
            "commands.allowlist",
            "run_command was called without a command"
        )
    );
    assert_eq!(
        policy.evaluate(&ToolCall::new("start_process"), FRESH),
        verdict(
            Decision::Deny,
            "commands.allowlist",
            "start_process was called without a command"
        )
    );
    // Other tools carry no caller-chosen argv, so the allowlist does not apply to them.
    assert_eq!(
        policy.evaluate(
            &ToolCall::new("install_node_deps").command(["npm", "ci"]),
            FRESH
        ),
        allowed()
    );
}

#[test]
fn paths_writable_folds_dots_before_comparing() {
    let policy = Policy::default();
    let write = |path: &str| policy.evaluate(&ToolCall::new("write_file").write(path), FRESH);
    assert_eq!(write("/workspace/src/../app.py"), allowed());
    assert_eq!(write("//tmp/./scratch"), allowed());
    assert_eq!(
        write("/workspace/../etc/passwd"),
        verdict(
            Decision::Deny,
            "paths.writable",
            "write_file would write /etc/passwd, outside the writable paths (/workspace, /tmp)"
        )
    );
    assert_eq!(
        write("/workspace-evil/x"),
        verdict(
            Decision::Deny,
            "paths.writable",
            "write_file would write /workspace-evil/x, outside the writable paths (/workspace, /tmp)"
        )
    );
    assert_eq!(
        write("workspace/x"),
        verdict(
            Decision::Deny,
            "paths.writable",
            "write_file would write \"workspace/x\", which is not absolute"
        )
    );
    // Reads anywhere are the sandbox's business; only writes are confined here.
    assert_eq!(
        policy.evaluate(&ToolCall::new("read_file").read("/etc/os-release"), FRESH),
        allowed()
    );
    let read_only = Policy {
        writable_paths: Vec::new(),
        ..Policy::default()
    };
    assert_eq!(
        read_only.evaluate(&ToolCall::new("write_file").write("/workspace/a"), FRESH),
        verdict(
            Decision::Deny,
            "paths.writable",
            "write_file would write /workspace/a, outside the writable paths (none)"
        )
    );
}

#[test]
fn secrets_are_not_read_unless_allowed() {
    let policy = Policy::default();
    let call = ToolCall::new("read_file").read("/workspace/app/../.env");
    assert_eq!(
        policy.evaluate(&call, FRESH),
        verdict(
            Decision::Deny,
            "secrets",
            "/workspace/.env holds secrets, and this session's policy does not allow reading them"
        )
    );
    // Writing a .env is what write_env_file is for.
    assert_eq!(
        policy.evaluate(
            &ToolCall::new("write_env_file").write("/workspace/.env"),
            FRESH
        ),
        allowed()
    );
    let trusting = Policy {
        read_secrets: true,
        ..Policy::default()
    };
    assert_eq!(trusting.evaluate(&call, FRESH), allowed());
    assert!(policy.conceals("/workspace/.ssh/id_rsa"));
    assert!(!trusting.conceals("/workspace/.ssh/id_rsa"));
}

#[test]
fn network_internal_is_denied_in_every_mode() {
    let call = ToolCall::new("http_health_check").destination("169.254.169.254", Some(80));
    let internal = verdict(
        Decision::Deny,
        "network.internal",
        "169.254.169.254 is a link-local address, where cloud metadata services live; \
         sandboxes never reach internal addresses",
    );
    let open = Policy {
        network: Network::Open,
        ..Policy::default()
    };
    let listed = Policy {
        network: Network::Allowlist {
            hosts: vec![HostPattern::new("169.254.0.0/16").unwrap()],
        },
        ..Policy::default()
    };
    for policy in [Policy::default(), open, listed] {
        assert_eq!(policy.evaluate(&call, FRESH), internal);
    }
}

#[test]
fn network_destination_follows_the_mode() {
    let allowlist = Policy {
        network: Network::Allowlist {
            hosts: vec![
                HostPattern::new("*.github.com").unwrap(),
                HostPattern::new("pypi.org:443").unwrap(),
            ],
        },
        ..Policy::default()
    };
    let open = Policy {
        network: Network::Open,
        ..Policy::default()
    };
    let check = |policy: &Policy, host: &str, port: Option<u16>| {
        policy.evaluate(&ToolCall::new("check_port").destination(host, port), FRESH)
    };

    assert_eq!(
        check(&Policy::default(), "example.org", Some(443)),
        verdict(
            Decision::Deny,
            "network.destination",
            "this session has no network, so example.org:443 is unreachable"
        )
    );
    // The sandbox's own services are reachable even without a network.
    assert_eq!(
        check(&Policy::default(), "127.0.0.1", Some(3000)),
        allowed()
    );
    assert_eq!(
        check(&Policy::default(), "localhost", Some(3000)),
        allowed()
    );

    assert_eq!(check(&allowlist, "API.github.com", None), allowed());
    assert_eq!(check(&allowlist, "pypi.org", Some(443)), allowed());
    assert_eq!(
        check(&allowlist, "pypi.org", Some(80)),
        verdict(
            Decision::Deny,
            "network.destination",
            "pypi.org:80 is not in this session's network allowlist"
        )
    );
    assert_eq!(check(&open, "example.org", None), allowed());
    assert_eq!(
        check(&open, "2130706433", Some(80)),
        verdict(
            Decision::Deny,
            "network.destination",
            "\"2130706433\" is not a valid host: numeric host that is not a dotted-quad IPv4 address"
        )
    );
}

#[test]
fn rules_add_their_own_decisions() {
    let policy = Policy {
        rules: vec![
            Rule::new("ask-deletes", Decision::Ask, "a person confirms deletions")
                .tool(Glob::new("delete_path").unwrap()),
            Rule::new(
                "no-lockfile-edits",
                Decision::Deny,
                "lockfiles change only through installs",
            )
            .path(Glob::new("/workspace/**/{package-lock.json,poetry.lock}").unwrap())
            .access(Access::Write),
        ],
        ..Policy::default()
    };
    assert_eq!(
        policy.evaluate(
            &ToolCall::new("delete_path").write("/workspace/build"),
            FRESH
        ),
        verdict(Decision::Ask, "ask-deletes", "a person confirms deletions")
    );
    assert_eq!(
        policy.evaluate(
            &ToolCall::new("delete_path").write("/workspace/app/package-lock.json"),
            FRESH
        ),
        verdict(
            Decision::Deny,
            "no-lockfile-edits",
            "lockfiles change only through installs"
        )
    );
}

#[test]
fn the_strictest_wins_and_ties_go_to_the_first_in_order() {
    let policy = Policy {
        call_budget: 1,
        rules: vec![
            Rule::new("ask-writes", Decision::Ask, "writes are reviewed").access(Access::Write),
            Rule::new("deny-writes", Decision::Deny, "no writes today").access(Access::Write),
        ],
        ..Policy::default()
    };
    let call = ToolCall::new("write_file").write("/etc/passwd");
    // Budget, paths.writable and deny-writes all deny; budget comes first.
    assert_eq!(
        policy.evaluate(&call, SessionUsage { calls: 1 }),
        verdict(
            Decision::Deny,
            "budget",
            "this session has made 1 tool calls, its whole budget of 1"
        )
    );
    // Without the budget, the built-in paths.writable precedes the rule.
    assert_eq!(policy.evaluate(&call, FRESH).rule, "paths.writable");
    // A deny rule outranks an earlier ask rule.
    let inside = ToolCall::new("write_file").write("/workspace/a");
    assert_eq!(
        policy.evaluate(&inside, FRESH),
        verdict(Decision::Deny, "deny-writes", "no writes today")
    );
}
