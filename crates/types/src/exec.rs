//! Running one command to completion: the request, its streamed output and its result.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

/// What to run: an argument vector (no shell involved) or a string for `/bin/sh -c`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Command {
    Argv(Vec<String>),
    Shell(String),
}

impl Command {
    /// The argument vector the process is started with.
    ///
    /// A shell string that is one simple command naming its program by absolute path
    /// (`/usr/bin/python3 -V`) is split here instead of started through `/bin/sh`: the shell
    /// would only split it on blanks and exec the program, and skipping it halves the cost
    /// of a short command.
    pub fn to_argv(&self) -> Vec<String> {
        match self {
            Self::Argv(argv) => argv.clone(),
            Self::Shell(script) => simple_command(script)
                .unwrap_or_else(|| vec!["/bin/sh".to_owned(), "-c".to_owned(), script.clone()]),
        }
    }

    /// A one-line rendering for listings and logs.
    pub fn display(&self) -> String {
        match self {
            Self::Argv(argv) => argv.join(" "),
            Self::Shell(script) => script.clone(),
        }
    }
}

/// The words of `script` if the shell would run it as exactly those words: blanks between
/// words made only of characters no shell gives a meaning to, the first an absolute path
/// (so no builtin, keyword, alias or `PATH` lookup is involved) without `=` (which would
/// make it an assignment).
fn simple_command(script: &str) -> Option<Vec<String>> {
    const PLAIN: &[u8] = b"_./-+,:@%=";
    let plain = |b: u8| b.is_ascii_alphanumeric() || PLAIN.contains(&b) || b == b' ' || b == b'\t';
    if !script.bytes().all(plain) {
        return None;
    }
    let words: Vec<String> = script
        .split([' ', '\t'])
        .filter(|word| !word.is_empty())
        .map(str::to_owned)
        .collect();
    let program = words.first()?;
    (program.starts_with('/') && !program.contains('=')).then_some(words)
}

/// Default cap on what is kept of each of stdout and stderr.
pub const DEFAULT_OUTPUT_LIMIT: u64 = 16 << 20;

/// A command to run inside a sandbox and wait for.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ExecRequest {
    pub command: Command,
    /// Added to (and overriding) the sandbox's environment.
    #[serde(default)]
    pub env: BTreeMap<String, String>,
    /// Working directory inside the sandbox; `/workspace` when absent.
    #[serde(default)]
    pub cwd: Option<String>,
    /// Bytes written to the process's stdin, which is then closed. Stdin is `/dev/null` when
    /// absent.
    #[serde(default, with = "serde_bytes")]
    pub stdin: Option<Vec<u8>>,
    /// Wall-clock limit; the whole process group is killed when it passes.
    #[serde(default)]
    pub timeout_ms: Option<u64>,
    /// Bytes kept of each of stdout and stderr; the rest is drained and dropped.
    #[serde(default)]
    pub output_limit: Option<u64>,
}

impl ExecRequest {
    pub fn new(command: Command) -> Self {
        Self {
            command,
            env: BTreeMap::new(),
            cwd: None,
            stdin: None,
            timeout_ms: None,
            output_limit: None,
        }
    }

    pub fn argv<I, S>(argv: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        Self::new(Command::Argv(argv.into_iter().map(Into::into).collect()))
    }

    pub fn shell(script: impl Into<String>) -> Self {
        Self::new(Command::Shell(script.into()))
    }

    #[must_use]
    pub fn with_stdin(mut self, stdin: impl Into<Vec<u8>>) -> Self {
        self.stdin = Some(stdin.into());
        self
    }

    #[must_use]
    pub fn with_timeout_ms(mut self, timeout_ms: u64) -> Self {
        self.timeout_ms = Some(timeout_ms);
        self
    }

    #[must_use]
    pub fn with_cwd(mut self, cwd: impl Into<String>) -> Self {
        self.cwd = Some(cwd.into());
        self
    }

    #[must_use]
    pub fn with_output_limit(mut self, limit: u64) -> Self {
        self.output_limit = Some(limit);
        self
    }

    pub fn output_limit(&self) -> u64 {
        self.output_limit.unwrap_or(DEFAULT_OUTPUT_LIMIT)
    }
}

/// Which output stream a chunk came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum StreamKind {
    Stdout,
    Stderr,
}

impl StreamKind {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Stdout => "stdout",
            Self::Stderr => "stderr",
        }
    }
}

/// How a command ended and what it printed.
#[expect(
    clippy::struct_excessive_bools,
    reason = "independent facts about one run, as clients read them"
)]
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct ExecResult {
    /// The exit status, or `128 + signal` when a signal ended the process (as a shell reports).
    pub exit_code: i32,
    /// The signal that ended the process, if one did.
    pub signal: Option<i32>,
    /// The kernel's OOM killer ended it because the sandbox's memory limit was reached.
    pub oom_killed: bool,
    /// The request's timeout passed and the process group was killed.
    pub timed_out: bool,
    pub duration_us: u64,
    /// Everything kept of stdout (empty when the output was streamed).
    #[serde(with = "serde_bytes")]
    pub stdout: Vec<u8>,
    #[serde(with = "serde_bytes")]
    pub stderr: Vec<u8>,
    /// More was written than the output limit allowed.
    pub stdout_truncated: bool,
    pub stderr_truncated: bool,
}

impl ExecResult {
    pub fn success(&self) -> bool {
        self.exit_code == 0 && self.signal.is_none()
    }
}

/// One item of a streamed exec: output as it is produced, then the result.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ExecEvent {
    Output {
        stream: StreamKind,
        #[serde(with = "serde_bytes")]
        data: Vec<u8>,
    },
    Exit(ExecResult),
}

#[cfg(test)]
mod tests {
    use super::*;
    use pretty_assertions::assert_eq;

    fn argv(script: &str) -> Vec<String> {
        Command::Shell(script.to_owned()).to_argv()
    }

    fn words(words: &[&str]) -> Vec<String> {
        words.iter().map(|w| (*w).to_owned()).collect()
    }

    #[test]
    fn a_simple_absolute_command_skips_the_shell() {
        assert_eq!(argv("/bin/true"), words(&["/bin/true"]));
        assert_eq!(
            argv("  /usr/bin/python3\t-m  http.server 8000 --bind=127.0.0.1 "),
            words(&[
                "/usr/bin/python3",
                "-m",
                "http.server",
                "8000",
                "--bind=127.0.0.1"
            ])
        );
    }

    #[test]
    fn anything_the_shell_would_interpret_goes_through_it() {
        for script in [
            "true",
            "echo -e x",
            "/bin/echo $HOME",
            "/bin/echo 'a b'",
            "/bin/ls *",
            "/bin/true; /bin/false",
            "/bin/true\n/bin/false",
            "/bin/true && /bin/false",
            "/bin/echo ~",
            "/bin/echo # comment",
            "/bin/echo {a,b}",
            "/bin/cat < /etc/hostname",
            "/bin/echo x > /tmp/y",
            "/bin/echo a\\ b",
            "FOO=1 /bin/env",
            "/bin/FOO=1",
            "",
            "   ",
        ] {
            assert_eq!(
                argv(script),
                words(&["/bin/sh", "-c", script]),
                "{script:?} must go through the shell"
            );
        }
    }
}
