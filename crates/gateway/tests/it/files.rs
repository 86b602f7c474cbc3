//! File tools against a real sandbox.

use pretty_assertions::assert_eq;
use serde_json::json;

use crate::{Ctx, v, verdict};

#[tokio::test]
async fn write_read_edit_list_move_delete() {
    let ctx = Ctx::new().await;
    let s = ctx.session("").await;

    let written = ctx
        .ok(
            &s,
            "write_file",
            json!({"path": "app/main.py", "content": "a = 1\nb = 2\nc = 3\n"}),
        )
        .await;
    assert_eq!(
        written,
        json!({"path": "/workspace/app/main.py", "bytes": 18})
    );

    let read = ctx
        .ok(
            &s,
            "read_file",
            json!({"path": "/workspace/app/main.py", "start_line": 2, "end_line": 3}),
        )
        .await;
    assert_eq!(
        read,
        json!({"path": "/workspace/app/main.py", "content": "b = 2\nc = 3\n", "bytes": 18, "total_lines": 3, "truncated": false})
    );

    let edited = ctx
        .ok(
            &s,
            "edit_file",
            json!({"path": "app/main.py", "old_string": "b = 2", "new_string": "b = 20"}),
        )
        .await;
    assert_eq!(
        edited,
        json!({"path": "/workspace/app/main.py", "replacements": 1, "bytes": 19})
    );

    // Not unique, and absent: refused without touching the file.
    ctx.ok(
        &s,
        "write_file",
        json!({"path": "twice.txt", "content": "x x"}),
    )
    .await;
    let twice = ctx
        .call(
            &s,
            "edit_file",
            json!({"path": "twice.txt", "old_string": "x", "new_string": "y"}),
        )
        .await;
    assert_eq!(
        verdict(&twice),
        v("failed", Some("allow"), Some("default"), Some("old_string"))
    );
    assert_eq!(
        twice.error.unwrap().message,
        "occurs 2 times in /workspace/twice.txt; include more context so it is unique"
    );

    let listed = ctx.ok(&s, "list_directory", json!({})).await;
    assert_eq!(
        listed,
        json!({"path": "/workspace", "count": 2, "entries": [
            {"name": "app", "type": "dir", "size": listed["entries"][0]["size"]},
            {"name": "twice.txt", "type": "file", "size": 3},
        ]})
    );

    let moved = ctx
        .ok(
            &s,
            "move_path",
            json!({"source": "twice.txt", "destination": "sub/once.txt"}),
        )
        .await;
    assert_eq!(
        moved,
        json!({"source": "/workspace/twice.txt", "destination": "/workspace/sub/once.txt"})
    );
    ctx.ok(&s, "delete_path", json!({"path": "sub", "recursive": true}))
        .await;
    let missing = ctx
        .call(&s, "read_file", json!({"path": "sub/once.txt"}))
        .await;
    assert_eq!(
        verdict(&missing),
        v("failed", Some("allow"), Some("default"), None)
    );
}

#[tokio::test]
async fn search_skips_ignored_folders_and_secrets() {
    let ctx = Ctx::new().await;
    let s = ctx.session("").await;
    for (path, content) in [
        ("src/a.py", "import os\nTOKEN = 'needle'\n"),
        ("src/b.js", "const needle = 1;\n"),
        (".git/config", "needle"),
        ("node_modules/x/index.js", "needle"),
        (".env", "NEEDLE=secret-value"),
    ] {
        ctx.ok(&s, "write_file", json!({"path": path, "content": content}))
            .await;
    }
    let found = ctx
        .ok(&s, "search_in_files", json!({"pattern": "(?i)needle"}))
        .await;
    assert_eq!(
        found,
        json!({
            "root": "/workspace",
            "count": 2,
            "hits": [
                {"file": "src/a.py", "line": 2, "column": 10, "content": "TOKEN = 'needle'"},
                {"file": "src/b.js", "line": 1, "column": 7, "content": "const needle = 1;"},
            ],
            "files_scanned": 2,
            "truncated": false,
        })
    );
    let bad = ctx
        .call(&s, "search_in_files", json!({"pattern": "("}))
        .await;
    assert_eq!(
        verdict(&bad),
        v("failed", Some("allow"), Some("default"), Some("pattern"))
    );
}

