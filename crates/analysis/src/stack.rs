//! `detect_stack`: what a project is made of, from its file listing and the contents of
//! its manifests — languages, package managers, frameworks — and the commands that would
//! install its dependencies, test it and run it.
//!
//! The gateway lists the repository (skipping [`crate::is_ignored`] folders), asks
//! [`wants_contents`] which files to read, reads those (up to [`MAX_MANIFEST_BYTES`]) and
//! passes everything to [`detect_stack`]. Nothing here reads a file or runs a command; the
//! commands are suggestions, as argument vectors for `run_command`.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

use serde::Serialize;

use crate::search::is_ignored;

/// Manifest contents larger than this are not parsed (the file still counts as present).
pub const MAX_MANIFEST_BYTES: usize = 512 * 1024;

/// One file of the project: its path relative to the project root, and for manifests (see
/// [`wants_contents`]) its contents.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StackInput<'a> {
    pub path: &'a str,
    pub contents: Option<&'a str>,
}

impl<'a> StackInput<'a> {
    /// A file whose contents are not needed.
    pub fn path(path: &'a str) -> Self {
        Self {
            path,
            contents: None,
        }
    }

    /// A manifest with its contents.
    pub fn with_contents(path: &'a str, contents: &'a str) -> Self {
        Self {
            path,
            contents: Some(contents),
        }
    }
}

/// Manifest file names whose contents [`detect_stack`] reads. `requirements*.txt` counts too.
pub const CONTENT_MANIFESTS: &[&str] = &[
    "package.json",
    "pyproject.toml",
    "setup.py",
    "setup.cfg",
    "Pipfile",
    "Cargo.toml",
    "go.mod",
    "pom.xml",
    "build.gradle",
    "build.gradle.kts",
    "Gemfile",
    "composer.json",
    "Makefile",
];

/// Whether [`detect_stack`] wants the contents of the file at `path` (a manifest outside
/// ignored folders).
pub fn wants_contents(path: &str) -> bool {
    let path = normalize(path);
    if is_ignored(Path::new(path)) {
        return false;
    }
    let name = file_name(path);
    CONTENT_MANIFESTS.contains(&name) || is_requirements(name)
}

/// The paths among `paths` whose contents [`detect_stack`] wants, in the order given.
pub fn manifests_wanted<'a>(paths: impl IntoIterator<Item = &'a str>) -> Vec<&'a str> {
    paths.into_iter().filter(|p| wants_contents(p)).collect()
}

/// What a project is made of.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize)]
pub struct Stack {
    /// Languages by number of source files, most first.
    pub languages: Vec<LanguageFiles>,
    pub package_managers: Vec<Detected>,
    pub frameworks: Vec<Detected>,
    /// Suggested commands, per project directory, in the order install, build, test, run.
    pub commands: Vec<SuggestedCommand>,
    /// Manifest and lock files found.
    pub manifests: Vec<String>,
    /// Dockerfiles and compose files found.
    pub containers: Vec<String>,
    /// Manifests that could not be read (too large, not valid JSON/TOML).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub notes: Vec<String>,
}

/// A language and how many files of it there are.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct LanguageFiles {
    pub language: String,
    pub files: usize,
}

/// A package manager or framework, where it applies and why it was detected.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Serialize)]
pub struct Detected {
    pub name: String,
    /// The project directory, relative to the root (`.` for the root itself).
    pub dir: String,
    /// The file that showed it.
    pub evidence: String,
}

/// What a suggested command is for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Purpose {
    Install,
    Build,
    Test,
    Run,
}

/// A command to run in `dir`, as an argument vector.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct SuggestedCommand {
    pub purpose: Purpose,
    pub dir: String,
    pub argv: Vec<String>,
    /// Why this command: the manifest, script or lock file behind it.
    pub reason: String,
}

/// Source file extensions and the language they count for.
const SOURCE_EXTENSIONS: &[(&str, &str)] = &[
    ("py", "python"),
    ("js", "javascript"),
    ("mjs", "javascript"),
    ("cjs", "javascript"),
    ("jsx", "javascript"),
    ("ts", "typescript"),
    ("tsx", "typescript"),
    ("mts", "typescript"),
    ("cts", "typescript"),
    ("rs", "rust"),
    ("go", "go"),
    ("sh", "shell"),
    ("bash", "shell"),
    ("java", "java"),
    ("kt", "kotlin"),
    ("kts", "kotlin"),
    ("scala", "scala"),
    ("rb", "ruby"),
    ("php", "php"),
    ("c", "c"),
    ("h", "c"),
    ("cc", "c++"),
    ("cpp", "c++"),
    ("cxx", "c++"),
    ("hpp", "c++"),
    ("cs", "c#"),
    ("swift", "swift"),
    ("dart", "dart"),
    ("ex", "elixir"),
    ("exs", "elixir"),
    ("lua", "lua"),
    ("vue", "vue"),
    ("svelte", "svelte"),
];

