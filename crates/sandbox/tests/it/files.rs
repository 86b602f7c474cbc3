//! The file API.

use forge_sandbox::Backend;
use forge_sandbox::proto::ErrorKind;
use forge_types::FileKind;
use pretty_assertions::assert_eq;

use crate::Ctx;

#[tokio::test]
async fn files_round_trip_and_are_listed() {
    let ctx = Ctx::new();
    let id = ctx.sandbox().await;
    let all_bytes: Vec<u8> = (0..=255).cycle().take(3 << 20).collect();
    ctx.backend
        .write_file(&id, "/workspace/data/blob.bin", all_bytes.clone(), None)
        .await
        .unwrap();
    assert_eq!(
        ctx.backend
            .read_file(&id, "/workspace/data/blob.bin")
            .await
            .unwrap(),
        all_bytes
    );
    ctx.backend
        .write_file(
            &id,
            "notes.txt",
            b"relative paths land in /workspace".to_vec(),
            Some(0o600),
        )
        .await
        .unwrap();
    assert_eq!(
        ctx.ok(
            &id,
            "cat /workspace/notes.txt; stat -c ' %a' /workspace/notes.txt"
        )
        .await,
        "relative paths land in /workspace 600\n"
    );

    ctx.backend.mkdir(&id, "/workspace/a/b/c").await.unwrap();
    ctx.backend
        .rename(&id, "/workspace/notes.txt", "/workspace/a/b/moved.txt")
        .await
        .unwrap();
    ctx.backend
        .chmod(&id, "/workspace/a/b/moved.txt", 0o755)
        .await
        .unwrap();
    let listing: Vec<(String, FileKind, u64, u32)> = ctx
        .backend
        .list_dir(&id, "/workspace/a/b")
        .await
        .unwrap()
        .into_iter()
        .map(|f| {
            (
                f.path,
                f.kind,
                if f.kind == FileKind::File { f.size } else { 0 },
                f.mode,
            )
        })
        .collect();
    assert_eq!(
        listing,
        [
            ("/workspace/a/b/c".to_owned(), FileKind::Dir, 0, 0o755),
            (
                "/workspace/a/b/moved.txt".to_owned(),
                FileKind::File,
                33,
                0o755
            ),
        ]
    );
    let stat = ctx
        .backend
        .stat(&id, "/workspace/a/b/moved.txt")
        .await
        .unwrap();
    assert_eq!(
        (stat.name.as_str(), stat.size, stat.is_dir()),
        ("moved.txt", 33, false)
    );
    let mut found = ctx.backend.glob(&id, "/workspace/**/*.txt").await.unwrap();
    found.sort();
    assert_eq!(found, ["/workspace/a/b/moved.txt"]);

    let not_empty = ctx
        .backend
        .remove(&id, "/workspace/a", false)
        .await
        .unwrap_err();
    assert_eq!(not_empty.remote_kind(), Some(ErrorKind::DirectoryNotEmpty));
    ctx.backend.remove(&id, "/workspace/a", true).await.unwrap();
    let gone = ctx.backend.stat(&id, "/workspace/a").await.unwrap_err();
    assert_eq!(
        gone.to_string(),
        format!("sandbox {id}: /workspace/a: no such file or directory")
    );
    assert_eq!(gone.remote_kind(), Some(ErrorKind::NotFound));
    ctx.backend.destroy(&id).await.unwrap();
}

#[tokio::test]
async fn bad_paths_are_clear_errors() {
    let ctx = Ctx::new();
    let id = ctx.sandbox().await;
    let cases = [
        ctx.backend
            .read_file(&id, "/workspace/missing")
            .await
            .unwrap_err()
            .remote_kind(),
        ctx.backend
            .read_file(&id, "/workspace")
            .await
            .unwrap_err()
            .remote_kind(),
        ctx.backend
            .read_file(&id, "/dev/zero")
            .await
            .unwrap_err()
            .remote_kind(),
        ctx.backend
            .read_file(&id, "")
            .await
            .unwrap_err()
            .remote_kind(),
        ctx.backend
            .write_file(&id, "/usr/bin/evil", b"x".to_vec(), None)
            .await
            .unwrap_err()
            .remote_kind(),
        ctx.backend
            .remove(&id, "/", true)
            .await
            .unwrap_err()
            .remote_kind(),
        ctx.backend
            .list_dir(&id, "/workspace/nope")
            .await
            .unwrap_err()
            .remote_kind(),
        ctx.backend
            .chmod(&id, "/workspace", 0o17777)
            .await
            .unwrap_err()
            .remote_kind(),
    ];
    assert_eq!(
        cases,
        [
            Some(ErrorKind::NotFound),
            Some(ErrorKind::IsADirectory),
            Some(ErrorKind::InvalidInput),
            Some(ErrorKind::InvalidInput),
            Some(ErrorKind::PermissionDenied),
            Some(ErrorKind::InvalidInput),
            Some(ErrorKind::NotFound),
            Some(ErrorKind::InvalidInput),
        ]
    );
    ctx.backend.destroy(&id).await.unwrap();
}

#[tokio::test]
async fn a_host_workspace_is_mounted_and_writable() {
    let ctx = Ctx::new();
    let workspace = tempfile::tempdir_in(ctx.dir.path()).unwrap();
    std::fs::write(workspace.path().join("from-host.txt"), "hello sandbox").unwrap();
    let spec = forge_types::SandboxSpec {
        workspace: Some(workspace.path().to_owned()),
        ..Default::default()
    };
    let id = ctx.sandbox_with(spec).await;
    assert_eq!(
        ctx.ok(&id, "cat from-host.txt; echo back > from-sandbox.txt")
            .await,
        "hello sandbox"
    );
    assert_eq!(
        std::fs::read_to_string(workspace.path().join("from-sandbox.txt")).unwrap(),
        "back\n"
    );
    ctx.backend.destroy(&id).await.unwrap();
    // Destroying the sandbox leaves the host's directory alone.
    assert!(workspace.path().join("from-host.txt").exists());
}
