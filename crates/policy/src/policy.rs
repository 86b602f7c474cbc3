//! The session policy as data: limits, allowlists, the network mode and extra rules, with
//! the defaults a session gets when it asks for nothing, and the checks a policy passes
//! before it is used.

use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};

use crate::catalog::{self, LANGUAGES, SHELL_TOOL, TOOLS};
use crate::decision::Decision;
use crate::evaluate::BUILTIN_RULES;
use crate::host::HostPattern;
use crate::path::normalize;
use crate::rule::Rule;
use crate::secrets::is_secret;

/// Why a policy (or a set of ceilings) was refused. Each variant names the field, rule or
/// example at fault; parse errors keep the parser's own message as their source.
#[derive(Debug, thiserror::Error)]
pub enum PolicyError {
    #[error("{document} TOML is invalid at `{path}`")]
    Toml {
        document: &'static str,
        path: String,
        // Boxed: the TOML error is large and every `Result` of this crate would carry it.
        #[source]
        source: Box<toml::de::Error>,
    },
    #[error("{document} JSON is invalid at `{path}`")]
    Json {
        document: &'static str,
        path: String,
        #[source]
        source: serde_json::Error,
    },
    #[error("`{field}` must be at least 1")]
    Zero { field: &'static str },
    #[error("`{field}` names unknown tool {name:?}")]
    UnknownTool { field: String, name: String },
    #[error("`{field}` names unknown language {name:?}")]
    UnknownLanguage { field: String, name: String },
    #[error("`{field}` is not an absolute path: {path:?}")]
    RelativePath { field: String, path: String },
    #[error("rule id {id:?} must be ASCII letters, digits, '.', '_' or '-'")]
    InvalidRuleId { id: String },
    #[error("rule id {id:?} is reserved for a built-in rule")]
    ReservedRuleId { id: String },
    #[error("rule id {id:?} is used by more than one rule")]
    DuplicateRuleId { id: String },
    #[error("rule `{id}` allows, but rules can only tighten; widen the policy's fields instead")]
    AllowRule { id: String },
    #[error("rule `{id}`: tool pattern {pattern:?} matches no known tool")]
    NoSuchTool { id: String, pattern: String },
    #[error("rule `{id}`: example {list}[{index}] names unknown tool {tool:?}")]
    ExampleTool {
        id: String,
        list: &'static str,
        index: usize,
        tool: String,
    },
    #[error("rule `{id}`: example matches[{index}] is not matched by the rule")]
    ExampleNotMatched { id: String, index: usize },
    #[error("rule `{id}`: example not_matches[{index}] is matched by the rule")]
    ExampleMatched { id: String, index: usize },
}

/// Where a session's tools may connect. Loopback (the sandbox's own services) is always
/// reachable and internal addresses never are, whatever the mode.
///
/// Written as a table tagged by `mode`: `network = { mode = "allowlist", hosts = ["pypi.org"] }`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "mode", rename_all = "lowercase", try_from = "NetworkTable")]
pub enum Network {
    /// No destination beyond loopback.
    #[default]
    None,
    /// Only destinations that match one of these patterns.
    Allowlist { hosts: Vec<HostPattern> },
    /// Any public destination.
    Open,
}

/// `Network` as written. Read through this plain struct rather than serde's internally
/// tagged enums, which buffer their input and so lose the path to a bad host pattern.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct NetworkTable {
    mode: NetworkMode,
    hosts: Option<Vec<HostPattern>>,
}

#[derive(Deserialize)]
#[serde(rename_all = "lowercase")]
enum NetworkMode {
    None,
    Allowlist,
    Open,
}

impl TryFrom<NetworkTable> for Network {
    type Error = &'static str;

    fn try_from(table: NetworkTable) -> Result<Self, Self::Error> {
        match (table.mode, table.hosts) {
            (NetworkMode::None, None) => Ok(Self::None),
            (NetworkMode::Open, None) => Ok(Self::Open),
            (NetworkMode::Allowlist, Some(hosts)) => Ok(Self::Allowlist { hosts }),
            (NetworkMode::Allowlist, None) => Err("mode `allowlist` needs `hosts`"),
            (NetworkMode::None | NetworkMode::Open, Some(_)) => {
                Err("`hosts` is only allowed with mode `allowlist`")
            }
        }
    }
}

