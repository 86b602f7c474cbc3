//! Naming languages: tool arguments and file names.

use std::path::Path;

use forge_analysis::Language;
use pretty_assertions::assert_eq;

#[test]
fn names_and_aliases() {
    let cases = [
        ("python", Language::Python),
        ("PY", Language::Python),
        ("js", Language::JavaScript),
        ("node", Language::JavaScript),
        ("ts", Language::TypeScript),
        ("tsx", Language::Tsx),
        ("rust", Language::Rust),
        ("go", Language::Go),
        ("bash", Language::Shell),
        ("sh", Language::Shell),
    ];
    for (name, language) in cases {
        assert_eq!(Language::from_name(name).unwrap(), language, "{name}");
    }
    for language in Language::ALL {
        assert_eq!(Language::from_name(language.as_str()).unwrap(), language);
        assert_eq!(
            serde_json::to_value(language).unwrap(),
            serde_json::json!(language.as_str())
        );
    }
}

#[test]
fn unknown_name_lists_the_supported_ones() {
    let error = Language::from_name("cobol").unwrap_err().to_string();
    assert!(
        error.starts_with("unknown language \"cobol\"; supported: python, py,"),
        "{error}"
    );
    assert!(error.contains("bash"), "{error}");
}

#[test]
fn paths_by_extension() {
    let cases = [
        ("src/app.py", Language::Python),
        ("web/index.mjs", Language::JavaScript),
        ("web/App.jsx", Language::JavaScript),
        ("web/api.ts", Language::TypeScript),
        ("web/App.tsx", Language::Tsx),
        ("src/main.rs", Language::Rust),
        ("cmd/main.go", Language::Go),
        ("scripts/build.SH", Language::Shell),
    ];
    for (path, language) in cases {
        assert_eq!(
            Language::from_path(Path::new(path)).unwrap(),
            language,
            "{path}"
        );
    }
    let error = Language::from_path(Path::new("Makefile"))
        .unwrap_err()
        .to_string();
    assert!(error.starts_with("no language for \"Makefile\""), "{error}");
}
