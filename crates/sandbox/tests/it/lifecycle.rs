//! Creating, listing and destroying sandboxes; bad specs; dead inits; leaks; pools.

use std::sync::Arc;
use std::time::Duration;

use forge_sandbox::{Backend, Pool, SandboxError};
use forge_types::{ExecRequest, Limits, NetworkMode, SandboxSpec};
use pretty_assertions::assert_eq;

use crate::{Ctx, text};

#[tokio::test]
async fn create_exec_destroy() {
    let ctx = Ctx::new();
    let id = ctx.sandbox().await;
    assert_eq!(
        ctx.backend
            .list()
            .await
            .into_iter()
            .map(|s| s.id)
            .collect::<Vec<_>>(),
        vec![id.clone()]
    );
    assert_eq!(ctx.ok(&id, "hostname").await, format!("{id}\n"));
    ctx.backend.destroy(&id).await.unwrap();
    assert!(matches!(
        ctx.backend.get(&id).await,
        Err(SandboxError::NotFound { .. })
    ));
    assert!(matches!(
        ctx.backend.exec(&id, ExecRequest::argv(["true"])).await,
        Err(SandboxError::NotFound { .. })
    ));
    assert!(matches!(
        ctx.backend.destroy(&id).await,
        Err(SandboxError::NotFound { .. })
    ));
}

#[tokio::test]
async fn invalid_specs_are_refused_with_the_field() {
    let ctx = Ctx::new();
    let zero_memory = SandboxSpec {
        limits: Limits {
            memory_bytes: 0,
            ..Limits::default()
        },
        ..SandboxSpec::default()
    };
    match ctx.backend.create(zero_memory).await {
        Err(SandboxError::InvalidSpec(err)) => assert_eq!(err.field, "limits.memory_bytes"),
        other => panic!("expected an invalid spec, got {other:?}"),
    }
    let unknown_image = SandboxSpec {
        image: "nosuchimage:1".into(),
        ..SandboxSpec::default()
    };
    match ctx.backend.create(unknown_image).await {
        Err(err @ SandboxError::Image(forge_image::ImageError::NotFound { .. })) => {
            assert_eq!(
                err.to_string(),
                "image nosuchimage:1 is not in the store; fetch it with `forge image pull nosuchimage:1` or load an archive with `forge image import FILE`"
            );
        }
        other => panic!("expected an unknown image, got {other:?}"),
    }
    let allowlist = SandboxSpec {
        network: NetworkMode::Allowlist,
        allowed_hosts: vec!["pypi.org:http".into()],
        ..SandboxSpec::default()
    };
    match ctx.backend.create(allowlist).await {
        Err(SandboxError::InvalidSpec(err)) => assert_eq!(err.field, "allowed_hosts"),
        other => panic!("expected an invalid allowlist, got {other:?}"),
    }
    let missing_workspace = SandboxSpec {
        workspace: Some("/nonexistent/forge".into()),
        ..SandboxSpec::default()
    };
    match ctx.backend.create(missing_workspace).await {
        Err(SandboxError::InvalidSpec(err)) => assert_eq!(err.field, "workspace"),
        other => panic!("expected an invalid workspace, got {other:?}"),
    }
    assert_eq!(ctx.backend.list().await, vec![]);
}

#[tokio::test]
async fn a_dead_init_is_reported_as_gone() {
    let ctx = Ctx::new();
    let info = ctx.backend.create(SandboxSpec::default()).await.unwrap();
    let pid = rustix::process::Pid::from_raw(info.init_pid).unwrap();
    rustix::process::kill_process(pid, rustix::process::Signal::KILL).unwrap();
    let err = tokio::time::timeout(
        Duration::from_secs(10),
        ctx.backend.exec(&info.id, ExecRequest::argv(["true"])),
    )
    .await
    .expect("a dead sandbox must not hang")
    .unwrap_err();
    assert_eq!(
        err.to_string(),
        format!("sandbox {} is gone: its init exited", info.id)
    );
    ctx.backend.destroy(&info.id).await.unwrap();
    assert_eq!(
        forge_test_support::entries(ctx.backend.sandboxes_dir()),
        Vec::<std::path::PathBuf>::new()
    );
}