/// A session's policy. Every field has a default, so `{}` is a complete policy: no network,
/// no shell, every other tool, writes only under `/workspace` and `/tmp`.
///
/// A client may send its own policy when it opens a session; the server always narrows it
/// with [`Policy::within`] the operator's [`crate::Ceilings`] before using it, so a client can
/// tighten what it gets but never widen it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Policy {
    /// How long a session lives after it is created.
    pub session_ttl_seconds: u64,
    /// Wall-clock limit on one execution (`run_code`, `run_command`, installs).
    pub max_execution_seconds: u64,
    /// Output a tool returns before it is cut to a head and tail.
    pub max_output_bytes: u64,
    /// Memory for the session's sandbox.
    pub max_memory_mb: u64,
    /// Tool calls a session may make in all.
    pub call_budget: u64,
    pub network: Network,
    /// Tools the session may call, by name; `"*"` is every tool.
    pub tools: Vec<String>,
    /// Directories tools may write under (absolute).
    pub writable_paths: Vec<String>,
    /// Whether the `shell` tool, `run_code` in `shell`, and commands that start a shell are
    /// allowed at all. The `shell` tool must also be in `tools` (the default list leaves it
    /// out), so opening a raw shell takes two deliberate settings.
    pub shell: bool,
    /// Whether read tools may return secret files (see [`crate::secrets`]).
    pub read_secrets: bool,
    /// Languages `run_code` may run; `shell` takes effect only when `shell` is true.
    pub run_code_languages: Vec<String>,
    /// Argv prefixes `run_command` and `start_process` may run, compared element by element:
    /// `["npm", "test"]` allows `npm test -- --watch=false`. An empty prefix allows any
    /// command. `argv[0]` is compared as written, so `python` does not allow `/tmp/python`.
    pub commands: Vec<Vec<String>>,
    /// Extra rules, evaluated after the built-in ones.
    pub rules: Vec<Rule>,
}

impl Default for Policy {
    fn default() -> Self {
        Self {
            session_ttl_seconds: 3600,
            max_execution_seconds: 30,
            max_output_bytes: 200 * 1024,
            max_memory_mb: 1024,
            call_budget: 1000,
            network: Network::None,
            tools: TOOLS
                .iter()
                .filter(|tool| **tool != SHELL_TOOL)
                .map(|tool| (*tool).to_owned())
                .collect(),
            writable_paths: default_writable_paths(),
            shell: false,
            read_secrets: false,
            run_code_languages: default_languages(),
            commands: DEFAULT_COMMANDS
                .iter()
                .map(|argv| argv.iter().map(|arg| (*arg).to_owned()).collect())
                .collect(),
            rules: Vec::new(),
        }
    }
}

pub(crate) fn default_writable_paths() -> Vec<String> {
    vec!["/workspace".to_owned(), "/tmp".to_owned()]
}

pub(crate) fn default_languages() -> Vec<String> {
    LANGUAGES
        .iter()
        .map(|language| (*language).to_owned())
        .collect()
}

/// Commands a session may run unless its policy says otherwise: tests, builds, linters and
/// formatters of the common stacks, development servers for `start_process`, and git
/// commands that only look. Anything else goes through `run_code` or a widened policy.
const DEFAULT_COMMANDS: &[&[&str]] = &[
    &["python", "-m", "pytest"],
    &["python3", "-m", "pytest"],
    &["pytest"],
    &["python", "-m", "unittest"],
    &["python3", "-m", "unittest"],
    &["npm", "test"],
    &["npm", "run", "test"],
    &["node", "--test"],
    &["cargo", "test"],
    &["go", "test"],
    &["npm", "run", "build"],
    &["npm", "run", "lint"],
    &["cargo", "build"],
    &["cargo", "check"],
    &["cargo", "clippy"],
    &["cargo", "fmt"],
    &["go", "build"],
    &["go", "vet"],
    &["ruff", "check"],
    &["ruff", "format"],
    &["mypy"],
    &["npm", "start"],
    &["npm", "run", "dev"],
    &["npm", "run", "start"],
    &["python", "-m", "http.server"],
    &["python3", "-m", "http.server"],
    &["uvicorn"],
    &["flask", "run"],
    &["git", "status"],
    &["git", "diff"],
    &["git", "log"],
    &["git", "show"],
];

impl Policy {
    /// Parses a policy from TOML and validates it.
    pub fn from_toml(text: &str) -> Result<Self, PolicyError> {
        let policy: Self = parse_toml("policy", text)?;
        policy.validate()?;
        Ok(policy)
    }

    /// Parses a policy from JSON (the body of a session request) and validates it.
    pub fn from_json(text: &str) -> Result<Self, PolicyError> {
        let policy: Self = parse_json("policy", text)?;
        policy.validate()?;
        Ok(policy)
    }

