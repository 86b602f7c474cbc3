//! Properties of the evaluator that must hold for every policy and call, not just the ones
//! someone thought to write down.

use forge_policy::catalog::TOOLS;
use forge_policy::{
    Access, Ceilings, Decision, Glob, HostPattern, Network, PathUse, Policy, Rule, SessionUsage,
    ToolCall,
};
use proptest::collection::vec;
use proptest::option;
use proptest::prelude::*;
use proptest::sample::{select, subsequence};

const WORDS: [&str; 14] = [
    "python", "python3", "-m", "pytest", "-c", "npm", "test", "run", "dev", "cargo", "bash",
    "/bin/sh", "git", "status",
];

const HOSTS: [&str; 14] = [
    "example.org",
    "pypi.org",
    "files.pythonhosted.org",
    "github.com",
    "api.github.com",
    "127.0.0.1",
    "localhost",
    "::1",
    "[::ffff:127.0.0.1]",
    "10.0.0.7",
    "169.254.169.254",
    "203.0.113.9",
    "2130706433",
    "metadata.google.internal",
];

const HOST_PATTERNS: [&str; 9] = [
    "example.org",
    "*.org",
    "*.pythonhosted.org",
    "pypi.org:443",
    "github.com",
    "*.github.com",
    "203.0.113.0/24",
    "203.0.113.9:443",
    "0.0.0.0/0",
];

const PATHS: [&str; 12] = [
    "/workspace/app.py",
    "/workspace/.env",
    "/workspace/.git/config",
    "/workspace/../etc/passwd",
    "/workspace-evil/x",
    "/tmp/x",
    "//tmp/./y",
    "/etc/shadow",
    "/root/.ssh/id_rsa",
    "/workspace/app/../../tmp/z",
    "relative/path",
    "/",
];

/// Argv prefixes that policies below allow or refuse; generated commands extend them, so
/// they often land right on an allowlist's edge.
const COMMANDS: [&[&str]; 7] = [
    &["python", "-m", "pytest"],
    &["python"],
    &["python", "-c"],
    &["npm", "test"],
    &["npm"],
    &["bash"],
    &[],
];

fn tool() -> impl Strategy<Value = String> {
    prop_oneof![
        2 => select(TOOLS.to_vec()).prop_map(str::to_owned),
        2 => select(vec!["run_command", "start_process", "write_file", "read_file", "check_port", "run_code", "shell"])
            .prop_map(str::to_owned),
        1 => "[a-z_]{0,12}",
    ]
}

fn command() -> impl Strategy<Value = Vec<String>> {
    (select(COMMANDS.to_vec()), vec(select(WORDS.to_vec()), 0..3)).prop_map(|(prefix, rest)| {
        prefix
            .iter()
            .chain(&rest)
            .map(|word| (*word).to_owned())
            .collect()
    })
}

fn call() -> impl Strategy<Value = ToolCall> {
    let path_use = (
        prop_oneof![3 => select(PATHS.to_vec()).prop_map(str::to_owned), 1 => "/[a-z./]{0,20}"],
        prop_oneof![Just(Access::Read), Just(Access::Write)],
    )
        .prop_map(|(path, access)| PathUse { path, access });
    (
        tool(),
        vec(path_use, 0..3),
        option::of(command()),
        option::of((
            select(HOSTS.to_vec()),
            option::of(prop_oneof![Just(443_u16), Just(80), Just(3000)]),
        )),
        option::of(select(vec!["python", "node", "shell", "ruby"]).prop_map(str::to_owned)),
    )
        .prop_map(|(tool, paths, command, destination, language)| {
            let mut call = ToolCall::new(tool);
            call.paths = paths;
            call.command = command;
            if let Some((host, port)) = destination {
                call = call.destination(host, port);
            }
            call.language = language;
            call
        })
}

fn rule(decision: Decision) -> impl Strategy<Value = Rule> {
    (
        option::of(select(vec![
            "*",
            "read_*",
            "write_file",
            "install_*",
            "{run_code,run_command}",
        ])),
        option::of(select(vec![
            "/workspace/**",
            "**/.git/**",
            "/tmp/*",
            "**",
            "/etc/**",
        ])),
        option::of(prop_oneof![Just(Access::Read), Just(Access::Write)]),
        option::of(select(vec![vec!["python"], vec!["npm", "test"], vec![]])),
        option::of(select(HOST_PATTERNS.to_vec())),
    )
        .prop_map(move |(tool, path, access, prefix, host)| {
            let mut rule = Rule::new("generated", decision, "generated rule");
            rule.tool = tool.map(|glob| Glob::new(glob).unwrap());
            rule.path = path.map(|glob| Glob::new(glob).unwrap());
            rule.access = access;
            rule.command_prefix = prefix.map(|argv| argv.into_iter().map(str::to_owned).collect());
            rule.host = host.map(|pattern| HostPattern::new(pattern).unwrap());
            rule
        })
}

