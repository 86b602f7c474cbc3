//! The operator's ceilings: the most any session may get, whatever its client asks for.
//!
//! ARF took the client's policy as given, so a caller could ask for a timeout of 10^9
//! seconds. Here the server narrows every client-supplied policy with [`Policy::within`]
//! before using it: each limit is the smaller of the two, each allowlist the intersection,
//! and the shell, secrets and network only as wide as both allow. The operator's rules are
//! added in front of the client's, so they always apply.

use serde::{Deserialize, Serialize};

use crate::catalog::LANGUAGES;
use crate::host::HostPattern;
use crate::path::{narrower, normalize};
use crate::policy::{
    Network, Policy, PolicyError, default_languages, default_writable_paths, parse_json, parse_toml,
};
use crate::rule::Rule;

/// Operator maxima, with the same fields as [`Policy`]. Defaults are generous limits that
/// still end runaway sessions, every tool but no shell and no secrets, any public network,
/// any command: clients get their own defaults unless they ask for more, and can only ask
/// for up to these.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Ceilings {
    pub session_ttl_seconds: u64,
    pub max_execution_seconds: u64,
    pub max_output_bytes: u64,
    pub max_memory_mb: u64,
    pub call_budget: u64,
    pub network: Network,
    pub tools: Vec<String>,
    pub writable_paths: Vec<String>,
    pub shell: bool,
    pub read_secrets: bool,
    pub run_code_languages: Vec<String>,
    pub commands: Vec<Vec<String>>,
    /// Rules every session gets, evaluated before the client's own.
    pub rules: Vec<Rule>,
}

impl Default for Ceilings {
    fn default() -> Self {
        Self {
            session_ttl_seconds: 24 * 3600,
            max_execution_seconds: 600,
            max_output_bytes: 10 * 1024 * 1024,
            max_memory_mb: 4096,
            call_budget: 10_000,
            network: Network::Open,
            tools: vec!["*".to_owned()],
            writable_paths: default_writable_paths(),
            shell: false,
            read_secrets: false,
            run_code_languages: default_languages(),
            commands: vec![Vec::new()],
            rules: Vec::new(),
        }
    }
}

impl Ceilings {
    /// Parses ceilings from TOML (the operator's configuration) and validates them.
    pub fn from_toml(text: &str) -> Result<Self, PolicyError> {
        let ceilings: Self = parse_toml("ceilings", text)?;
        ceilings.validate()?;
        Ok(ceilings)
    }

    /// Parses ceilings from JSON and validates them.
    pub fn from_json(text: &str) -> Result<Self, PolicyError> {
        let ceilings: Self = parse_json("ceilings", text)?;
        ceilings.validate()?;
        Ok(ceilings)
    }

    /// The same checks as [`Policy::validate`], with the same field names in errors.
    pub fn validate(&self) -> Result<(), PolicyError> {
        self.widest_policy().validate()
    }

    /// The widest policy these ceilings allow: what a session gets when the operator opens
    /// everything the ceilings permit, and what [`Policy::within`] never exceeds.
    pub fn widest_policy(&self) -> Policy {
        Policy {
            session_ttl_seconds: self.session_ttl_seconds,
            max_execution_seconds: self.max_execution_seconds,
            max_output_bytes: self.max_output_bytes,
            max_memory_mb: self.max_memory_mb,
            call_budget: self.call_budget,
            network: self.network.clone(),
            tools: self.tools.clone(),
            writable_paths: self.writable_paths.clone(),
            shell: self.shell,
            read_secrets: self.read_secrets,
            run_code_languages: self.run_code_languages.clone(),
            commands: self.commands.clone(),
            rules: self.rules.clone(),
        }
    }
}

