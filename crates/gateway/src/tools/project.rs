//! Project tools: cloning and checking out repositories, detecting a stack, installing
//! dependencies and writing `.env` files — all inside the sandbox, under the session's
//! network policy (a session without network cannot clone or install), with option-like
//! arguments refused so nothing is injected into git, pip or npm.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use forge_policy::ToolCall;
use forge_types::ExecRequest;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use super::files::write;
use super::{Cx, Tool, WORKSPACE, exec, exec_value, invalid, join, resolve};
use crate::reply::ToolError;

/// Files `detect_stack` lists at most.
const STACK_FILES: usize = 5000;

/// Where Python packages come from, for the policy's network check.
const PYPI: &str = "pypi.org";
/// Where npm packages come from.
const NPM: &str = "registry.npmjs.org";

fn default_repo_dir() -> String {
    WORKSPACE.to_owned()
}

fn not_option(field: &str, value: &str) -> Result<(), ToolError> {
    if value.starts_with('-') {
        Err(invalid(
            field,
            "must not start with '-' (it would be read as an option)",
        ))
    } else if value.contains('\0') || value.contains('\n') {
        Err(invalid(field, "must not contain NUL or newline"))
    } else {
        Ok(())
    }
}

/// Clone a git repository over HTTPS.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct CloneRepo {
    /// https:// URL of the repository.
    repo_url: String,
    /// Directory to clone into; relative paths are under /workspace.
    target_dir: String,
}

impl CloneRepo {
    fn host(&self) -> Result<String, ToolError> {
        let rest = self
            .repo_url
            .strip_prefix("https://")
            .ok_or_else(|| invalid("repo_url", "must be an https:// URL"))?;
        let authority = rest.split('/').next().unwrap_or_default();
        if authority.contains('@') || authority.is_empty() {
            return Err(invalid("repo_url", "must name a host without credentials"));
        }
        not_option("repo_url", &self.repo_url)?;
        Ok(authority
            .rsplit_once(':')
            .map_or(authority, |(host, _)| host)
            .to_owned())
    }
}

impl Tool for CloneRepo {
    const NAME: &'static str = "clone_repo";
    const DESCRIPTION: &'static str = "Clone a git repository (https only, shallow) into the sandbox; needs a network policy that reaches its host.";

    fn plan(&self) -> Result<ToolCall, ToolError> {
        let host = self.host()?;
        Ok(ToolCall::new(Self::NAME)
            .destination(host, Some(443))
            .write(resolve("target_dir", &self.target_dir)?))
    }

    async fn run(self, cx: &Cx<'_>) -> Result<Value, ToolError> {
        let target = resolve("target_dir", &self.target_dir)?;
        let request = ExecRequest::argv([
            "git",
            "clone",
            "--depth",
            "1",
            "--",
            &self.repo_url,
            &target,
        ]);
        let mut value = run_step(cx, request).await?;
        value["path"] = json!(target);
        Ok(value)
    }
}

/// Check out a branch, tag or commit.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct CheckoutRef {
    /// The repository; relative paths are under /workspace.
    repo_dir: String,
    /// Branch, tag or commit; anything starting with '-' is refused.
    #[serde(rename = "ref")]
    reference: String,
}

impl Tool for CheckoutRef {
    const NAME: &'static str = "checkout_ref";
    const DESCRIPTION: &'static str = "Check out a branch, tag or commit in a repository of the sandbox (local refs only; arguments that look like options are refused).";

    fn plan(&self) -> Result<ToolCall, ToolError> {
        not_option("ref", &self.reference)?;
        if self.reference.is_empty() {
            return Err(invalid("ref", "must not be empty"));
        }
        Ok(ToolCall::new(Self::NAME).write(resolve("repo_dir", &self.repo_dir)?))
    }

    async fn run(self, cx: &Cx<'_>) -> Result<Value, ToolError> {
        let dir = resolve("repo_dir", &self.repo_dir)?;
        let request = ExecRequest::argv([
            "git",
            "-C",
            &dir,
            "checkout",
            "--quiet",
            &self.reference,
            "--",
        ]);
        run_step(cx, request).await
    }
}

/// Detect a project's stack from its files.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct DetectStack {
    /// The project directory; relative paths are under /workspace.
    #[serde(default = "default_repo_dir")]
    repo_dir: String,
}

impl Tool for DetectStack {
    const NAME: &'static str = "detect_stack";
    const DESCRIPTION: &'static str = "Detect a project's languages, package managers and frameworks from its files and manifests.";

    fn plan(&self) -> Result<ToolCall, ToolError> {
        Ok(ToolCall::new(Self::NAME).read(resolve("repo_dir", &self.repo_dir)?))
    }

