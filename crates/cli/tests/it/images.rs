//! `forge image …`, `forge sandbox run --image`, `forge snapshot` and `forge fork` as a
//! person runs them: on a data directory, against a registry and a server.

use std::path::Path;

use forge_test_support::oci::{self, Layer, Registry, TestImage};
use pretty_assertions::assert_eq;
use serde_json::Value;

use crate::server::{KEY, Server};

/// Runs `forge` with `args`; returns the exit code, stdout and stderr.
pub(crate) fn forge(args: &[&str], env: &[(&str, &str)]) -> (Option<i32>, String, String) {
    #[expect(
        clippy::disallowed_methods,
        reason = "runs the forge binary under test"
    )]
    let output = std::process::Command::new(env!("CARGO_BIN_EXE_forge"))
        .args(args)
        .env_remove("FORGE_CONFIG")
        .env_remove("FORGE_DATA_DIR")
        .envs(env.iter().copied())
        .output()
        .unwrap();
    (
        output.status.code(),
        String::from_utf8_lossy(&output.stdout).into_owned(),
        String::from_utf8_lossy(&output.stderr).into_owned(),
    )
}

fn app_image() -> TestImage {
    TestImage::new(vec![
        Layer::busybox().file("etc/app.conf", "v1"),
        Layer::new()
            .whiteout("etc/app.conf")
            .file("etc/added", "added"),
        Layer::new().file("srv/data", "data"),
    ])
}

fn names(listing: &str) -> Vec<String> {
    let images: Vec<Value> = serde_json::from_str(listing).unwrap();
    images
        .iter()
        .map(|i| i["name"].as_str().unwrap().to_owned())
        .collect()
}

#[test]
fn the_image_commands_manage_the_local_store() {
    let data = forge_test_support::data_dir();
    let dir = data.path().to_str().unwrap();
    let env = [("FORGE_DATA_DIR", dir)];
    let scratch = tempfile::tempdir().unwrap();
    let archive = scratch.path().join("app.tar");
    app_image().write_docker_archive(&archive, "example.com/app:2");

    let (code, out, err) = forge(&["image", "import", archive.to_str().unwrap()], &env);
    assert_eq!(code, Some(0), "{err}");
    assert!(out.starts_with("example.com/app:2 "), "{out}");
    let (_, listing, _) = forge(&["image", "ls", "--json"], &env);
    assert_eq!(names(&listing), ["host", "example.com/app:2"]);
    let (_, table, _) = forge(&["image", "ls"], &env);
    assert!(table.starts_with("NAME "), "{table}");
    assert!(table.contains("example.com/app:2  "), "{table}");

    let (code, out, err) = forge(
        &[
            "sandbox",
            "run",
            "--image",
            "example.com/app:2",
            "--",
            "sh",
            "-c",
            "cat /etc/added /srv/data; test -e /etc/app.conf || echo gone",
        ],
        &env,
    );
    assert_eq!((code, out.as_str()), (Some(0), "addeddatagone\n"), "{err}");

    // A registry pull, then an image that is nowhere: the error says what to do.
    let registry = Registry::start();
    let layout = scratch.path().join("layout");
    app_image().write_oci_layout(&layout, "1");
    registry.push(&layout, "1", "team/app");
    let pulled = format!("{}/team/app:1", registry.address);
    let (code, out, err) = forge(&["image", "pull", &pulled], &env);
    assert_eq!(code, Some(0), "{err}");
    assert!(out.starts_with(&format!("{pulled} sha256:")), "{out}");
    let closed = format!("127.0.0.1:{}/team/app:1", oci::free_port());
    let (code, _, err) = forge(&["sandbox", "run", "--image", &closed, "--", "true"], &env);
    assert_eq!(code, Some(1));
    assert!(
        err.contains(&format!(
            "image {closed} is not in the store and cannot be pulled"
        )) && err.contains("forge image import FILE"),
        "{err}"
    );
    let offline = scratch.path().join("offline.toml");
    std::fs::write(&offline, "[images]\npull_missing = false\n").unwrap();
    let (code, _, err) = forge(
        &[
            "sandbox",
            "run",
            "--config",
            offline.to_str().unwrap(),
            "--image",
            "nothere:1",
            "--",
            "true",
        ],
        &env,
    );
    assert_eq!(code, Some(1));
    assert!(
        err.contains(
            "image nothere:1 is not in the store; fetch it with `forge image pull nothere:1`"
        ),
        "{err}"
    );

    let (code, out, _) = forge(&["image", "rm", "example.com/app:2"], &env);
    assert_eq!(code, Some(0));
    // The layers are shared with the pulled image, so nothing is freed yet.
    assert!(
        out.starts_with("removed example.com/app:2 (0 layers"),
        "{out}"
    );
    let (code, out, err) = forge(&["image", "rm", &pulled, "nothere:1"], &env);
    assert_eq!(code, Some(1));
    assert!(
        out.starts_with(&format!("removed {pulled} (3 layers")),
        "{out}"
    );
    assert!(
        err.contains("error: image nothere:1 is not in the store"),
        "{err}"
    );
    let (code, out, _) = forge(&["image", "prune"], &env);
    assert_eq!(
        (code, out.as_str()),
        (Some(0), "pruned 0 images and 0 layers, 0 B freed\n")
    );
    let (_, listing, _) = forge(&["image", "ls", "--json"], &env);
    assert_eq!(names(&listing), ["host"]);
}

