//! Python virtualenvs for the suites that drive Forge with published Python packages (the
//! ForgeVM SDK, the MCP SDK): one per requirements file, made once per target directory and
//! remade when the file changes.

use std::path::{Path, PathBuf};

/// The interpreter of virtualenv `name` (under the target directory) holding `requirements`.
pub(crate) fn venv(name: &str, requirements: &Path) -> PathBuf {
    let venv = Path::new(env!("CARGO_TARGET_TMPDIR")).join(name);
    let python = venv.join("bin/python");
    let stamp = venv.join("requirements.txt");
    let current = std::fs::read(requirements).unwrap();
    if python.exists() && std::fs::read(&stamp).ok().as_ref() == Some(&current) {
        return python;
    }
    let run = |program: &Path, args: &[&str]| {
        #[expect(
            clippy::disallowed_methods,
            reason = "prepares the Python environment of a test suite"
        )]
        let status = std::process::Command::new(program)
            .args(args)
            .status()
            .unwrap();
        assert!(status.success(), "{} {args:?} failed", program.display());
    };
    let _ = std::fs::remove_dir_all(&venv);
    run(
        Path::new("python3"),
        &["-m", "venv", venv.to_str().unwrap()],
    );
    run(
        &python,
        &[
            "-m",
            "pip",
            "install",
            "--quiet",
            "--disable-pip-version-check",
            "-r",
            requirements.to_str().unwrap(),
        ],
    );
    std::fs::write(&stamp, current).unwrap();
    python
}

/// A finished pytest run as one text (stdout, then stderr), for assertions and for the
/// failure message.
pub(crate) fn report(output: &std::process::Output) -> String {
    format!(
        "{}\n{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    )
}