    async fn run(self, cx: &Cx<'_>) -> Result<Value, ToolError> {
        let dir = resolve("repo_dir", &self.repo_dir)?;
        let walked = super::files::walk(cx, &dir, STACK_FILES).await?;
        let mut files = Vec::new();
        for file in walked.files {
            let relative = file
                .path
                .strip_prefix(&dir)
                .map_or(file.path.as_str(), |rest| rest.trim_start_matches('/'))
                .to_owned();
            let contents = if crate::analysis::wants_contents(&relative)
                && file.size <= crate::analysis::MAX_MANIFEST_BYTES
            {
                cx.backend
                    .read_file(cx.sandbox, &file.path)
                    .await
                    .ok()
                    .map(|bytes| String::from_utf8_lossy(&bytes).into_owned())
            } else {
                None
            };
            files.push((relative, contents));
        }
        let mut value = crate::analysis::detect_stack(&files);
        value["repo_dir"] = json!(dir);
        Ok(value)
    }
}

/// Install a Node project's dependencies.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct InstallNodeDeps {
    /// The project directory; relative paths are under /workspace.
    #[serde(default = "default_repo_dir")]
    repo_dir: String,
    /// `npm ci` when a lockfile exists (the default), `npm install` otherwise.
    #[serde(default = "yes")]
    frozen_lockfile: bool,
}

fn yes() -> bool {
    true
}

impl Tool for InstallNodeDeps {
    const NAME: &'static str = "install_node_deps";
    const DESCRIPTION: &'static str = "Install a Node project's dependencies with npm (ci when a lockfile exists), without running package scripts; needs a network policy that reaches the npm registry.";

    fn plan(&self) -> Result<ToolCall, ToolError> {
        let dir = resolve("repo_dir", &self.repo_dir)?;
        Ok(ToolCall::new(Self::NAME)
            .write(join(&dir, "node_modules"))
            .destination(NPM, Some(443)))
    }

    async fn run(self, cx: &Cx<'_>) -> Result<Value, ToolError> {
        let dir = resolve("repo_dir", &self.repo_dir)?;
        let locked = cx
            .backend
            .stat(cx.sandbox, &join(&dir, "package-lock.json"))
            .await
            .is_ok();
        let verb = if self.frozen_lockfile && locked {
            "ci"
        } else {
            "install"
        };
        let request =
            ExecRequest::argv(["npm", verb, "--ignore-scripts", "--no-audit", "--no-fund"])
                .with_cwd(dir);
        let mut value = run_step(cx, request).await?;
        value["command"] = json!(format!("npm {verb}"));
        Ok(value)
    }
}

/// Install a Python project's requirements.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct InstallPythonDeps {
    /// The project directory; relative paths are under /workspace.
    #[serde(default = "default_repo_dir")]
    repo_dir: String,
    /// Requirements file, relative to repo_dir.
    #[serde(default = "requirements")]
    requirements_file: String,
}

fn requirements() -> String {
    "requirements.txt".to_owned()
}

impl InstallPythonDeps {
    fn paths(&self) -> Result<(String, String), ToolError> {
        let dir = resolve("repo_dir", &self.repo_dir)?;
        not_option("requirements_file", &self.requirements_file)?;
        let file = join(&dir, &self.requirements_file);
        if !forge_policy::path::is_within(&file, &dir) {
            return Err(invalid("requirements_file", "must be inside repo_dir"));
        }
        Ok((dir, file))
    }
}

impl Tool for InstallPythonDeps {
    const NAME: &'static str = "install_python_deps";
    const DESCRIPTION: &'static str = "Install a Python project's requirements file with pip into <repo_dir>/.pydeps; needs a network policy that reaches PyPI.";

    fn plan(&self) -> Result<ToolCall, ToolError> {
        let (dir, file) = self.paths()?;
        Ok(ToolCall::new(Self::NAME)
            .read(file)
            .write(join(&dir, ".pydeps"))
            .destination(PYPI, Some(443)))
    }

    async fn run(self, cx: &Cx<'_>) -> Result<Value, ToolError> {
        let (dir, file) = self.paths()?;
        let target = join(&dir, ".pydeps");
        let request = ExecRequest::argv([
            "python3",
            "-m",
            "pip",
            "install",
            "--disable-pip-version-check",
            "--no-input",
            "--target",
            &target,
            "-r",
            &file,
        ])
        .with_cwd(dir);
        let mut value = run_step(cx, request).await?;
        value["target"] = json!(target);
        Ok(value)
    }
}

/// A package ecosystem.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Serialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub(crate) enum Ecosystem {
    Python,
    Node,
}

/// Install one package.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct InstallPackage {
    ecosystem: Ecosystem,
    /// Package name (letters, digits, '.', '_', '-', and for npm a leading @scope/).
    package: String,
    /// An exact version.
    version: Option<String>,
}

