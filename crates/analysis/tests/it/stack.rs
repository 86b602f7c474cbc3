//! `detect_stack` on realistic project listings, kept as snapshots.

use forge_analysis::{StackInput, detect_stack, manifests_wanted, wants_contents};
use pretty_assertions::assert_eq;

fn listing<'a>(paths: &[&'a str], contents: &[(&'a str, &'a str)]) -> Vec<StackInput<'a>> {
    paths
        .iter()
        .map(|path| match contents.iter().find(|(p, _)| p == path) {
            Some((_, text)) => StackInput::with_contents(path, text),
            None => StackInput::path(path),
        })
        .collect()
}

#[test]
fn next_app_with_pnpm() {
    let package = r#"{
  "name": "web",
  "packageManager": "pnpm@9.1.0",
  "scripts": { "dev": "next dev", "build": "next build", "start": "next start", "test": "vitest run", "lint": "next lint" },
  "dependencies": { "next": "14.2.3", "react": "18.3.1", "react-dom": "18.3.1" },
  "devDependencies": { "typescript": "5.4.5", "vitest": "1.6.0" }
}"#;
    let files = listing(
        &[
            "package.json",
            "pnpm-lock.yaml",
            "tsconfig.json",
            "next.config.mjs",
            "app/page.tsx",
            "app/layout.tsx",
            "lib/db.ts",
            "node_modules/next/package.json",
            "node_modules/react/index.js",
            ".next/server/app.js",
            "Dockerfile",
        ],
        &[("package.json", package)],
    );
    insta::assert_json_snapshot!("stack_next_pnpm", detect_stack(&files));
}

#[test]
fn django_with_requirements() {
    let requirements = "Django>=4.2,<5  # web\npsycopg[binary]==3.1.18\ngunicorn\n-r requirements-base.txt\npytest-django\npytest==8.2.0\n";
    let files = listing(
        &[
            "manage.py",
            "requirements.txt",
            "mysite/settings.py",
            "mysite/urls.py",
            "polls/models.py",
            "polls/tests/test_models.py",
            "polls/__pycache__/models.cpython-311.pyc",
            ".venv/lib/python3.11/site-packages/django/__init__.py",
            "docker-compose.yml",
        ],
        &[("requirements.txt", requirements)],
    );
    insta::assert_json_snapshot!("stack_django", detect_stack(&files));
}

#[test]
fn fastapi_with_uv() {
    let pyproject = r#"[project]
name = "api"
version = "0.1.0"
dependencies = ["fastapi[standard]>=0.110", "SQLAlchemy~=2.0", "uvicorn"]

[dependency-groups]
dev = ["pytest>=8", "ruff"]
"#;
    let files = listing(
        &[
            "pyproject.toml",
            "uv.lock",
            "main.py",
            "app/routes.py",
            "tests/test_routes.py",
        ],
        &[("pyproject.toml", pyproject)],
    );
    insta::assert_json_snapshot!("stack_fastapi_uv", detect_stack(&files));
}

#[test]
fn poetry_flask() {
    let pyproject = r#"[tool.poetry]
name = "svc"
version = "0.1.0"

[tool.poetry.dependencies]
python = "^3.11"
Flask = "^3.0"

[tool.poetry.group.dev.dependencies]
pytest = "^8.0"
"#;
    let files = listing(
        &[
            "pyproject.toml",
            "poetry.lock",
            "app.py",
            "tests/test_app.py",
        ],
        &[("pyproject.toml", pyproject)],
    );
    insta::assert_json_snapshot!("stack_poetry_flask", detect_stack(&files));
}

#[test]
fn rust_workspace_with_axum() {
    let root = "[workspace]\nmembers = [\"crates/*\"]\n\n[workspace.dependencies]\naxum = \"0.8\"\ntokio = { version = \"1\", features = [\"full\"] }\n";
    let server = "[package]\nname = \"server\"\n\n[dependencies]\naxum.workspace = true\n";
    let files = listing(
        &[
            "Cargo.toml",
            "Cargo.lock",
            "crates/server/Cargo.toml",
            "crates/server/src/main.rs",
            "crates/core/Cargo.toml",
            "crates/core/src/lib.rs",
            "target/debug/server",
            "scripts/release.sh",
        ],
        &[("Cargo.toml", root), ("crates/server/Cargo.toml", server)],
    );
    insta::assert_json_snapshot!("stack_rust_workspace", detect_stack(&files));
}

#[test]
fn go_gin_and_express_monorepo() {
    let go_mod = "module example.com/api\n\ngo 1.22\n\nrequire (\n\tgithub.com/gin-gonic/gin v1.10.0\n\tgithub.com/stretchr/testify v1.9.0\n)\n";
    let package = r#"{ "name": "web", "scripts": { "start": "node server.js", "test": "echo \"Error: no test specified\" && exit 1" }, "dependencies": { "express": "^4.19.2" } }"#;
    let files = listing(
        &[
            "api/go.mod",
            "api/go.sum",
            "api/cmd/server/main.go",
            "api/internal/handlers.go",
            "web/package.json",
            "web/package-lock.json",
            "web/server.js",
            "Makefile",
        ],
        &[
            ("api/go.mod", go_mod),
            ("web/package.json", package),
            (
                "Makefile",
                "test:\n\tcd api && go test ./...\nVERSION := 1\n",
            ),
        ],
    );
    insta::assert_json_snapshot!("stack_go_express_monorepo", detect_stack(&files));
}

#[test]
fn unreadable_manifests_are_noted() {
    let files = listing(
        &["package.json", "index.js"],
        &[("package.json", "{ not json")],
    );
    let stack = detect_stack(&files);
    assert_eq!(stack.notes.len(), 1);
    assert!(
        stack.notes[0].starts_with("package.json is not valid JSON"),
        "{:?}",
        stack.notes
    );
    assert_eq!(stack.package_managers[0].name, "npm");
}

#[test]
fn which_contents_are_wanted() {
    let paths = [
        "package.json",
        "package-lock.json",
        "requirements-dev.txt",
        "src/app.py",
        "api/go.mod",
        "node_modules/x/package.json",
        "./Cargo.toml",
        "Gemfile",
    ];
    assert_eq!(
        manifests_wanted(paths),
        [
            "package.json",
            "requirements-dev.txt",
            "api/go.mod",
            "./Cargo.toml",
            "Gemfile"
        ]
    );
    assert!(!wants_contents("README.md"));
}