#[tokio::test]
async fn secret_files_are_not_read_and_writes_stay_in_writable_paths() {
    let ctx = Ctx::new().await;
    let s = ctx.session("").await;
    ctx.ok(
        &s,
        "write_file",
        json!({"path": ".env", "content": "KEY=1"}),
    )
    .await;
    let secret = ctx.call(&s, "read_file", json!({"path": ".env"})).await;
    assert_eq!(
        verdict(&secret),
        v("denied", Some("deny"), Some("secrets"), None)
    );

    let outside = ctx
        .call(
            &s,
            "write_file",
            json!({"path": "/etc/passwd", "content": "x"}),
        )
        .await;
    assert_eq!(
        verdict(&outside),
        v("denied", Some("deny"), Some("paths.writable"), None)
    );
    let escape = ctx
        .call(
            &s,
            "write_file",
            json!({"path": "../etc/x", "content": "x"}),
        )
        .await;
    assert_eq!(
        verdict(&escape),
        v("denied", Some("deny"), Some("paths.writable"), None)
    );

    // A narrower policy: only /workspace/out is writable.
    let narrow = ctx.session("writable_paths = [\"/workspace/out\"]").await;
    let inside = ctx
        .call(
            &narrow,
            "write_file",
            json!({"path": "out/a.txt", "content": "x"}),
        )
        .await;
    let beside = ctx
        .call(
            &narrow,
            "write_file",
            json!({"path": "a.txt", "content": "x"}),
        )
        .await;
    assert_eq!(
        [verdict(&inside), verdict(&beside)],
        [
            v("ok", Some("allow"), Some("default"), None),
            v("denied", Some("deny"), Some("paths.writable"), None)
        ]
    );
}

#[tokio::test]
async fn code_tools_read_through_the_sandbox() {
    let ctx = Ctx::new().await;
    let s = ctx.session("").await;
    ctx.ok(
        &s,
        "write_file",
        json!({"path": "ok.py", "content": "f(a[1], {'x': '('})\n"}),
    )
    .await;
    ctx.ok(
        &s,
        "write_file",
        json!({"path": "bad.js", "content": "f(a[1)\n"}),
    )
    .await;
    let ok = ctx
        .ok(&s, "bracket_tracker", json!({"path": "ok.py"}))
        .await;
    assert_eq!(ok["balanced"], json!(true));
    let bad = ctx
        .ok(&s, "bracket_tracker", json!({"path": "bad.js"}))
        .await;
    assert_eq!(bad["balanced"], json!(false));

    ctx.ok(&s, "write_file", json!({"path": "app.py", "content": "import subprocess\n\ndef run(cmd, shell):\n    return subprocess.run(cmd, shell=True)\n\nclass A:\n    def m(self):\n        pass\n"})).await;
    let functions = ctx
        .ok(&s, "functions_mapping", json!({"path": "app.py"}))
        .await;
    let names: Vec<&str> = functions["functions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f["name"].as_str().unwrap())
        .collect();
    assert_eq!(
        (functions["language"].clone(), names),
        (json!("python"), vec!["run", "A", "m"])
    );
    let checked = ctx.ok(&s, "validate_code", json!({"path": "app.py"})).await;
    assert_eq!(
        (
            checked["valid"].clone(),
            checked["findings"][0]["rule"].clone()
        ),
        (json!(true), json!("python.subprocess-shell"))
    );
    ctx.ok(
        &s,
        "write_file",
        json!({"path": "broken.py", "content": "def f(:\n"}),
    )
    .await;
    let broken = ctx
        .ok(&s, "validate_code", json!({"path": "broken.py"}))
        .await;
    assert_eq!(broken["valid"], json!(false));
    let unknown = ctx
        .call(&s, "validate_code", json!({"path": "notes.txt"}))
        .await;
    assert_eq!(verdict(&unknown), v("invalid", None, None, Some("path")));

    ctx.ok(
        &s,
        "write_file",
        json!({"path": "proj/package.json", "content": "{\"dependencies\": {\"express\": \"4\"}}"}),
    )
    .await;
    ctx.ok(
        &s,
        "write_file",
        json!({"path": "proj/requirements.txt", "content": "flask\n"}),
    )
    .await;
    ctx.ok(
        &s,
        "write_file",
        json!({"path": "proj/node_modules/x/package.json", "content": "{}"}),
    )
    .await;
    let stack = ctx
        .ok(&s, "detect_stack", json!({"repo_dir": "proj"}))
        .await;
    let frameworks: Vec<&str> = stack["frameworks"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f["name"].as_str().unwrap())
        .collect();
    assert_eq!(frameworks, ["express", "flask"], "{stack}");
}