/// [`forge`] off the async threads (the server under test shares the runtime).
async fn forge_async(
    args: Vec<String>,
    env: Vec<(&'static str, String)>,
) -> (Option<i32>, String, String) {
    tokio::task::spawn_blocking(move || {
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        let env: Vec<(&str, &str)> = env.iter().map(|(k, v)| (*k, v.as_str())).collect();
        forge(&args, &env)
    })
    .await
    .unwrap()
}

#[tokio::test]
async fn snapshots_and_forks_from_the_command_line() {
    let data = forge_test_support::data_dir();
    let server = Server::start(data.path(), Some(KEY), &[]).await;
    let env = vec![
        ("FORGE_URL", server.url.clone()),
        ("FORGE_API_KEY", KEY.to_owned()),
        ("FORGE_DATA_DIR", data.path().display().to_string()),
    ];
    let run =
        |args: &[&str]| forge_async(args.iter().map(|a| (*a).to_owned()).collect(), env.clone());
    let (_, id, _) = run(&["spawn", "--image", "host"]).await;
    let id = id.trim().to_owned();
    let (code, _, err) = run(&["exec", &id, "--", "sh", "-c", "echo kept > /root/note"]).await;
    assert_eq!(code, Some(0), "{err}");
    let (code, out, err) = run(&["snapshot", &id, "--name", "notes:1"]).await;
    assert_eq!((code, out.as_str()), (Some(0), "notes:1\n"), "{err}");
    let (code, fork, err) = run(&["fork", &id]).await;
    assert_eq!(code, Some(0), "{err}");
    let fork = fork.trim().to_owned();
    assert_ne!(fork, id);
    let (code, out, _) = run(&["exec", &fork, "--", "cat", "/root/note"]).await;
    assert_eq!((code, out.as_str()), (Some(0), "kept\n"));
    // The server and the CLI share the data directory's store.
    let (_, listing, _) = run(&["image", "ls", "--json"]).await;
    assert_eq!(names(&listing), ["host", "notes:1"]);
    server.stop().await;
}

#[test]
fn a_debian_image_builds_and_runs() {
    let data = forge_test_support::data_dir();
    let env = [("FORGE_DATA_DIR", data.path().to_str().unwrap())];
    let (code, out, err) = forge(
        &[
            "image",
            "build",
            "debian:essential",
            "--variant",
            "essential",
        ],
        &env,
    );
    assert_eq!(code, Some(0), "{err}");
    assert!(out.starts_with("debian:essential "), "{out}");
    let (code, out, err) = forge(
        &[
            "sandbox",
            "run",
            "--image",
            "debian:essential",
            "--",
            "sh",
            "-c",
            "cut -d. -f1 /etc/debian_version; dpkg-query -W -f='${Package}\\n' dash",
        ],
        &env,
    );
    assert_eq!((code, out.as_str()), (Some(0), "12\ndash\n"), "{err}");
    assert!(Path::new(&data.path().join("images/index.json")).is_file());
}