/// Lock files and the package manager they show.
const LOCK_FILES: &[(&str, &str)] = &[
    ("pnpm-lock.yaml", "pnpm"),
    ("yarn.lock", "yarn"),
    ("bun.lockb", "bun"),
    ("bun.lock", "bun"),
    ("package-lock.json", "npm"),
    ("npm-shrinkwrap.json", "npm"),
    ("uv.lock", "uv"),
    ("poetry.lock", "poetry"),
    ("Pipfile.lock", "pipenv"),
    ("pdm.lock", "pdm"),
    ("Cargo.lock", "cargo"),
    ("go.sum", "go"),
    ("Gemfile.lock", "bundler"),
    ("composer.lock", "composer"),
];

const CONTAINER_FILES: &[&str] = &[
    "Dockerfile",
    "Containerfile",
    "docker-compose.yml",
    "docker-compose.yaml",
    "compose.yml",
    "compose.yaml",
];

/// npm packages and the framework or tool they show.
const NODE_FRAMEWORKS: &[(&str, &str)] = &[
    ("next", "next"),
    ("react", "react"),
    ("vue", "vue"),
    ("nuxt", "nuxt"),
    ("svelte", "svelte"),
    ("@sveltejs/kit", "sveltekit"),
    ("@angular/core", "angular"),
    ("express", "express"),
    ("fastify", "fastify"),
    ("koa", "koa"),
    ("hono", "hono"),
    ("@nestjs/core", "nestjs"),
    ("electron", "electron"),
    ("vite", "vite"),
    ("jest", "jest"),
    ("vitest", "vitest"),
    ("mocha", "mocha"),
    ("@playwright/test", "playwright"),
];

/// Python distributions and the framework or tool they show.
const PYTHON_FRAMEWORKS: &[(&str, &str)] = &[
    ("django", "django"),
    ("flask", "flask"),
    ("fastapi", "fastapi"),
    ("starlette", "starlette"),
    ("streamlit", "streamlit"),
    ("gradio", "gradio"),
    ("tornado", "tornado"),
    ("aiohttp", "aiohttp"),
    ("celery", "celery"),
    ("pytest", "pytest"),
];

/// Crates and the framework they show.
const RUST_FRAMEWORKS: &[(&str, &str)] = &[
    ("axum", "axum"),
    ("actix-web", "actix"),
    ("rocket", "rocket"),
    ("warp", "warp"),
    ("poem", "poem"),
    ("tokio", "tokio"),
    ("tauri", "tauri"),
    ("bevy", "bevy"),
    ("leptos", "leptos"),
];

/// Go module path prefixes and the framework they show.
const GO_FRAMEWORKS: &[(&str, &str)] = &[
    ("github.com/gin-gonic/gin", "gin"),
    ("github.com/labstack/echo", "echo"),
    ("github.com/gofiber/fiber", "fiber"),
    ("github.com/gorilla/mux", "gorilla-mux"),
    ("github.com/go-chi/chi", "chi"),
];

/// Gems and the framework they show.
const RUBY_FRAMEWORKS: &[(&str, &str)] = &[
    ("rails", "rails"),
    ("sinatra", "sinatra"),
    ("rspec", "rspec"),
];