impl Policy {
    /// This policy narrowed to what `ceilings` allow. The server applies it to every
    /// client-supplied policy (and to the default one) before a session starts, so no
    /// session is ever wider than its operator's ceilings.
    ///
    /// For every call, the result decides at least as strictly as this policy and as
    /// [`Ceilings::widest_policy`] each would: limits are the minimum; tools, languages,
    /// commands, writable paths and allowlisted hosts are intersections (a command prefix or
    /// path that refines one on the other side is kept, since it is inside both); the shell
    /// and secrets only when both allow them; the network mode the narrower of the two. The
    /// ceilings' rules come first, then this policy's, minus exact copies of the ceilings'
    /// (so applying the same ceilings twice changes nothing).
    #[must_use]
    pub fn within(&self, ceilings: &Ceilings) -> Policy {
        let mut rules = ceilings.rules.clone();
        rules.extend(
            self.rules
                .iter()
                .filter(|rule| !ceilings.rules.contains(rule))
                .cloned(),
        );
        Policy {
            session_ttl_seconds: self.session_ttl_seconds.min(ceilings.session_ttl_seconds),
            max_execution_seconds: self
                .max_execution_seconds
                .min(ceilings.max_execution_seconds),
            max_output_bytes: self.max_output_bytes.min(ceilings.max_output_bytes),
            max_memory_mb: self.max_memory_mb.min(ceilings.max_memory_mb),
            call_budget: self.call_budget.min(ceilings.call_budget),
            network: meet_network(&self.network, &ceilings.network),
            tools: meet_tools(&self.tools, &ceilings.tools),
            writable_paths: meet_paths(&self.writable_paths, &ceilings.writable_paths),
            shell: self.shell && ceilings.shell,
            read_secrets: self.read_secrets && ceilings.read_secrets,
            run_code_languages: LANGUAGES
                .iter()
                .filter(|language| {
                    self.run_code_languages.iter().any(|l| l == *language)
                        && ceilings.run_code_languages.iter().any(|l| l == *language)
                })
                .map(|language| (*language).to_owned())
                .collect(),
            commands: meet_commands(&self.commands, &ceilings.commands),
            rules,
        }
    }
}

fn push_unique<T: PartialEq>(list: &mut Vec<T>, item: T) {
    if !list.contains(&item) {
        list.push(item);
    }
}

fn meet_tools(client: &[String], ceiling: &[String]) -> Vec<String> {
    let is_star = |list: &[String]| list.iter().any(|tool| tool == "*");
    let (base, other) = match (is_star(client), is_star(ceiling)) {
        (true, true) => return vec!["*".to_owned()],
        (true, false) => (ceiling, None),
        (false, true) => (client, None),
        (false, false) => (client, Some(ceiling)),
    };
    let mut tools = Vec::new();
    for tool in base {
        if other.is_none_or(|other| other.contains(tool)) {
            push_unique(&mut tools, tool.clone());
        }
    }
    tools
}

fn meet_paths(client: &[String], ceiling: &[String]) -> Vec<String> {
    let mut paths = Vec::new();
    for mine in client.iter().filter_map(|path| normalize(path)) {
        for theirs in ceiling.iter().filter_map(|path| normalize(path)) {
            if let Some(both) = narrower(&mine, &theirs) {
                push_unique(&mut paths, both.to_owned());
            }
        }
    }
    paths
}

fn meet_commands(client: &[Vec<String>], ceiling: &[Vec<String>]) -> Vec<Vec<String>> {
    let mut commands = Vec::new();
    for mine in client {
        for theirs in ceiling {
            if mine.starts_with(theirs) {
                push_unique(&mut commands, mine.clone());
            } else if theirs.starts_with(mine) {
                push_unique(&mut commands, theirs.clone());
            }
        }
    }
    commands
}

fn meet_network(client: &Network, ceiling: &Network) -> Network {
    match (client, ceiling) {
        (Network::None, _) | (_, Network::None) => Network::None,
        (Network::Open, Network::Open) => Network::Open,
        (Network::Open, Network::Allowlist { hosts })
        | (Network::Allowlist { hosts }, Network::Open) => Network::Allowlist {
            hosts: hosts.clone(),
        },
        (Network::Allowlist { hosts: mine }, Network::Allowlist { hosts: theirs }) => {
            Network::Allowlist {
                hosts: meet_hosts(mine, theirs),
            }
        }
    }
}

/// Host patterns matched by both lists: each pattern on one side that some pattern on the
/// other side covers.
fn meet_hosts(client: &[HostPattern], ceiling: &[HostPattern]) -> Vec<HostPattern> {
    let mut hosts = Vec::new();
    for (side, other) in [(client, ceiling), (ceiling, client)] {
        for pattern in side {
            if other.iter().any(|wider| wider.covers(pattern)) {
                push_unique(&mut hosts, pattern.clone());
            }
        }
    }
    hosts
}

#[cfg(test)]
mod tests {
    use super::*;
    use pretty_assertions::assert_eq;

    fn strings(items: &[&str]) -> Vec<String> {
        items.iter().map(|item| (*item).to_owned()).collect()
    }

    fn argvs(items: &[&[&str]]) -> Vec<Vec<String>> {
        items.iter().map(|argv| strings(argv)).collect()
    }

    fn hosts(items: &[&str]) -> Vec<HostPattern> {
        items
            .iter()
            .map(|item| HostPattern::new(item).unwrap())
            .collect()
    }