impl InstallPackage {
    fn spec(&self) -> Result<String, ToolError> {
        let name_ok = |name: &str| {
            !name.is_empty()
                && !name.starts_with(['-', '.'])
                && name
                    .bytes()
                    .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-'))
        };
        let valid = match self.ecosystem {
            Ecosystem::Python => name_ok(&self.package),
            Ecosystem::Node => match self.package.strip_prefix('@') {
                Some(scoped) => scoped
                    .split_once('/')
                    .is_some_and(|(scope, name)| name_ok(scope) && name_ok(name)),
                None => name_ok(&self.package),
            },
        };
        if !valid {
            return Err(invalid("package", "is not a package name"));
        }
        let Some(version) = &self.version else {
            return Ok(self.package.clone());
        };
        let version_ok = !version.is_empty()
            && version
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-' | b'+'));
        if !version_ok {
            return Err(invalid("version", "is not an exact version"));
        }
        Ok(match self.ecosystem {
            Ecosystem::Python => format!("{}=={version}", self.package),
            Ecosystem::Node => format!("{}@{version}", self.package),
        })
    }
}

impl Tool for InstallPackage {
    const NAME: &'static str = "install_package";
    const DESCRIPTION: &'static str = "Install one Python package (pip, into /workspace/.pydeps) or Node package (npm, into /workspace/node_modules, without scripts); really installs, so it needs a network policy that reaches the registry.";

    fn plan(&self) -> Result<ToolCall, ToolError> {
        self.spec()?;
        let (dir, host) = match self.ecosystem {
            Ecosystem::Python => (".pydeps", PYPI),
            Ecosystem::Node => ("node_modules", NPM),
        };
        Ok(ToolCall::new(Self::NAME)
            .write(join(WORKSPACE, dir))
            .destination(host, Some(443)))
    }

    async fn run(self, cx: &Cx<'_>) -> Result<Value, ToolError> {
        let spec = self.spec()?;
        let request = match self.ecosystem {
            Ecosystem::Python => ExecRequest::argv([
                "python3",
                "-m",
                "pip",
                "install",
                "--disable-pip-version-check",
                "--no-input",
                "--target",
                "/workspace/.pydeps",
                "--",
                &spec,
            ]),
            Ecosystem::Node => ExecRequest::argv([
                "npm",
                "install",
                "--ignore-scripts",
                "--no-audit",
                "--no-fund",
                "--",
                &spec,
            ]),
        }
        .with_cwd(WORKSPACE);
        let mut value = run_step(cx, request).await?;
        value["package"] = json!(spec);
        Ok(value)
    }
}

/// Write a `.env` file.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct WriteEnvFile {
    /// The project directory; relative paths are under /workspace.
    #[serde(default = "default_repo_dir")]
    repo_dir: String,
    /// Variables: names of letters, digits and '_' (not starting with a digit); values on
    /// one line. Values are secrets: redacted from the ledger and from later outputs.
    env: BTreeMap<String, String>,
}

impl Tool for WriteEnvFile {
    const NAME: &'static str = "write_env_file";
    const DESCRIPTION: &'static str = "Write <repo_dir>/.env from a map of variables; the values are treated as secrets (redacted from the ledger and from later outputs).";
    const SECRET_FIELDS: &'static [&'static str] = &["env"];

    fn plan(&self) -> Result<ToolCall, ToolError> {
        for (key, value) in &self.env {
            let key_ok = !key.is_empty()
                && !key.starts_with(|c: char| c.is_ascii_digit())
                && key.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_');
            if !key_ok {
                return Err(invalid(
                    &format!("env.{key}"),
                    "a variable name is letters, digits and '_', not starting with a digit",
                ));
            }
            if value.contains(['\n', '\r', '\0']) {
                return Err(invalid(
                    &format!("env.{key}"),
                    "a value must be on one line",
                ));
            }
        }
        let dir = resolve("repo_dir", &self.repo_dir)?;
        Ok(ToolCall::new(Self::NAME).write(join(&dir, ".env")))
    }

    async fn run(self, cx: &Cx<'_>) -> Result<Value, ToolError> {
        let dir = resolve("repo_dir", &self.repo_dir)?;
        let path = join(&dir, ".env");
        cx.session.add_secrets(self.env.values().cloned());
        let mut text = String::new();
        for (key, value) in &self.env {
            // Quoted so spaces and '#' survive every dotenv parser.
            let quoted = value.replace('\\', "\\\\").replace('"', "\\\"");
            let _ = writeln!(text, "{key}=\"{quoted}\"");
        }
        write(cx, &path, text.into_bytes()).await?;
        Ok(json!({ "path": path, "count": self.env.len() }))
    }
}

/// Runs one project command to the end and describes it the way every project tool answers:
/// the command's output and exit, and `ok` when it succeeded.
async fn run_step(cx: &Cx<'_>, request: ExecRequest) -> Result<Value, ToolError> {
    let result = exec(cx, request, None).await?;
    let mut value = exec_value(cx, &result);
    value["ok"] = json!(result.success());
    Ok(value)
}