    /// Checks what the types cannot: limits are positive, names are known, paths absolute,
    /// rule ids unique, and every rule does what its examples say.
    pub fn validate(&self) -> Result<(), PolicyError> {
        for (field, value) in [
            ("session_ttl_seconds", self.session_ttl_seconds),
            ("max_execution_seconds", self.max_execution_seconds),
            ("max_output_bytes", self.max_output_bytes),
            ("max_memory_mb", self.max_memory_mb),
            ("call_budget", self.call_budget),
        ] {
            if value == 0 {
                return Err(PolicyError::Zero { field });
            }
        }
        for (index, name) in self.tools.iter().enumerate() {
            if name != "*" && !catalog::is_tool(name) {
                return Err(PolicyError::UnknownTool {
                    field: format!("tools[{index}]"),
                    name: name.clone(),
                });
            }
        }
        for (index, name) in self.run_code_languages.iter().enumerate() {
            if !LANGUAGES.contains(&name.as_str()) {
                return Err(PolicyError::UnknownLanguage {
                    field: format!("run_code_languages[{index}]"),
                    name: name.clone(),
                });
            }
        }
        for (index, path) in self.writable_paths.iter().enumerate() {
            if normalize(path).is_none() {
                return Err(PolicyError::RelativePath {
                    field: format!("writable_paths[{index}]"),
                    path: path.clone(),
                });
            }
        }
        validate_rules(&self.rules)
    }

    /// Whether read tools must not return the file at `path`. The gateway asks this for each
    /// file inside directory operations (search, export), where no single call names it.
    pub fn conceals(&self, path: &str) -> bool {
        !self.read_secrets && is_secret(path)
    }

    /// Whether the session offers `tool` at all: it is in `tools`, and for `shell`, the
    /// policy allows a shell. The gateway lists only these (MCP `tools/list`).
    pub fn offers(&self, tool: &str) -> bool {
        (tool != SHELL_TOOL || self.shell) && self.tools.iter().any(|t| t == "*" || t == tool)
    }

    /// The known tools this session offers, in catalogue order.
    pub fn offered_tools(&self) -> Vec<&'static str> {
        TOOLS.into_iter().filter(|tool| self.offers(tool)).collect()
    }
}

pub(crate) fn validate_rules(rules: &[Rule]) -> Result<(), PolicyError> {
    let mut seen = std::collections::HashSet::new();
    for rule in rules {
        let id = &rule.id;
        let well_formed = !id.is_empty()
            && id
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-'));
        if !well_formed {
            return Err(PolicyError::InvalidRuleId { id: id.clone() });
        }
        if id == "default" || BUILTIN_RULES.contains(&id.as_str()) {
            return Err(PolicyError::ReservedRuleId { id: id.clone() });
        }
        if !seen.insert(id.as_str()) {
            return Err(PolicyError::DuplicateRuleId { id: id.clone() });
        }
        if rule.decision == Decision::Allow {
            return Err(PolicyError::AllowRule { id: id.clone() });
        }
        if let Some(glob) = &rule.tool
            && !TOOLS.iter().any(|tool| glob.is_match(tool))
        {
            return Err(PolicyError::NoSuchTool {
                id: id.clone(),
                pattern: glob.as_str().to_owned(),
            });
        }
        check_examples(rule)?;
    }
    Ok(())
}

fn check_examples(rule: &Rule) -> Result<(), PolicyError> {
    let lists = [
        ("matches", &rule.examples.matches, true),
        ("not_matches", &rule.examples.not_matches, false),
    ];
    for (list, calls, should_match) in lists {
        for (index, call) in calls.iter().enumerate() {
            // An example naming a tool that does not exist would pass `not_matches` for the
            // wrong reason, so typos there are errors too.
            if !catalog::is_tool(&call.tool) {
                return Err(PolicyError::ExampleTool {
                    id: rule.id.clone(),
                    list,
                    index,
                    tool: call.tool.clone(),
                });
            }
            match (rule.matches(call), should_match) {
                (false, true) => {
                    return Err(PolicyError::ExampleNotMatched {
                        id: rule.id.clone(),
                        index,
                    });
                }
                (true, false) => {
                    return Err(PolicyError::ExampleMatched {
                        id: rule.id.clone(),
                        index,
                    });
                }
                (true, true) | (false, false) => {}
            }
        }
    }
    Ok(())
}

/// Parses TOML through `serde_path_to_error`, so an error names the field it is about.
pub(crate) fn parse_toml<T: DeserializeOwned>(
    document: &'static str,
    text: &str,
) -> Result<T, PolicyError> {
    let deserializer = toml::Deserializer::parse(text).map_err(|source| PolicyError::Toml {
        document,
        path: ".".to_owned(),
        source: Box::new(source),
    })?;
    serde_path_to_error::deserialize(deserializer).map_err(|err| PolicyError::Toml {
        document,
        path: err.path().to_string(),
        source: Box::new(err.into_inner()),
    })
}

/// Parses JSON through `serde_path_to_error`, so an error names the field it is about.
pub(crate) fn parse_json<T: DeserializeOwned>(
    document: &'static str,
    text: &str,
) -> Result<T, PolicyError> {
    let mut deserializer = serde_json::Deserializer::from_str(text);
    let value =
        serde_path_to_error::deserialize(&mut deserializer).map_err(|err| PolicyError::Json {
            document,
            path: err.path().to_string(),
            source: err.into_inner(),
        })?;
    deserializer.end().map_err(|source| PolicyError::Json {
        document,
        path: ".".to_owned(),
        source,
    })?;
    Ok(value)
}