    #[test]
    fn defaults_are_valid_and_the_default_policy_fits_them() {
        Ceilings::default().validate().unwrap();
        Policy::default().validate().unwrap();
        assert_eq!(
            Policy::default().within(&Ceilings::default()),
            Policy::default()
        );
    }

    #[test]
    fn a_client_cannot_raise_anything() {
        let greedy = Policy {
            session_ttl_seconds: u64::MAX,
            max_execution_seconds: 1_000_000_000,
            max_output_bytes: u64::MAX,
            max_memory_mb: u64::MAX,
            call_budget: u64::MAX,
            network: Network::Open,
            tools: strings(&["*"]),
            writable_paths: strings(&["/"]),
            shell: true,
            read_secrets: true,
            run_code_languages: strings(&["shell", "python"]),
            commands: vec![Vec::new()],
            rules: Vec::new(),
        };
        let operator = Rule::new(
            "operator.ask-deletes",
            crate::Decision::Ask,
            "deletes are reviewed",
        )
        .tool(crate::Glob::new("delete_path").unwrap());
        let ceilings = Ceilings {
            session_ttl_seconds: 600,
            max_execution_seconds: 10,
            max_output_bytes: 1024,
            max_memory_mb: 256,
            call_budget: 50,
            network: Network::Allowlist {
                hosts: hosts(&["pypi.org", "*.pythonhosted.org"]),
            },
            tools: strings(&["read_file", "write_file", "shell", "run_command"]),
            writable_paths: strings(&["/workspace/project"]),
            shell: false,
            read_secrets: false,
            run_code_languages: strings(&["python", "node"]),
            commands: argvs(&[&["pytest"], &["npm", "test"]]),
            rules: vec![operator.clone()],
        };
        assert_eq!(
            greedy.within(&ceilings),
            Policy {
                session_ttl_seconds: 600,
                max_execution_seconds: 10,
                max_output_bytes: 1024,
                max_memory_mb: 256,
                call_budget: 50,
                network: Network::Allowlist {
                    hosts: hosts(&["pypi.org", "*.pythonhosted.org"]),
                },
                tools: strings(&["read_file", "write_file", "shell", "run_command"]),
                writable_paths: strings(&["/workspace/project"]),
                shell: false,
                read_secrets: false,
                run_code_languages: strings(&["python"]),
                commands: argvs(&[&["pytest"], &["npm", "test"]]),
                rules: vec![operator],
            }
        );
    }

    #[test]
    fn intersections_keep_what_both_sides_allow() {
        assert_eq!(
            meet_tools(
                &strings(&["read_file", "shell", "read_file"]),
                &strings(&["*"])
            ),
            strings(&["read_file", "shell"])
        );
        assert_eq!(
            meet_tools(
                &strings(&["read_file", "write_file"]),
                &strings(&["write_file", "run_code"])
            ),
            strings(&["write_file"])
        );
        assert_eq!(
            meet_paths(
                &strings(&["/workspace", "/tmp", "/etc"]),
                &strings(&["/workspace/app/", "/tmp/../tmp", "/var"])
            ),
            strings(&["/workspace/app", "/tmp"])
        );
        assert_eq!(
            meet_commands(
                &argvs(&[&["npm"], &["cargo", "test", "--release"], &["make"]]),
                &argvs(&[
                    &["npm", "test"],
                    &["npm", "run", "build"],
                    &["cargo", "test"]
                ])
            ),
            argvs(&[
                &["npm", "test"],
                &["npm", "run", "build"],
                &["cargo", "test", "--release"]
            ])
        );
        assert_eq!(
            meet_network(
                &Network::Allowlist {
                    hosts: hosts(&["*.example.org", "pypi.org", "10.0.0.0/8", "github.com"]),
                },
                &Network::Allowlist {
                    hosts: hosts(&["*.org", "github.com:443", "10.1.0.0/16"]),
                }
            ),
            Network::Allowlist {
                hosts: hosts(&["*.example.org", "pypi.org", "github.com:443", "10.1.0.0/16"]),
            }
        );
        assert_eq!(meet_network(&Network::Open, &Network::None), Network::None);
    }

    #[test]
    fn applying_the_same_ceilings_twice_changes_nothing() {
        let mut ceilings = Ceilings::default();
        ceilings
            .rules
            .push(Rule::new("operator.ask", crate::Decision::Ask, "review"));
        let once = Policy::default().within(&ceilings);
        assert_eq!(once.within(&ceilings), once);
    }
}