/// Detects the project's stack. Files in ignored folders are left out; files without
/// contents count by name only.
pub fn detect_stack(files: &[StackInput<'_>]) -> Stack {
    let files: Vec<StackInput<'_>> = files
        .iter()
        .map(|f| StackInput {
            path: normalize(f.path),
            contents: f.contents,
        })
        .filter(|f| !f.path.is_empty() && !is_ignored(Path::new(f.path)))
        .collect();
    let mut stack = Stack::default();

    let mut counts: BTreeMap<&str, usize> = BTreeMap::new();
    for file in &files {
        if let Some(language) = extension(file.path)
            .and_then(|ext| SOURCE_EXTENSIONS.iter().find(|(e, _)| *e == ext))
            .map(|(_, language)| *language)
        {
            *counts.entry(language).or_default() += 1;
        }
    }
    let mut languages: Vec<LanguageFiles> = counts
        .into_iter()
        .map(|(language, files)| LanguageFiles {
            language: language.to_owned(),
            files,
        })
        .collect();
    languages.sort_by(|a, b| {
        b.files
            .cmp(&a.files)
            .then_with(|| a.language.cmp(&b.language))
    });
    stack.languages = languages;

    let all: BTreeSet<&str> = files.iter().map(|f| f.path).collect();
    let mut dirs: BTreeMap<&str, BTreeMap<&str, StackInput<'_>>> = BTreeMap::new();
    for file in &files {
        let name = file_name(file.path);
        let is_manifest = CONTENT_MANIFESTS.contains(&name)
            || is_requirements(name)
            || LOCK_FILES.iter().any(|(lock, _)| *lock == name);
        if is_manifest {
            stack.manifests.push(file.path.to_owned());
            dirs.entry(parent(file.path))
                .or_default()
                .insert(name, *file);
        }
        if CONTAINER_FILES.contains(&name) || name.starts_with("Dockerfile.") {
            stack.containers.push(file.path.to_owned());
        }
    }

    let workspaces: Vec<&str> = dirs
        .iter()
        .filter(|(_, names)| {
            names
                .get("Cargo.toml")
                .and_then(|f| f.contents)
                .is_some_and(|c| c.contains("[workspace]"))
        })
        .map(|(dir, _)| *dir)
        .collect();

    for (dir, names) in &dirs {
        let project = Project {
            dir,
            names,
            all: &all,
        };
        project.node(&mut stack);
        project.python(&mut stack);
        let workspace = workspaces
            .iter()
            .find(|w| *w != dir && (w.is_empty() || dir.starts_with(&format!("{w}/"))));
        match workspace {
            None => project.rust(&mut stack),
            Some(root) => project.workspace_member(root, &mut stack),
        }
        project.go(&mut stack);
        project.java(&mut stack);
        project.ruby(&mut stack);
        project.php(&mut stack);
        project.make(&mut stack);
    }
    stack.package_managers.sort();
    stack.package_managers.dedup();
    stack.frameworks.sort();
    stack.frameworks.dedup();
    stack.manifests.sort();
    stack.containers.sort();
    stack
}

/// The manifests of one directory, and every path of the project.
struct Project<'p, 'a> {
    dir: &'p str,
    names: &'p BTreeMap<&'a str, StackInput<'a>>,
    all: &'p BTreeSet<&'a str>,
}

impl<'a> Project<'_, 'a> {
    fn has(&self, name: &str) -> bool {
        self.names.contains_key(name)
    }

    fn path_of(&self, name: &str) -> String {
        join(self.dir, name)
    }

    /// Whether the project has a file at `rel`, relative to this directory.
    fn exists(&self, rel: &str) -> bool {
        self.all.contains(join(self.dir, rel).as_str())
    }

    /// The contents of a manifest, unless missing or too large (noted).
    fn contents(&self, name: &str, stack: &mut Stack) -> Option<&'a str> {
        let contents = self.names.get(name)?.contents?;
        if contents.len() > MAX_MANIFEST_BYTES {
            stack.notes.push(format!(
                "{} is over {MAX_MANIFEST_BYTES} bytes and was not read",
                self.path_of(name)
            ));
            return None;
        }
        Some(contents)
    }

    /// Files under this directory.
    fn files_below(&self) -> impl Iterator<Item = &'a str> + '_ {
        let prefix = if self.dir.is_empty() {
            String::new()
        } else {
            format!("{}/", self.dir)
        };
        self.all
            .iter()
            .copied()
            .filter(move |p| p.starts_with(&prefix))
    }

    fn shown_dir(&self) -> String {
        if self.dir.is_empty() {
            ".".to_owned()
        } else {
            self.dir.to_owned()
        }
    }

    fn detected(&self, name: &str, evidence: &str) -> Detected {
        Detected {
            name: name.to_owned(),
            dir: self.shown_dir(),
            evidence: self.path_of(evidence),
        }
    }

    fn command(
        &self,
        purpose: Purpose,
        argv: &[impl AsRef<str>],
        reason: String,
    ) -> SuggestedCommand {
        SuggestedCommand {
            purpose,
            dir: self.shown_dir(),
            argv: argv.iter().map(|a| a.as_ref().to_owned()).collect(),
            reason,
        }
    }

    fn frameworks(
        &self,
        stack: &mut Stack,
        deps: &BTreeSet<String>,
        table: &[(&str, &str)],
        evidence: &str,
    ) {
        for (package, framework) in table {
            if deps.contains(*package) {
                stack.frameworks.push(self.detected(framework, evidence));
            }
        }
    }

    fn node(&self, stack: &mut Stack) {
        if !self.has("package.json") {
            return;
        }
        let manifest = self.contents("package.json", stack).and_then(|text| {
            match serde_json::from_str::<serde_json::Value>(text) {
                Ok(value) => Some(value),
                Err(error) => {
                    stack.notes.push(format!(
                        "{} is not valid JSON: {error}",
                        self.path_of("package.json")
                    ));
                    None
                }
            }
        });
        let lock = [
            "pnpm-lock.yaml",
            "yarn.lock",
            "bun.lockb",
            "bun.lock",
            "package-lock.json",
            "npm-shrinkwrap.json",
        ]
        .into_iter()
        .find(|lock| self.has(lock));
        let declared = manifest
            .as_ref()
            .and_then(|m| m.get("packageManager"))
            .and_then(|v| v.as_str())
            .and_then(|v| v.split('@').next())
            .filter(|pm| matches!(*pm, "npm" | "pnpm" | "yarn" | "bun"));
        let (pm, evidence) = match (lock, declared) {
            (Some(lock), _) => (lock_manager(lock), lock),
            (None, Some(pm)) => (pm, "package.json"),
            (None, None) => ("npm", "package.json"),
        };
        stack.package_managers.push(self.detected(pm, evidence));

        let mut deps = BTreeSet::new();
        if let Some(manifest) = &manifest {
            for section in [
                "dependencies",
                "devDependencies",
                "peerDependencies",
                "optionalDependencies",
            ] {
                if let Some(map) = manifest.get(section).and_then(|v| v.as_object()) {
                    deps.extend(map.keys().cloned());
                }
            }
        }
        self.frameworks(stack, &deps, NODE_FRAMEWORKS, "package.json");

        let install: &[&str] = match (pm, lock.is_some()) {
            ("pnpm", true) => &["pnpm", "install", "--frozen-lockfile"],
            ("yarn", true) => &["yarn", "install", "--frozen-lockfile"],
            ("bun", true) => &["bun", "install", "--frozen-lockfile"],
            ("npm", true) => &["npm", "ci"],
            (pm, _) => &[pm, "install"][..],
        };
        let reason = match lock {
            Some(lock) => format!("{} pins the dependencies", self.path_of(lock)),
            None => format!("{} lists the dependencies", self.path_of("package.json")),
        };
        stack
            .commands
            .push(self.command(Purpose::Install, install, reason));

        let scripts = manifest
            .as_ref()
            .and_then(|m| m.get("scripts"))
            .and_then(|s| s.as_object());
        let script = |name: &str| {
            scripts
                .and_then(|s| s.get(name))
                .and_then(|v| v.as_str())
                .filter(|body| !body.contains("no test specified"))
        };
        let run_script = |name: &str| -> Vec<String> {
            match (pm, name) {
                ("npm" | "pnpm" | "yarn", "test" | "start") => strings(&[pm, name]),
                _ => strings(&[pm, "run", name]),
            }
        };
        let reason_for = |name: &str, body: &str| {
            format!(
                "script {name:?} of {}: {body}",
                self.path_of("package.json")
            )
        };
        if let Some(body) = script("build") {
            stack.commands.push(self.command(
                Purpose::Build,
                &run_script("build"),
                reason_for("build", body),
            ));
        }
        if let Some(body) = script("test") {
            stack.commands.push(self.command(
                Purpose::Test,
                &run_script("test"),
                reason_for("test", body),
            ));
        }
        if let Some((name, body)) = ["dev", "start", "serve"]
            .into_iter()
            .find_map(|name| script(name).map(|body| (name, body)))
        {
            stack.commands.push(self.command(
                Purpose::Run,
                &run_script(name),
                reason_for(name, body),
            ));
        }
    }

    fn python(&self, stack: &mut Stack) {
        let requirements: Vec<&str> = self
            .names
            .keys()
            .copied()
            .filter(|n| is_requirements(n))
            .collect();
        let markers = [
            "pyproject.toml",
            "setup.py",
            "setup.cfg",
            "Pipfile",
            "uv.lock",
            "poetry.lock",
            "pdm.lock",
        ];
        if requirements.is_empty() && !markers.iter().any(|m| self.has(m)) {
            return;
        }
        let mut deps = BTreeSet::new();
        let mut evidence_of_deps = "";
        let pyproject =
            self.contents("pyproject.toml", stack).and_then(|text| {
                match toml::from_str::<toml::Table>(text) {
                    Ok(table) => Some(table),
                    Err(error) => {
                        stack.notes.push(format!(
                            "{} is not valid TOML: {}",
                            self.path_of("pyproject.toml"),
                            error.message()
                        ));
                        None
                    }
                }
            });
        if let Some(table) = &pyproject {
            python_pyproject_deps(table, &mut deps);
            evidence_of_deps = "pyproject.toml";
        }
        for name in &requirements {
            if let Some(text) = self.contents(name, stack) {
                for line in text.lines() {
                    let line = line.split('#').next().unwrap_or_default().trim();
                    if line.is_empty() || line.starts_with('-') {
                        continue;
                    }
                    deps.insert(requirement_name(line));
                }
                if evidence_of_deps.is_empty() {
                    evidence_of_deps = name;
                }
            }
        }
        if let Some(text) = self.contents("Pipfile", stack)
            && let Ok(table) = toml::from_str::<toml::Table>(text)
        {
            for section in ["packages", "dev-packages"] {
                if let Some(map) = table.get(section).and_then(|v| v.as_table()) {
                    deps.extend(map.keys().map(|k| normalize_dist(k)));
                }
            }
            if evidence_of_deps.is_empty() {
                evidence_of_deps = "Pipfile";
            }
        }
        for name in ["setup.py", "setup.cfg"] {
            if let Some(text) = self.contents(name, stack) {
                // No Python is run: quoted names of known frameworks are taken as dependencies.
                for (package, _) in PYTHON_FRAMEWORKS {
                    if text.contains(&format!("\"{package}"))
                        || text.contains(&format!("'{package}"))
                        || text.lines().any(|l| requirement_name(l.trim()) == *package)
                    {
                        deps.insert((*package).to_owned());
                    }
                }
                if evidence_of_deps.is_empty() {
                    evidence_of_deps = name;
                }
            }
        }

        let poetry = self.has("poetry.lock")
            || pyproject
                .as_ref()
                .and_then(|t| t.get("tool"))
                .and_then(|t| t.get("poetry"))
                .is_some();
        let (pm, evidence) = if self.has("uv.lock") {
            ("uv", "uv.lock")
        } else if poetry {
            (
                "poetry",
                if self.has("poetry.lock") {
                    "poetry.lock"
                } else {
                    "pyproject.toml"
                },
            )
        } else if self.has("Pipfile") {
            ("pipenv", "Pipfile")
        } else if self.has("pdm.lock") {
            ("pdm", "pdm.lock")
        } else {
            let evidence = requirements
                .first()
                .copied()
                .or_else(|| {
                    ["pyproject.toml", "setup.py", "setup.cfg"]
                        .into_iter()
                        .find(|m| self.has(m))
                })
                .unwrap_or("pyproject.toml");
            ("pip", evidence)
        };
        stack.package_managers.push(self.detected(pm, evidence));
        if !evidence_of_deps.is_empty() {
            self.frameworks(stack, &deps, PYTHON_FRAMEWORKS, evidence_of_deps);
        }

        let reason = format!("{} ({pm})", self.path_of(evidence));
        let managed: Option<&[&str]> = match pm {
            "uv" => Some(&["uv", "sync"]),
            "poetry" => Some(&["poetry", "install"]),
            "pipenv" => Some(&["pipenv", "install", "--dev"]),
            "pdm" => Some(&["pdm", "install"]),
            _ => None,
        };
        if let Some(argv) = managed {
            stack
                .commands
                .push(self.command(Purpose::Install, argv, reason));
        } else {
            let main_requirements = if requirements.contains(&"requirements.txt") {
                Some("requirements.txt")
            } else {
                requirements.first().copied()
            };
            if let Some(file) = main_requirements {
                stack.commands.push(self.command(
                    Purpose::Install,
                    &["python", "-m", "pip", "install", "-r", file],
                    format!("{} lists the dependencies", self.path_of(file)),
                ));
            }
            if self.has("pyproject.toml") || self.has("setup.py") || self.has("setup.cfg") {
                stack.commands.push(self.command(
                    Purpose::Install,
                    &["python", "-m", "pip", "install", "-e", "."],
                    "the project is an installable package".to_owned(),
                ));
            }
        }
        let runner: &[&str] = match pm {
            "uv" => &["uv", "run"],
            "poetry" => &["poetry", "run"],
            "pipenv" => &["pipenv", "run"],
            "pdm" => &["pdm", "run"],
            _ => &["python", "-m"],
        };
        let with_runner = |tail: &[&str]| -> Vec<String> {
            runner.iter().chain(tail).map(|a| (*a).to_owned()).collect()
        };

        let test_files = self.files_below().any(|p| {
            let name = file_name(p);
            let python = extension(name).is_some_and(|ext| ext.eq_ignore_ascii_case("py"));
            python && (name.starts_with("test_") || name.ends_with("_test.py"))
        });
        let pytest = deps.contains("pytest")
            || self.exists("conftest.py")
            || self.exists("pytest.ini")
            || pyproject
                .as_ref()
                .and_then(|t| t.get("tool"))
                .and_then(|t| t.get("pytest"))
                .is_some();
        if pytest {
            stack.commands.push(self.command(
                Purpose::Test,
                &with_runner(&["pytest"]),
                "pytest is configured or a dependency".to_owned(),
            ));
        } else if self.exists("manage.py") && deps.contains("django") {
            stack.commands.push(self.command(
                Purpose::Test,
                &["python", "manage.py", "test"],
                "a Django project".to_owned(),
            ));
        } else if test_files {
            stack.commands.push(self.command(
                Purpose::Test,
                &["python", "-m", "unittest", "discover"],
                "test_*.py files and no pytest".to_owned(),
            ));
        }

        let entry = ["main.py", "app.py", "server.py", "streamlit_app.py"]
            .into_iter()
            .find(|f| self.exists(f));
        let run: Option<(Vec<String>, String)> = if self.exists("manage.py") {
            Some((
                strings(&["python", "manage.py", "runserver"]),
                "manage.py: a Django project".to_owned(),
            ))
        } else if deps.contains("fastapi")
            && let Some(entry) = entry
        {
            let target = format!("{}:app", entry.trim_end_matches(".py"));
            Some((
                with_runner(&["uvicorn", &target]),
                format!("FastAPI app in {entry}"),
            ))
        } else if deps.contains("streamlit")
            && let Some(entry) = entry
        {
            Some((
                with_runner(&["streamlit", "run", entry]),
                format!("Streamlit app in {entry}"),
            ))
        } else if deps.contains("flask") {
            Some((with_runner(&["flask", "run"]), "a Flask app".to_owned()))
        } else {
            entry.map(|entry| {
                (
                    strings(&["python", entry]),
                    format!("{entry} is the entry point"),
                )
            })
        };
        if let Some((argv, reason)) = run {
            stack
                .commands
                .push(self.command(Purpose::Run, &argv, reason));
        }
    }

    fn rust(&self, stack: &mut Stack) {
        if !self.has("Cargo.toml") {
            return;
        }
        stack
            .package_managers
            .push(self.detected("cargo", "Cargo.toml"));
        let manifest = self.contents("Cargo.toml", stack).and_then(|text| {
            match toml::from_str::<toml::Table>(text) {
                Ok(table) => Some(table),
                Err(error) => {
                    stack.notes.push(format!(
                        "{} is not valid TOML: {}",
                        self.path_of("Cargo.toml"),
                        error.message()
                    ));
                    None
                }
            }
        });
        let mut deps = BTreeSet::new();
        let workspace = manifest.as_ref().and_then(|m| m.get("workspace"));
        if let Some(manifest) = &manifest {
            for section in ["dependencies", "dev-dependencies", "build-dependencies"] {
                if let Some(map) = manifest.get(section).and_then(|v| v.as_table()) {
                    deps.extend(map.keys().cloned());
                }
            }
            if let Some(map) = workspace
                .and_then(|w| w.get("dependencies"))
                .and_then(|v| v.as_table())
            {
                deps.extend(map.keys().cloned());
            }
        }
        self.frameworks(stack, &deps, RUST_FRAMEWORKS, "Cargo.toml");
        let reason = self.path_of("Cargo.toml");
        let scope: &[&str] = if workspace.is_some() {
            &["--workspace"]
        } else {
            &[]
        };
        let with_scope = |head: &[&'static str]| -> Vec<&str> {
            let mut argv = head.to_vec();
            argv.extend_from_slice(scope);
            argv
        };
        stack
            .commands
            .push(self.command(Purpose::Install, &["cargo", "fetch"], reason.clone()));
        stack.commands.push(self.command(
            Purpose::Build,
            &with_scope(&["cargo", "build"]),
            reason.clone(),
        ));
        stack
            .commands
            .push(self.command(Purpose::Test, &with_scope(&["cargo", "test"]), reason));
        let binary =
            self.exists("src/main.rs") || manifest.as_ref().is_some_and(|m| m.contains_key("bin"));
        if binary && manifest.as_ref().is_none_or(|m| m.contains_key("package")) {
            stack.commands.push(self.command(
                Purpose::Run,
                &["cargo", "run"],
                "src/main.rs or a [[bin]] target".to_owned(),
            ));
        }
    }

    /// A crate of a Cargo workspace: the workspace root builds and tests it; a binary gets
    /// its own `cargo run -p`.
    fn workspace_member(&self, root: &str, stack: &mut Stack) {
        if !self.has("Cargo.toml") || !self.exists("src/main.rs") {
            return;
        }
        let name = self
            .contents("Cargo.toml", stack)
            .and_then(|text| toml::from_str::<toml::Table>(text).ok())
            .and_then(|table| {
                let package = table.get("package")?;
                package.get("name")?.as_str().map(str::to_owned)
            })
            .unwrap_or_else(|| file_name(self.dir).to_owned());
        stack.commands.push(SuggestedCommand {
            purpose: Purpose::Run,
            dir: if root.is_empty() {
                ".".to_owned()
            } else {
                root.to_owned()
            },
            argv: strings(&["cargo", "run", "-p", &name]),
            reason: format!(
                "{} is a binary crate of the workspace",
                self.path_of("src/main.rs")
            ),
        });
    }

    fn go(&self, stack: &mut Stack) {
        if !self.has("go.mod") {
            return;
        }
        stack.package_managers.push(self.detected("go", "go.mod"));
        let mut deps = BTreeSet::new();
        if let Some(text) = self.contents("go.mod", stack) {
            for line in text.lines() {
                let line = line.trim().trim_start_matches("require").trim();
                if let Some(module) = line.split_whitespace().next() {
                    for (prefix, _) in GO_FRAMEWORKS {
                        if module.starts_with(prefix) {
                            deps.insert((*prefix).to_owned());
                        }
                    }
                }
            }
        }
        self.frameworks(stack, &deps, GO_FRAMEWORKS, "go.mod");
        let reason = self.path_of("go.mod");
        stack.commands.push(self.command(
            Purpose::Install,
            &["go", "mod", "download"],
            reason.clone(),
        ));
        stack.commands.push(self.command(
            Purpose::Build,
            &["go", "build", "./..."],
            reason.clone(),
        ));
        stack
            .commands
            .push(self.command(Purpose::Test, &["go", "test", "./..."], reason));
        if self.exists("main.go") {
            stack.commands.push(self.command(
                Purpose::Run,
                &["go", "run", "."],
                "main.go".to_owned(),
            ));
        } else {
            let prefix = join(self.dir, "cmd/");
            let mains: BTreeSet<&str> = self
                .files_below()
                .filter_map(|p| p.strip_prefix(prefix.as_str()))
                .filter_map(|rest| rest.strip_suffix("/main.go"))
                .filter(|name| !name.contains('/'))
                .collect();
            if let Some(name) = mains.first() {
                let target = format!("./cmd/{name}");
                stack.commands.push(self.command(
                    Purpose::Run,
                    &["go", "run", target.as_str()],
                    format!("cmd/{name}/main.go"),
                ));
            }
        }
    }

    fn java(&self, stack: &mut Stack) {
        let maven = self.has("pom.xml");
        let gradle_file = ["build.gradle.kts", "build.gradle"]
            .into_iter()
            .find(|f| self.has(f));
        if !maven && gradle_file.is_none() {
            return;
        }
        let (manifest, tool) = match gradle_file {
            Some(file) if !maven => (file, "gradle"),
            _ => ("pom.xml", "maven"),
        };
        stack.package_managers.push(self.detected(tool, manifest));
        let spring = self.contents(manifest, stack).is_some_and(|text| {
            text.contains("spring-boot") || text.contains("org.springframework.boot")
        });
        if spring {
            stack
                .frameworks
                .push(self.detected("spring-boot", manifest));
        }
        let reason = self.path_of(manifest);
        if tool == "maven" {
            let mvn = if self.exists("mvnw") { "./mvnw" } else { "mvn" };
            stack.commands.push(self.command(
                Purpose::Install,
                &[mvn, "-B", "-DskipTests", "install"],
                reason.clone(),
            ));
            stack
                .commands
                .push(self.command(Purpose::Test, &[mvn, "-B", "test"], reason));
            if spring {
                stack.commands.push(self.command(
                    Purpose::Run,
                    &[mvn, "spring-boot:run"],
                    "Spring Boot".to_owned(),
                ));
            }
        } else {
            let gradle = if self.exists("gradlew") {
                "./gradlew"
            } else {
                "gradle"
            };
            stack.commands.push(self.command(
                Purpose::Build,
                &[gradle, "build", "-x", "test"],
                reason.clone(),
            ));
            stack
                .commands
                .push(self.command(Purpose::Test, &[gradle, "test"], reason));
            if spring {
                stack.commands.push(self.command(
                    Purpose::Run,
                    &[gradle, "bootRun"],
                    "Spring Boot".to_owned(),
                ));
            }
        }
    }

    fn ruby(&self, stack: &mut Stack) {
        if !self.has("Gemfile") {
            return;
        }
        stack
            .package_managers
            .push(self.detected("bundler", "Gemfile"));
        let mut deps = BTreeSet::new();
        if let Some(text) = self.contents("Gemfile", stack) {
            for line in text.lines() {
                let line = line.trim();
                if let Some(rest) = line.strip_prefix("gem ") {
                    let name = rest
                        .trim()
                        .trim_start_matches(['"', '\''])
                        .split(['"', '\''])
                        .next()
                        .unwrap_or_default();
                    deps.insert(name.to_owned());
                }
            }
        }
        self.frameworks(stack, &deps, RUBY_FRAMEWORKS, "Gemfile");
        let reason = self.path_of("Gemfile");
        stack
            .commands
            .push(self.command(Purpose::Install, &["bundle", "install"], reason.clone()));
        let rails = deps.contains("rails");
        if deps.contains("rspec") || deps.contains("rspec-rails") {
            stack
                .commands
                .push(self.command(Purpose::Test, &["bundle", "exec", "rspec"], reason));
        } else if rails {
            stack
                .commands
                .push(self.command(Purpose::Test, &["bin/rails", "test"], reason));
        } else {
            stack.commands.push(self.command(
                Purpose::Test,
                &["bundle", "exec", "rake", "test"],
                reason,
            ));
        }
        if rails {
            stack.commands.push(self.command(
                Purpose::Run,
                &["bin/rails", "server"],
                "a Rails app".to_owned(),
            ));
        }
    }

    fn php(&self, stack: &mut Stack) {
        if !self.has("composer.json") {
            return;
        }
        stack
            .package_managers
            .push(self.detected("composer", "composer.json"));
        if let Some(text) = self.contents("composer.json", stack) {
            if text.contains("\"laravel/framework\"") {
                stack
                    .frameworks
                    .push(self.detected("laravel", "composer.json"));
            }
            if text.contains("\"symfony/framework-bundle\"") {
                stack
                    .frameworks
                    .push(self.detected("symfony", "composer.json"));
            }
        }
        stack.commands.push(self.command(
            Purpose::Install,
            &["composer", "install"],
            self.path_of("composer.json"),
        ));
    }

    fn make(&self, stack: &mut Stack) {
        let Some(text) = self.contents("Makefile", stack) else {
            return;
        };
        for (target, purpose) in [("build", Purpose::Build), ("test", Purpose::Test)] {
            let defined = text.lines().any(|line| {
                line.strip_prefix(target)
                    .is_some_and(|rest| rest.starts_with(':') && !rest.starts_with(":="))
            });
            let covered = stack
                .commands
                .iter()
                .any(|c| c.purpose == purpose && c.dir == self.shown_dir());
            if defined && !covered {
                stack.commands.push(self.command(
                    purpose,
                    &["make", target],
                    format!("target {target:?} of {}", self.path_of("Makefile")),
                ));
            }
        }
    }
}

