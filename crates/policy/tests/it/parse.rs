//! Policy files: what parses into what, and how each kind of mistake is reported.

use std::error::Error as _;

use forge_policy::{
    Access, Ceilings, Decision, Examples, Glob, HostPattern, Network, Policy, PolicyError, Rule,
    ToolCall,
};
use pretty_assertions::assert_eq;

/// The error and its causes, as the CLI would print them.
fn chain(err: &PolicyError) -> Vec<String> {
    let mut messages = vec![err.to_string()];
    let mut source = err.source();
    while let Some(cause) = source {
        messages.push(cause.to_string());
        source = cause.source();
    }
    messages
}

fn toml_chain(text: &str) -> Vec<String> {
    chain(&Policy::from_toml(text).unwrap_err())
}

fn json_chain(text: &str) -> Vec<String> {
    chain(&Policy::from_json(text).unwrap_err())
}

fn strings(items: &[&str]) -> Vec<String> {
    items.iter().map(|item| (*item).to_owned()).collect()
}

#[test]
fn an_empty_document_is_the_default_policy() {
    assert_eq!(Policy::from_toml("").unwrap(), Policy::default());
    assert_eq!(Policy::from_json("{}").unwrap(), Policy::default());
    assert_eq!(Ceilings::from_toml("").unwrap(), Ceilings::default());
}

#[test]
fn a_full_policy_file_parses_into_the_whole_value() {
    let text = r#"
        session_ttl_seconds = 900
        max_execution_seconds = 60
        max_output_bytes = 65536
        max_memory_mb = 512
        call_budget = 200
        tools = ["read_file", "write_file", "run_command", "http_health_check"]
        writable_paths = ["/workspace/app"]
        shell = false
        read_secrets = false
        run_code_languages = ["python"]
        commands = [["python", "-m", "pytest"], ["ruff", "check"]]

        [network]
        mode = "allowlist"
        hosts = ["pypi.org", "*.pythonhosted.org", "203.0.113.0/24", "example.org:8443"]

        [[rules]]
        id = "no-git-internals"
        decision = "deny"
        path = "/workspace/**/.git/**"
        access = "write"
        reason = "history is the person's to rewrite"

        [[rules.examples.matches]]
        tool = "write_file"
        paths = [{ path = "/workspace/app/.git/config", access = "write" }]

        [[rules.examples.not_matches]]
        tool = "read_file"
        paths = [{ path = "/workspace/app/.git/config", access = "read" }]

        [[rules]]
        id = "ask-pytest-network"
        decision = "ask"
        command_prefix = ["python", "-m", "pytest", "--network"]
        reason = "network tests reach real services"
    "#;
    let expected = Policy {
        session_ttl_seconds: 900,
        max_execution_seconds: 60,
        max_output_bytes: 65536,
        max_memory_mb: 512,
        call_budget: 200,
        network: Network::Allowlist {
            hosts: [
                "pypi.org",
                "*.pythonhosted.org",
                "203.0.113.0/24",
                "example.org:8443",
            ]
            .into_iter()
            .map(|host| HostPattern::new(host).unwrap())
            .collect(),
        },
        tools: strings(&[
            "read_file",
            "write_file",
            "run_command",
            "http_health_check",
        ]),
        writable_paths: strings(&["/workspace/app"]),
        shell: false,
        read_secrets: false,
        run_code_languages: strings(&["python"]),
        commands: vec![
            strings(&["python", "-m", "pytest"]),
            strings(&["ruff", "check"]),
        ],
        rules: vec![
            Rule::new(
                "no-git-internals",
                Decision::Deny,
                "history is the person's to rewrite",
            )
            .path(Glob::new("/workspace/**/.git/**").unwrap())
            .access(Access::Write)
            .examples(Examples {
                matches: vec![ToolCall::new("write_file").write("/workspace/app/.git/config")],
                not_matches: vec![ToolCall::new("read_file").read("/workspace/app/.git/config")],
            }),
            Rule::new(
                "ask-pytest-network",
                Decision::Ask,
                "network tests reach real services",
            )
            .command_prefix(["python", "-m", "pytest", "--network"]),
        ],
    };
    let policy = Policy::from_toml(text).unwrap();
    assert_eq!(policy, expected);

    // The same policy survives a trip through JSON, the shape the server receives.
    let json = serde_json::to_string(&policy).unwrap();
    assert_eq!(Policy::from_json(&json).unwrap(), expected);
}

