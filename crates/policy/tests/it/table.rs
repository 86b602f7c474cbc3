//! A verdict table: representative calls judged by the default policy and by a tighter,
//! network-enabled one, kept as a snapshot so that any change in what is allowed, or in what
//! people and the ledger are told, shows up in review.

use forge_policy::{Ceilings, Policy, SessionUsage, ToolCall};
use serde_json::json;

fn calls() -> Vec<(&'static str, ToolCall)> {
    vec![
        (
            "read a source file",
            ToolCall::new("read_file").read("/workspace/app.py"),
        ),
        (
            "read the environment file",
            ToolCall::new("read_file").read("/workspace/.env"),
        ),
        (
            "read the environment template",
            ToolCall::new("read_file").read("/workspace/.env.example"),
        ),
        (
            "read a private key through ..",
            ToolCall::new("read_file").read("/workspace/../root/.ssh/id_ed25519"),
        ),
        (
            "write a source file",
            ToolCall::new("write_file").write("/workspace/app.py"),
        ),
        (
            "write scratch space",
            ToolCall::new("write_file").write("/tmp/out.txt"),
        ),
        (
            "write outside through ..",
            ToolCall::new("write_file").write("/workspace/../etc/cron.d/x"),
        ),
        (
            "write a sibling that shares a prefix",
            ToolCall::new("write_file").write("/workspace-evil/x"),
        ),
        (
            "edit a lockfile",
            ToolCall::new("edit_file")
                .read("/workspace/package-lock.json")
                .write("/workspace/package-lock.json"),
        ),
        (
            "write into .git",
            ToolCall::new("write_file").write("/workspace/.git/hooks/pre-commit"),
        ),
        (
            "delete the build",
            ToolCall::new("delete_path").write("/workspace/build"),
        ),
        (
            "move a secret to a readable name",
            ToolCall::new("move_path")
                .read("/workspace/.env")
                .write("/workspace/.env")
                .write("/workspace/notes.txt"),
        ),
        ("run python", ToolCall::new("run_code").language("python")),
        (
            "run a shell snippet",
            ToolCall::new("run_code").language("shell"),
        ),
        ("run code with no language", ToolCall::new("run_code")),
        (
            "run the tests",
            ToolCall::new("run_command").command(["python", "-m", "pytest", "-q"]),
        ),
        (
            "run python -c",
            ToolCall::new("run_command").command(["python", "-c", "print(1)"]),
        ),
        (
            "run bash -c",
            ToolCall::new("run_command").command(["bash", "-c", "rm -rf /"]),
        ),
        (
            "start a dev server",
            ToolCall::new("start_process").command(["npm", "run", "dev"]),
        ),
        (
            "the shell tool",
            ToolCall::new("shell").command(["ls", "-la"]),
        ),
        (
            "health check on the sandbox's own port",
            ToolCall::new("http_health_check").destination("localhost", Some(3000)),
        ),
        (
            "health check on a public host",
            ToolCall::new("http_health_check").destination("example.org", Some(443)),
        ),
        (
            "clone from github",
            ToolCall::new("clone_repo")
                .destination("github.com", Some(443))
                .write("/workspace/repo"),
        ),
        (
            "fetch from the package index",
            ToolCall::new("install_python_deps")
                .destination("files.pythonhosted.org", Some(443))
                .write("/workspace/.venv"),
        ),
        (
            "cloud metadata",
            ToolCall::new("http_health_check").destination("169.254.169.254", Some(80)),
        ),
        (
            "cloud metadata by name",
            ToolCall::new("http_health_check").destination("metadata.google.internal", None),
        ),
        (
            "IPv4-mapped private address",
            ToolCall::new("check_port").destination("[::ffff:10.0.0.1]", Some(22)),
        ),
        (
            "decimal loopback spelling",
            ToolCall::new("check_port").destination("2130706433", Some(7423)),
        ),
        ("unknown tool", ToolCall::new("format_disk")),
    ]
}

fn tighter() -> Policy {
    Policy::from_toml(
        r#"
        call_budget = 100
        writable_paths = ["/workspace"]
        run_code_languages = ["python"]
        network = { mode = "allowlist", hosts = ["github.com:443", "pypi.org", "*.pythonhosted.org"] }

        [[rules]]
        id = "ask-before-delete"
        decision = "ask"
        tool = "delete_path"
        reason = "a person confirms deletions"
        examples.matches = [{ tool = "delete_path", paths = [{ path = "/workspace/a", access = "write" }] }]
        examples.not_matches = [{ tool = "write_file", paths = [{ path = "/workspace/a", access = "write" }] }]

        [[rules]]
        id = "no-git-internals"
        decision = "deny"
        path = "/workspace/**/.git/**"
        access = "write"
        reason = "history is the person's to rewrite"
        examples.matches = [{ tool = "write_file", paths = [{ path = "/workspace/.git/config", access = "write" }] }]

        [[rules]]
        id = "no-lockfile-edits"
        decision = "deny"
        tool = "{write_file,edit_file}"
        path = "/workspace/**/{package-lock.json,poetry.lock,Cargo.lock}"
        reason = "lockfiles change through installs"
        "#,
    )
    .unwrap()
    .within(&Ceilings::default())
}

#[test]
fn verdict_table() {
    let usage = SessionUsage { calls: 5 };
    let default = Policy::default().within(&Ceilings::default());
    let tighter = tighter();
    let table: Vec<_> = calls()
        .into_iter()
        .map(|(what, call)| {
            json!({
                "what": what,
                "call": call,
                "default": default.evaluate(&call, usage),
                "tighter": tighter.evaluate(&call, usage),
            })
        })
        .collect();
    insta::assert_json_snapshot!(table);
}

#[test]
fn an_exhausted_budget_stops_everything() {
    let tighter = tighter();
    let usage = SessionUsage { calls: 100 };
    let rules: Vec<_> = calls()
        .iter()
        .map(|(_, call)| tighter.evaluate(call, usage).rule)
        .filter(|rule| rule != "budget")
        .collect();
    assert_eq!(rules, Vec::<String>::new());
}