fn strings(items: &[&str]) -> Vec<String> {
    items.iter().map(|s| (*s).to_owned()).collect()
}

fn python_pyproject_deps(table: &toml::Table, deps: &mut BTreeSet<String>) {
    let strings = |value: Option<&toml::Value>| -> Vec<String> {
        value
            .and_then(|v| v.as_array())
            .map(|items| {
                items
                    .iter()
                    .filter_map(|i| i.as_str())
                    .map(requirement_name)
                    .collect()
            })
            .unwrap_or_default()
    };
    if let Some(project) = table.get("project") {
        deps.extend(strings(project.get("dependencies")));
        if let Some(extras) = project
            .get("optional-dependencies")
            .and_then(|v| v.as_table())
        {
            for value in extras.values() {
                deps.extend(strings(Some(value)));
            }
        }
    }
    if let Some(groups) = table.get("dependency-groups").and_then(|v| v.as_table()) {
        for value in groups.values() {
            deps.extend(strings(Some(value)));
        }
    }
    if let Some(poetry) = table.get("tool").and_then(|t| t.get("poetry")) {
        if let Some(map) = poetry.get("dependencies").and_then(|v| v.as_table()) {
            deps.extend(map.keys().map(|k| normalize_dist(k)));
        }
        if let Some(map) = poetry.get("dev-dependencies").and_then(|v| v.as_table()) {
            deps.extend(map.keys().map(|k| normalize_dist(k)));
        }
        if let Some(groups) = poetry.get("group").and_then(|v| v.as_table()) {
            for group in groups.values() {
                if let Some(map) = group.get("dependencies").and_then(|v| v.as_table()) {
                    deps.extend(map.keys().map(|k| normalize_dist(k)));
                }
            }
        }
    }
}