#[tokio::test]
async fn two_hundred_cycles_leave_nothing_behind() {
    let ctx = Ctx::new();
    let helper = ctx.backend.helper_pid().await.unwrap();
    // One warm-up cycle: the runtime and the helper open their long-lived descriptors.
    let id = ctx.sandbox().await;
    ctx.backend.destroy(&id).await.unwrap();
    // Counted once the janitor is idle and the helper's stock of prepared networks is full
    // (each holds two descriptors in the helper), as at the end.
    ctx.backend.quiesce().await.unwrap();
    let own_fds = forge_test_support::fd_count(std::process::id());
    let helper_fds = forge_test_support::fd_count(helper);
    for _ in 0..200 {
        let id = ctx.sandbox().await;
        let result = ctx
            .backend
            .exec(&id, ExecRequest::argv(["/bin/true"]))
            .await
            .unwrap();
        assert_eq!(result.exit_code, 0);
        ctx.backend.destroy(&id).await.unwrap();
    }
    ctx.backend.quiesce().await.unwrap();
    ctx.backend.quiesce().await.unwrap();
    let leftovers = (
        forge_test_support::children(helper),
        forge_test_support::entries(&ctx.dir.path().join("trash")),
        forge_test_support::entries(ctx.backend.sandboxes_dir()),
        ctx.backend.cgroup_dirs(),
        forge_test_support::mounts_under(ctx.dir.path()),
        forge_test_support::fd_count(std::process::id()),
        forge_test_support::fd_count(helper),
    );
    // Every sandbox process lives in the pid namespace of an init the helper forked, and
    // dies with it: no children of the helper means no sandbox processes.
    assert_eq!(
        leftovers,
        (vec![], vec![], vec![], vec![], vec![], own_fds, helper_fds)
    );
}

#[tokio::test]
async fn sandboxes_from_the_helpers_stock_look_like_those_made_in_place() {
    use std::os::unix::fs::MetadataExt;
    let ctx = Ctx::new();
    ctx.backend.quiesce().await.unwrap();
    let helper = ctx.backend.helper_pid().await.unwrap();
    let stock = ctx.dir.path().join("skeletons").join(helper.to_string());
    let inode = |path: &std::path::Path| std::fs::metadata(path).unwrap().ino();
    let skeletons: Vec<u64> = forge_test_support::entries(&stock)
        .iter()
        .map(|path| inode(path))
        .collect();
    assert!(!skeletons.is_empty(), "the helper stocked no skeletons");
    let stocked = ctx.sandbox().await;
    let dir = ctx.backend.sandboxes_dir().join(stocked.as_str());
    assert!(
        skeletons.contains(&inode(&dir)),
        "the sandbox's directory is not one of the stock's"
    );
    // With the stock emptied behind the helper's back, the next sandbox's init makes its
    // own layers.
    for skeleton in forge_test_support::entries(&stock) {
        std::fs::remove_dir_all(skeleton).unwrap();
    }
    let made = ctx.sandbox().await;
    let script = "stat -c '%n %a %U:%G' / /workspace /root /home /run /var /var/tmp; \
                  for d in /workspace /root /home /run /var/tmp; do touch $d/f || exit 1; done; \
                  echo writable";
    let expected = "/ 755 root:root\n/workspace 755 root:root\n/root 700 root:root\n\
                    /home 755 root:root\n/run 755 root:root\n/var 755 root:root\n\
                    /var/tmp 1777 root:root\nwritable\n";
    assert_eq!(
        (ctx.ok(&stocked, script).await, ctx.ok(&made, script).await),
        (expected.to_owned(), expected.to_owned())
    );
}