fn network() -> impl Strategy<Value = Network> {
    prop_oneof![
        Just(Network::None),
        Just(Network::Open),
        subsequence(HOST_PATTERNS.to_vec(), 0..=HOST_PATTERNS.len()).prop_map(|hosts| {
            Network::Allowlist {
                hosts: hosts
                    .into_iter()
                    .map(|h| HostPattern::new(h).unwrap())
                    .collect(),
            }
        }),
    ]
}

/// Policies over a small vocabulary, so that generated calls often hit their edges. Rule ids
/// start with `prefix` and are numbered, so two generated policies never share one.
fn policy(prefix: &'static str) -> impl Strategy<Value = Policy> {
    let numbers = (
        1..20_000_u64,
        1..700_u64,
        1..20_000_000_u64,
        1..8192_u64,
        1..2000_u64,
    );
    let tools = prop_oneof![
        2 => Just(vec!["*".to_owned()]),
        1 => subsequence(TOOLS.to_vec(), 0..=TOOLS.len())
            .prop_map(|tools| tools.into_iter().map(str::to_owned).collect()),
    ];
    let writable = subsequence(
        vec!["/workspace", "/tmp", "/workspace/app", "/", "/var/../srv"],
        0..=5,
    );
    let commands = subsequence(COMMANDS.to_vec(), 0..=COMMANDS.len()).prop_map(|argvs| {
        argvs
            .into_iter()
            .map(|argv| argv.iter().map(|word| (*word).to_owned()).collect())
            .collect::<Vec<Vec<String>>>()
    });
    let rules = vec(prop_oneof![rule(Decision::Ask), rule(Decision::Deny)], 0..3);
    (
        numbers,
        network(),
        tools,
        writable,
        any::<(bool, bool)>(),
        subsequence(vec!["python", "node", "shell"], 0..=3),
        commands,
        rules,
    )
        .prop_map(
            move |(
                (ttl, execution, output, memory, budget),
                network,
                tools,
                writable,
                (shell, read_secrets),
                languages,
                commands,
                rules,
            )| Policy {
                session_ttl_seconds: ttl,
                max_execution_seconds: execution,
                max_output_bytes: output,
                max_memory_mb: memory,
                call_budget: budget,
                network,
                tools,
                writable_paths: writable.into_iter().map(str::to_owned).collect(),
                shell,
                read_secrets,
                run_code_languages: languages.into_iter().map(str::to_owned).collect(),
                commands,
                rules: rules
                    .into_iter()
                    .enumerate()
                    .map(|(index, mut rule)| {
                        rule.id = format!("{prefix}-{index}");
                        rule
                    })
                    .collect(),
            },
        )
}

fn ceilings() -> impl Strategy<Value = Ceilings> {
    policy("operator").prop_map(|policy| Ceilings {
        session_ttl_seconds: policy.session_ttl_seconds,
        max_execution_seconds: policy.max_execution_seconds,
        max_output_bytes: policy.max_output_bytes,
        max_memory_mb: policy.max_memory_mb,
        call_budget: policy.call_budget,
        network: policy.network,
        tools: policy.tools,
        writable_paths: policy.writable_paths,
        shell: policy.shell,
        read_secrets: policy.read_secrets,
        run_code_languages: policy.run_code_languages,
        commands: policy.commands,
        rules: policy.rules,
    })
}

/// Mostly early in a session, so the budget rarely hides what the other rules decide.
fn usage() -> impl Strategy<Value = SessionUsage> {
    prop_oneof![4 => 0..10_u64, 1 => 0..2500_u64].prop_map(|calls| SessionUsage { calls })
}

/// Path spellings that do not change where a path points: nothing, `.`, an empty component
/// (a doubled slash), or a step into a name and straight back out.
fn detour() -> impl Strategy<Value = Vec<&'static str>> {
    vec(
        prop_oneof![
            Just(vec!["."]),
            Just(vec![""]),
            select(vec!["workspace", "tmp", "a", ".env", "..."]).prop_map(|name| vec![name, ".."]),
        ],
        0..3,
    )
    .prop_map(|steps| steps.concat())
}

/// `components` spelled with detours between them, and possibly `..` at the root, where it
/// stays at the root.
fn respelled(components: Vec<&'static str>) -> impl Strategy<Value = String> {
    let slots = components.len() + 1;
    (vec(detour(), slots), any::<bool>()).prop_map(move |(detours, climb)| {
        let mut parts: Vec<&str> = Vec::new();
        if climb {
            parts.extend(["..", ".."]);
        }
        for (index, detour) in detours.iter().enumerate() {
            parts.extend(detour);
            if let Some(component) = components.get(index) {
                parts.push(component);
            }
        }
        format!("/{}", parts.join("/"))
    })
}

fn outside_write() -> impl Strategy<Value = Vec<&'static str>> {
    let beneath = (
        select(vec![
            vec!["etc"],
            vec!["workspace-evil"],
            vec!["tmpfoo"],
            vec!["var", "tmp"],
            vec!["root", ".ssh"],
            vec!["workspac"],
        ]),
        vec(select(vec!["x", "workspace", "tmp", "passwd"]), 0..3),
    )
        .prop_map(|(base, rest)| [base, rest].concat());
    // The root itself is outside every writable path too.
    prop_oneof![1 => Just(Vec::new()), 6 => beneath]
}

