//! Search: regex and literal queries, caps per file and overall, binary files skipped,
//! invalid patterns named, and the ignore list.

use std::path::Path;

use forge_analysis::{SearchError, SearchQuery, is_ignored};
use pretty_assertions::assert_eq;

const APP: &str = "import os\n\ndef main():\n    print('TODO: main')\n    # todo: tests\n    return os.getcwd()  # TODO\n";

#[test]
fn regex_matches_with_positions() {
    let search = SearchQuery::regex(r"TODO\b").compile().unwrap();
    let found = search.search_bytes("app.py", APP.as_bytes());
    insta::assert_json_snapshot!("search_regex", found);
}

#[test]
fn options_change_what_matches() {
    let count = |query: SearchQuery| {
        query
            .compile()
            .unwrap()
            .search_bytes("app.py", APP.as_bytes())
            .matches
            .len()
    };
    assert_eq!(count(SearchQuery::regex("todo")), 1);
    assert_eq!(
        count(SearchQuery {
            case_insensitive: true,
            ..SearchQuery::regex("todo")
        }),
        3
    );
    assert_eq!(count(SearchQuery::fixed("os.getcwd()")), 1);
    assert_eq!(count(SearchQuery::regex("os.getcwd()")), 1);
    assert_eq!(count(SearchQuery::fixed("(")), 3);
    assert_eq!(
        count(SearchQuery {
            whole_word: true,
            ..SearchQuery::regex("ma")
        }),
        0
    );
    assert_eq!(
        count(SearchQuery {
            whole_word: true,
            ..SearchQuery::regex("main")
        }),
        2
    );
}

#[test]
fn columns_count_characters_and_long_lines_are_cut() {
    let query = SearchQuery {
        max_line_len: 10,
        ..SearchQuery::fixed("needle")
    };
    let line = format!("ééé needle {}\n", "x".repeat(100));
    let found = query
        .compile()
        .unwrap()
        .search_bytes("a.txt", line.as_bytes());
    assert_eq!(found.matches[0].column, 5);
    assert_eq!(found.matches[0].text, "ééé needle…");
}

#[test]
fn binary_content_is_skipped() {
    let search = SearchQuery::fixed("ELF").compile().unwrap();
    let found = search.search_bytes("a.out", b"\x7fELF\x02\x01\x01\x00\x00ELF\n");
    assert!(found.binary);
    assert!(found.matches.is_empty());
    let mut results = search.results();
    assert!(search.add_file(&mut results, "a.out", b"\x7fELF\x00"));
    assert!(search.add_file(&mut results, "notes.txt", b"an ELF file\n"));
    assert_eq!(
        (
            results.files_searched,
            results.binary_files_skipped,
            results.matches.len()
        ),
        (2, 1, 1)
    );
}

#[test]
fn invalid_utf8_is_shown_lossily() {
    let search = SearchQuery::fixed("name").compile().unwrap();
    let found = search.search_bytes("latin1.txt", b"name = caf\xe9\n");
    assert_eq!(found.matches[0].text, "name = caf\u{fffd}");
}

#[test]
fn caps_per_file_and_overall() {
    let query = SearchQuery {
        max_matches: 5,
        max_matches_per_file: 2,
        ..SearchQuery::regex("hit")
    };
    let search = query.compile().unwrap();
    let file = "hit\n".repeat(10);

    let one = search.search_bytes("a", file.as_bytes());
    assert_eq!((one.matches.len(), one.truncated), (2, true));

    let mut results = search.results();
    assert!(search.add_file(&mut results, "a", file.as_bytes()));
    assert!(search.add_file(&mut results, "b", file.as_bytes()));
    assert!(!search.add_file(&mut results, "c", file.as_bytes()));
    assert_eq!(results.matches.len(), 5);
    assert!(results.truncated);
    let paths: Vec<_> = results
        .matches
        .iter()
        .map(|m| (m.path.as_str(), m.line))
        .collect();
    assert_eq!(paths, [("a", 1), ("a", 2), ("b", 1), ("b", 2), ("c", 1)]);
    assert!(!search.add_file(&mut results, "d", file.as_bytes()));
    assert_eq!(results.files_searched, 3);
}

#[test]
fn no_truncation_when_everything_fits() {
    let search = SearchQuery::regex("hit").compile().unwrap();
    let mut results = search.results();
    assert!(search.add_file(&mut results, "a", b"hit\nmiss\nhit\n"));
    assert!(!results.truncated);
    assert_eq!(results.matches.len(), 2);
}

#[test]
fn bad_patterns_are_named() {
    let error = SearchQuery::regex("fn (").compile().unwrap_err();
    assert!(matches!(&error, SearchError::InvalidPattern { pattern, .. } if pattern == "fn ("));
    assert!(
        error
            .to_string()
            .starts_with("invalid search pattern \"fn (\""),
        "{error}"
    );
    assert_eq!(
        SearchQuery::regex("").compile().unwrap_err(),
        SearchError::EmptyPattern
    );
    let long = "a".repeat(forge_analysis::search::MAX_PATTERN_BYTES + 1);
    assert!(matches!(
        SearchQuery::regex(long).compile().unwrap_err(),
        SearchError::PatternTooLong { .. }
    ));
    // A pattern whose compiled form is huge is refused rather than built.
    assert!(SearchQuery::regex(r"\w{1000}{1000}").compile().is_err());
}

#[test]
fn query_deserializes_with_defaults() {
    let query: SearchQuery =
        serde_json::from_str(r#"{"pattern": "x", "whole_word": true}"#).unwrap();
    assert_eq!(
        query,
        SearchQuery {
            whole_word: true,
            ..SearchQuery::regex("x")
        }
    );
    assert!(serde_json::from_str::<SearchQuery>(r#"{"pattern": "x", "regexp": true}"#).is_err());
}

#[test]
fn ignore_list() {
    let ignored = [
        ".git/config",
        "node_modules/react/index.js",
        "web/node_modules/x.js",
        "target/debug/forge",
        "pkg/__pycache__/m.cpython-311.pyc",
        ".venv/lib/site.py",
        "venv/bin/python",
        "dist/app.js",
        ".mypy_cache/3.11/x.json",
        "/workspace/repo/.git",
    ];
    let kept = [
        "src/main.rs",
        "targets.txt",
        "src/distance.py",
        "docs/.gitignore",
        "my_venv/x.py",
        "/workspace/repo/app.py",
    ];
    for path in ignored {
        assert!(is_ignored(Path::new(path)), "{path}");
    }
    for path in kept {
        assert!(!is_ignored(Path::new(path)), "{path}");
    }
}