#[test]
fn parse_errors_name_the_field() {
    assert_eq!(
        toml_chain("shel = true"),
        vec![
            "policy TOML is invalid at `shel`".to_owned(),
            "TOML parse error at line 1, column 1\n  |\n1 | shel = true\n  | ^^^^\n\
             unknown field `shel`, expected one of `session_ttl_seconds`, \
             `max_execution_seconds`, `max_output_bytes`, `max_memory_mb`, `call_budget`, \
             `network`, `tools`, `writable_paths`, `shell`, `read_secrets`, \
             `run_code_languages`, `commands`, `rules`\n"
                .to_owned(),
        ]
    );
    assert_eq!(
        json_chain(
            r#"{"rules": [{"id": "x", "decision": "deny", "reason": "r", "path": "/a/[b"}]}"#
        ),
        vec![
            "policy JSON is invalid at `rules[0].path`".to_owned(),
            "invalid glob \"/a/[b\": unclosed character class; missing ']' at line 1 column 74"
                .to_owned(),
        ]
    );
    assert_eq!(
        json_chain(r#"{"max_output_bytes": -1}"#),
        vec![
            "policy JSON is invalid at `max_output_bytes`".to_owned(),
            "invalid value: integer `-1`, expected u64 at line 1 column 23".to_owned(),
        ]
    );
    assert_eq!(
        json_chain(r#"{"network": {"mode": "allowlist", "hosts": ["pypi.org", "ex*ample.org"]}}"#),
        vec![
            "policy JSON is invalid at `network.hosts[1]`".to_owned(),
            "invalid host pattern \"ex*ample.org\": '*' is only allowed as a leading '*.' \
             at line 1 column 71"
                .to_owned(),
        ]
    );
    assert_eq!(
        toml_chain("[network]\nmode = \"none\"\nhosts = []"),
        vec![
            "policy TOML is invalid at `network`".to_owned(),
            "TOML parse error at line 1, column 1\n  |\n1 | [network]\n  | ^^^^^^^^^\n\
             `hosts` is only allowed with mode `allowlist`\n"
                .to_owned(),
        ]
    );
    assert_eq!(
        toml_chain("network = { mode = \"allowlist\" }")[1],
        "TOML parse error at line 1, column 11\n  |\n1 | network = { mode = \"allowlist\" }\n  \
         |           ^^^^^^^^^^^^^^^^^^^^^^\nmode `allowlist` needs `hosts`\n"
    );
    assert_eq!(
        toml_chain("network = { mode = \"closed\" }")[0],
        "policy TOML is invalid at `network.mode`"
    );
    assert_eq!(
        json_chain(r#"{"tools": ["read_file"]} trailing"#)[0],
        "policy JSON is invalid at `.`"
    );
    assert_eq!(toml_chain("tools = [")[0], "policy TOML is invalid at `.`");
    assert_eq!(
        chain(&Ceilings::from_toml("max_memory_mb = \"lots\"").unwrap_err())[0],
        "ceilings TOML is invalid at `max_memory_mb`"
    );
}

#[test]
fn semantic_errors_name_the_field_or_rule() {
    let cases = [
        ("call_budget = 0", "`call_budget` must be at least 1"),
        (
            r#"tools = ["read_file", "read_flie"]"#,
            "`tools[1]` names unknown tool \"read_flie\"",
        ),
        (
            r#"run_code_languages = ["python", "ruby"]"#,
            "`run_code_languages[1]` names unknown language \"ruby\"",
        ),
        (
            r#"writable_paths = ["/workspace", "tmp"]"#,
            "`writable_paths[1]` is not an absolute path: \"tmp\"",
        ),
        (
            r#"rules = [{ id = "has space", decision = "deny", reason = "r" }]"#,
            "rule id \"has space\" must be ASCII letters, digits, '.', '_' or '-'",
        ),
        (
            r#"rules = [{ id = "secrets", decision = "deny", reason = "r" }]"#,
            "rule id \"secrets\" is reserved for a built-in rule",
        ),
        (
            r#"rules = [{ id = "a", decision = "deny", reason = "r" }, { id = "a", decision = "ask", reason = "r" }]"#,
            "rule id \"a\" is used by more than one rule",
        ),
        (
            r#"rules = [{ id = "a", decision = "allow", reason = "r" }]"#,
            "rule `a` allows, but rules can only tighten; widen the policy's fields instead",
        ),
        (
            r#"rules = [{ id = "a", decision = "deny", tool = "instal_*", reason = "r" }]"#,
            "rule `a`: tool pattern \"instal_*\" matches no known tool",
        ),
    ];
    let got: Vec<_> = cases
        .iter()
        .map(|(text, _)| (*text, toml_chain(text)))
        .collect();
    let want: Vec<_> = cases
        .iter()
        .map(|(text, message)| (*text, vec![(*message).to_owned()]))
        .collect();
    assert_eq!(got, want);
}

#[test]
fn rule_examples_are_checked_at_load() {
    let rule = |examples: &str| {
        format!(
            r#"
            [[rules]]
            id = "ask-installs"
            decision = "ask"
            tool = "install_*"
            reason = "installs run package scripts"
            {examples}
            "#
        )
    };
    assert!(
        Policy::from_toml(&rule(
            r#"examples.matches = [{ tool = "install_node_deps" }, { tool = "install_python_deps" }]
               examples.not_matches = [{ tool = "run_code", language = "python" }]"#
        ))
        .is_ok()
    );
    assert_eq!(
        toml_chain(&rule(
            r#"examples.matches = [{ tool = "install_node_deps" }, { tool = "write_file" }]"#
        )),
        vec!["rule `ask-installs`: example matches[1] is not matched by the rule".to_owned()]
    );
    assert_eq!(
        toml_chain(&rule(
            r#"examples.not_matches = [{ tool = "read_file" }, { tool = "run_code" }, { tool = "install_package" }]"#
        )),
        vec!["rule `ask-installs`: example not_matches[2] is matched by the rule".to_owned()]
    );
    assert_eq!(
        toml_chain(&rule(
            r#"examples.not_matches = [{ tool = "instal_package" }]"#
        )),
        vec![
            "rule `ask-installs`: example not_matches[0] names unknown tool \"instal_package\""
                .to_owned()
        ]
    );
    assert_eq!(
        toml_chain(&rule(
            r#"examples.matches = [{ tool = "install_package", args = 1 }]"#
        ))[0],
        "policy TOML is invalid at `rules[0].examples.matches[0].args`"
    );
}

#[test]
fn ceilings_are_checked_like_policies() {
    assert_eq!(
        chain(&Ceilings::from_json(r#"{"tools": ["*", "sh"]}"#).unwrap_err()),
        vec!["`tools[1]` names unknown tool \"sh\"".to_owned()]
    );
    let ceilings = Ceilings::from_toml(
        r#"
        max_execution_seconds = 120
        shell = true
        network = { mode = "open" }
        [[rules]]
        id = "operator.no-metadata-names"
        decision = "deny"
        host = "*.internal"
        reason = "cloud metadata is off limits"
        "#,
    )
    .unwrap();
    assert_eq!(
        ceilings,
        Ceilings {
            max_execution_seconds: 120,
            shell: true,
            network: Network::Open,
            rules: vec![
                Rule::new(
                    "operator.no-metadata-names",
                    Decision::Deny,
                    "cloud metadata is off limits"
                )
                .host(HostPattern::new("*.internal").unwrap())
            ],
            ..Ceilings::default()
        }
    );
}