/// The distribution name of a PEP 508 requirement (`Django[argon2]>=4.2; python_version>"3"`
/// → `django`).
fn requirement_name(requirement: &str) -> String {
    let end = requirement
        .find(|c: char| !(c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.')))
        .unwrap_or(requirement.len());
    normalize_dist(&requirement[..end])
}

/// Python distribution names compare lower case with `_` and `.` as `-`.
fn normalize_dist(name: &str) -> String {
    name.trim().to_ascii_lowercase().replace(['_', '.'], "-")
}

fn lock_manager(lock: &str) -> &'static str {
    LOCK_FILES
        .iter()
        .find(|(name, _)| *name == lock)
        .map_or("npm", |(_, manager)| *manager)
}

fn is_requirements(name: &str) -> bool {
    name.starts_with("requirements")
        && Path::new(name)
            .extension()
            .is_some_and(|ext| ext.eq_ignore_ascii_case("txt") || ext.eq_ignore_ascii_case("in"))
}

fn normalize(path: &str) -> &str {
    let mut path = path;
    while let Some(rest) = path.strip_prefix("./") {
        path = rest;
    }
    path.trim_start_matches('/')
}

fn file_name(path: &str) -> &str {
    path.rsplit('/').next().unwrap_or(path)
}

fn parent(path: &str) -> &str {
    path.rfind('/').map_or("", |i| &path[..i])
}

fn extension(path: &str) -> Option<&str> {
    let name = file_name(path);
    let dot = name.rfind('.')?;
    (dot > 0).then(|| &name[dot + 1..])
}

fn join(dir: &str, name: &str) -> String {
    if dir.is_empty() {
        name.to_owned()
    } else {
        format!("{dir}/{name}")
    }
}