#[tokio::test]
async fn a_warm_pool_hands_out_ready_sandboxes() {
    let ctx = Ctx::new();
    let backend: Arc<dyn Backend> = Arc::new(ctx.backend.clone());
    let pool = Pool::new(backend, SandboxSpec::default(), 2);
    assert!(
        pool.wait_full(Duration::from_secs(30)).await,
        "the pool never filled"
    );
    let info = pool.acquire().await.unwrap();
    let result = ctx
        .backend
        .exec(&info.id, ExecRequest::shell("echo pooled"))
        .await
        .unwrap();
    assert_eq!(text(&result.stdout), "pooled\n");
    pool.release(info.id);
    assert!(
        pool.wait_full(Duration::from_secs(30)).await,
        "the pool did not refill"
    );
    let status = pool.status();
    assert_eq!(
        (status.ready, status.size, status.hits, status.misses),
        (2, 2, 1, 0)
    );
    pool.shutdown().await;
    // Released sandboxes are destroyed in the background.
    for _ in 0..200 {
        if ctx.backend.list().await.is_empty() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert_eq!(ctx.backend.list().await, vec![]);
}

#[tokio::test]
async fn a_restarted_backend_adopts_running_sandboxes() {
    let ctx = Ctx::new();
    let id = ctx.sandbox().await;
    ctx.ok(&id, "echo kept > /workspace/state").await;
    let dead = ctx.sandbox().await;
    let dead_pid = ctx.backend.get(&dead).await.unwrap().init_pid;
    // A second backend on the same data directory stands in for a restarted server.
    let again = forge_sandbox::JailBackend::new(Ctx::config(ctx.dir.path())).unwrap();
    rustix::process::kill_process(
        rustix::process::Pid::from_raw(dead_pid).unwrap(),
        rustix::process::Signal::KILL,
    )
    .unwrap();
    tokio::time::sleep(Duration::from_millis(100)).await;
    let recovery = again.recover().await;
    assert_eq!(
        (recovery.adopted, recovery.removed),
        (vec![id.clone()], vec![dead.clone()])
    );
    let result = again
        .exec(&id, ExecRequest::shell("cat /workspace/state"))
        .await
        .unwrap();
    assert_eq!(text(&result.stdout), "kept\n");
    again.destroy(&id).await.unwrap();
    assert_eq!(
        forge_test_support::entries(again.sandboxes_dir()),
        Vec::<std::path::PathBuf>::new()
    );
}

#[tokio::test]
async fn stale_sandbox_cgroups_are_found_and_removed_but_live_and_young_ones_stay() {
    use forge_sandbox::cgroup::{remove_stale, stale_sandbox_cgroups};
    use std::time::SystemTime;
    let ctx = Ctx::new();
    let live = ctx.sandbox().await;
    // Other test processes sweep with the real threshold of a minute: these are made to
    // look 30 seconds old and looked for with 20, so only this test removes them.
    let age = Duration::from_secs(30);
    let backdate = |dir: &std::path::Path| {
        std::fs::File::open(dir)
            .unwrap()
            .set_modified(SystemTime::now() - age)
            .unwrap();
    };
    let parents = ctx.backend.cgroup_parents();
    assert!(!parents.is_empty(), "no cgroup hierarchy to test with");
    let mut dead = Vec::new();
    let mut kept = Vec::new();
    for parent in &parents {
        let own = parent.parent().unwrap();
        let paths = [
            parent.join("sb-dead"),
            parent.join("sb-young"),
            own.join(format!("other-{}", live.as_str())),
            own.join(format!("other-{}/sb-elsewhere", live.as_str())),
        ];
        for path in &paths {
            std::fs::create_dir(path).unwrap();
        }
        backdate(&paths[0]);
        backdate(&paths[3]);
        backdate(&parent.join(live.as_str()));
        dead.push(paths[0].clone());
        kept.extend(paths[1..].iter().cloned());
    }
    let ours = |found: Vec<std::path::PathBuf>| -> Vec<std::path::PathBuf> {
        found
            .into_iter()
            .filter(|p| {
                parents.iter().any(|parent| p.starts_with(parent))
                    || p.to_string_lossy().contains("/other-")
            })
            .collect()
    };
    let mut expected = dead.clone();
    expected.sort();
    let stale = ours(stale_sandbox_cgroups(Duration::from_secs(20)));
    assert_eq!(stale, expected);
    assert_eq!(remove_stale(&stale), dead.len());
    assert_eq!(
        ours(stale_sandbox_cgroups(Duration::from_secs(20))),
        Vec::<std::path::PathBuf>::new()
    );
    assert!(kept.iter().all(|p| p.is_dir()));
    // The live sandbox kept its cgroups.
    assert_eq!(ctx.ok(&live, "echo alive").await, "alive\n");
    for path in kept.iter().rev() {
        std::fs::remove_dir(path).unwrap();
    }
    ctx.backend.destroy(&live).await.unwrap();
}