fn inside_write() -> impl Strategy<Value = Vec<&'static str>> {
    (
        select(vec!["workspace", "tmp"]),
        vec(select(vec!["x", "etc", "workspace", "a.py"]), 0..3),
    )
        .prop_map(|(base, rest)| [vec![base], rest].concat())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn adding_a_rule_never_loosens(
        policy in policy("rule"),
        extra in prop_oneof![rule(Decision::Deny), rule(Decision::Ask)],
        call in call(),
        usage in usage(),
    ) {
        let before = policy.evaluate(&call, usage);
        let mut stricter = policy;
        stricter.rules.push(Rule { id: "extra".to_owned(), ..extra.clone() });
        let after = stricter.evaluate(&call, usage);
        prop_assert!(after.decision >= before.decision, "{before:?} became {after:?}");
        if extra.decision == Decision::Deny && extra.matches(&call) {
            prop_assert_eq!(after.decision, Decision::Deny);
        }
    }

    #[test]
    fn writes_outside_the_writable_paths_are_never_allowed(
        path in outside_write().prop_flat_map(respelled),
        tool in select(vec!["write_file", "edit_file", "delete_path", "move_path", "clone_repo"]),
    ) {
        let verdict = Policy::default().evaluate(&ToolCall::new(tool).write(path.clone()), SessionUsage::default());
        prop_assert_eq!(verdict.decision, Decision::Deny, "{} was {:?}", path, verdict);
        prop_assert_eq!(verdict.rule, "paths.writable");
    }

    #[test]
    fn writes_inside_the_writable_paths_are_allowed_however_spelled(
        path in inside_write().prop_flat_map(respelled),
    ) {
        let verdict = Policy::default().evaluate(&ToolCall::new("write_file").write(path.clone()), SessionUsage::default());
        prop_assert_eq!(verdict.decision, Decision::Allow, "{} was {:?}", path, verdict);
    }

    #[test]
    fn an_exhausted_budget_denies_every_call(
        policy in policy("rule"),
        call in call(),
        over in 0..1000_u64,
    ) {
        let usage = SessionUsage { calls: policy.call_budget + over };
        prop_assert_eq!(policy.evaluate(&call, usage).decision, Decision::Deny);
    }

    #[test]
    fn within_is_never_wider_than_either_side(
        policy in policy("client"),
        ceilings in ceilings(),
        calls in vec(call(), 1..16),
        usage in usage(),
    ) {
        let narrowed = policy.within(&ceilings);
        narrowed.validate().unwrap();
        let widest = ceilings.widest_policy();
        prop_assert!(narrowed.session_ttl_seconds <= policy.session_ttl_seconds.min(ceilings.session_ttl_seconds));
        prop_assert!(narrowed.max_execution_seconds <= policy.max_execution_seconds.min(ceilings.max_execution_seconds));
        prop_assert!(narrowed.max_output_bytes <= policy.max_output_bytes.min(ceilings.max_output_bytes));
        prop_assert!(narrowed.max_memory_mb <= policy.max_memory_mb.min(ceilings.max_memory_mb));
        prop_assert!(narrowed.call_budget <= policy.call_budget.min(ceilings.call_budget));
        prop_assert!(!narrowed.shell || (policy.shell && ceilings.shell));
        prop_assert!(!narrowed.read_secrets || (policy.read_secrets && ceilings.read_secrets));
        for tool in TOOLS {
            prop_assert!(!narrowed.offers(tool) || (policy.offers(tool) && widest.offers(tool)), "{}", tool);
        }
        for call in &calls {
            let got = narrowed.evaluate(call, usage).decision;
            let mine = policy.evaluate(call, usage).decision;
            let theirs = widest.evaluate(call, usage).decision;
            prop_assert!(got >= mine.max(theirs), "{call:?}: {got:?} < {mine:?}/{theirs:?}");
        }
    }

    #[test]
    fn evaluate_is_total_on_arbitrary_strings(
        policy in prop_oneof![Just(Policy::default()), policy("rule")],
        tool in ".*",
        paths in vec((".*", any::<bool>()), 0..4),
        command in option::of(vec(".*", 0..4)),
        host in option::of(".*"),
        port in any::<Option<u16>>(),
        language in option::of(".*"),
        calls in any::<u64>(),
    ) {
        let mut call = ToolCall::new(tool);
        for (path, write) in paths {
            call = if write { call.write(path) } else { call.read(path) };
        }
        call.command = command;
        if let Some(host) = host {
            call = call.destination(host, port);
        }
        call.language = language;
        let verdict = policy.evaluate(&call, SessionUsage { calls });
        prop_assert!(!verdict.rule.is_empty() && !verdict.reason.is_empty());
        let _ = policy.conceals(&call.tool);
    }

    #[test]
    fn parsers_are_total_on_arbitrary_text(text in ".*") {
        let _ = Policy::from_toml(&text);
        let _ = Policy::from_json(&text);
        let _ = HostPattern::new(&text);
        let _ = Glob::new(&text);
    }
}
