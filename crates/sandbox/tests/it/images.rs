//! Sandboxes on images from the store: layered root file systems with whiteouts and owners,
//! snapshots, forks, and layers kept while sandboxes use them.

use forge_image::{Image, NoProgress};
use forge_sandbox::Backend;
use forge_test_support::oci::{Layer, TestImage};
use forge_types::{SandboxId, SandboxSpec};
use pretty_assertions::assert_eq;

use crate::{Ctx, text};

/// A three-layer image: busybox, then a layer that deletes and adds files, then one with an
/// opaque directory.
fn app_image() -> TestImage {
    TestImage::new(vec![
        Layer::busybox()
            .dir("etc/app", 0o755)
            .file("etc/app/old.conf", "old")
            .file("etc/doomed", "doomed")
            .dir("usr/share", 0o755)
            .file("usr/share/readme", "from the image"),
        Layer::new()
            .whiteout("etc/doomed")
            .file("etc/added", "added")
            .file_with("srv/owned", b"by 1000".to_vec(), 0o640, 1000, 1000),
        Layer::new()
            .opaque("etc/app")
            .file("etc/app/new.conf", "new"),
    ])
}

impl Ctx {
    fn import(&self, image: &TestImage, name: &str) -> Image {
        let layout = self
            .dir
            .path()
            .join(format!("layout-{}", name.replace([':', '/'], "-")));
        image.write_oci_layout(&layout, "t");
        self.backend
            .image_store()
            .import(&layout, Some(name), &NoProgress)
            .expect("import")
            .remove(0)
    }

    async fn on(&self, image: &str) -> SandboxId {
        self.sandbox_with(SandboxSpec {
            image: image.into(),
            ..SandboxSpec::default()
        })
        .await
    }
}

#[tokio::test]
async fn a_sandbox_runs_on_its_image_layers() {
    let ctx = Ctx::new();
    ctx.import(&app_image(), "app:1");
    let id = ctx.on("app:1").await;
    assert_eq!(
        ctx.ok(
            &id,
            "cat /etc/added; echo; ls /etc/app; test -e /etc/doomed || echo doomed is gone; \
             stat -c '%u:%g %a' /srv/owned /bin/busybox; echo $FROM_IMAGE; id -u"
        )
        .await,
        "added\nnew.conf\ndoomed is gone\n1000:1000 640\n0:0 755\nyes\n0\n"
    );
    // The whole root is the sandbox's own: files of the image can be changed (copied up)
    // and new top-level directories made; the kernel's settings and the sandbox root's
    // missing capabilities still hold.
    assert_eq!(
        ctx.ok(
            &id,
            "echo changed > /usr/share/readme && cat /usr/share/readme; \
             mkdir -p /app/tool && echo ok > /app/tool/run && cat /app/tool/run"
        )
        .await,
        "changed\nok\n"
    );
    for attempt in [
        "echo x > /proc/sys/kernel/ostype",
        "echo x > /sys/kernel/uevent_helper",
        "chown 1000 /etc/added",
    ] {
        let denied = ctx.sh(&id, attempt).await;
        assert_ne!(denied.exit_code, 0, "{attempt}");
    }
    // Nothing reached the layer on disk.
    let image = ctx.backend.image_store().get("app:1").expect("image");
    let readme = ctx
        .backend
        .image_store()
        .layer_dir(&image.layers[0])
        .join("usr/share/readme");
    assert_eq!(
        std::fs::read_to_string(readme).expect("layer file"),
        "from the image"
    );
    ctx.backend.destroy(&id).await.expect("destroy");
}

#[tokio::test]
async fn a_snapshot_starts_new_sandboxes_with_the_files_it_saved() {
    let ctx = Ctx::new();
    ctx.import(&app_image(), "app:1");
    let id = ctx.on("app:1").await;
    ctx.ok(
        &id,
        "echo data > /workspace/data.txt && echo cfg > /etc/app/extra.conf && rm /etc/added",
    )
    .await;
    let info = ctx
        .backend
        .snapshot(&id, "app:snap")
        .await
        .expect("snapshot");
    assert_eq!(
        (info.name.as_str(), info.layers, info.parent.as_deref()),
        ("app:snap", 4, Some("app:1"))
    );
    // The original goes on; the snapshot does not follow it.
    ctx.ok(&id, "echo later > /workspace/later.txt").await;
    let copy = ctx.on("app:snap").await;
    assert_eq!(
        ctx.ok(
            &copy,
            "cat /workspace/data.txt /etc/app/extra.conf; test -e /etc/added || echo added is gone; \
             test -e /workspace/later.txt || echo later is not here"
        )
        .await,
        "data\ncfg\nadded is gone\nlater is not here\n"
    );

    // A host-based sandbox snapshots onto the host base.
    let host = ctx.sandbox().await;
    ctx.ok(&host, "echo note > /root/note").await;
    ctx.backend
        .snapshot(&host, "host-snap:1")
        .await
        .expect("snapshot");
    let again = ctx.on("host-snap:1").await;
    assert_eq!(
        ctx.ok(
            &again,
            "cat /root/note; test -x /usr/bin/env && echo host usr"
        )
        .await,
        "note\nhost usr\n"
    );
    for sandbox in [id, copy, host, again] {
        ctx.backend.destroy(&sandbox).await.expect("destroy");
    }
}

#[tokio::test]
async fn a_fork_starts_from_the_original_and_then_goes_its_own_way() {
    let ctx = Ctx::new();
    ctx.import(&app_image(), "app:1");
    let original = ctx.on("app:1").await;
    ctx.ok(&original, "echo before > /workspace/shared").await;
    let fork = ctx.backend.fork(&original).await.expect("fork").id;
    assert_eq!(ctx.ok(&fork, "cat /workspace/shared").await, "before\n");

    ctx.ok(
        &fork,
        "echo fork > /workspace/shared; echo mine > /workspace/fork-only",
    )
    .await;
    ctx.ok(&original, "echo original > /workspace/original-only")
        .await;
    assert_eq!(
        ctx.ok(&original, "cat /workspace/shared; ls /workspace")
            .await,
        "before\noriginal-only\nshared\n"
    );
    assert_eq!(
        ctx.ok(&fork, "cat /workspace/shared; ls /workspace").await,
        "fork\nfork-only\nshared\n"
    );
    let info = ctx.backend.get(&fork).await.expect("info");
    assert_eq!(
        info.spec.labels.get("forge.forked_from"),
        Some(&original.to_string())
    );

    // The fork's private image is not listed and goes with the fork.
    let listed: Vec<String> = ctx
        .backend
        .image_store()
        .list()
        .expect("list")
        .iter()
        .map(Image::name)
        .collect();
    assert_eq!(listed, ["host", "app:1"]);
    ctx.backend.destroy(&fork).await.expect("destroy fork");
    assert!(
        ctx.backend
            .image_store()
            .find(&info.spec.image)
            .expect("find")
            .is_none()
    );
    assert_eq!(ctx.ok(&original, "cat /workspace/shared").await, "before\n");
    ctx.backend.destroy(&original).await.expect("destroy");
}

#[tokio::test]
async fn layers_stay_while_a_sandbox_uses_them() {
    let ctx = Ctx::new();
    let image = ctx.import(&app_image(), "app:1");
    let id = ctx.on("app:1").await;
    let store = ctx.backend.image_store();
    let refused = store.remove("app:1", false).expect_err("in use");
    assert_eq!(
        refused.to_string(),
        format!("image app:1 is in use by {id}; destroy those first or pass --force")
    );
    store.remove("app:1", true).expect("forced removal");
    let report = store.prune().expect("prune");
    assert_eq!(report.layers, 0, "the sandbox still uses every layer");
    for layer in &image.layers {
        assert!(store.layer_dir(layer).is_dir());
    }
    assert_eq!(ctx.ok(&id, "cat /etc/added").await, "added");
    ctx.backend.destroy(&id).await.expect("destroy");
    let report = store.prune().expect("prune");
    assert_eq!(report.layers, 3);
    let missing = ctx
        .backend
        .create(SandboxSpec {
            image: "app:1".into(),
            ..SandboxSpec::default()
        })
        .await
        .expect_err("removed image");
    assert_eq!(
        text(missing.to_string().as_bytes()),
        "image app:1 is not in the store; fetch it with `forge image pull app:1` or load an archive with `forge image import FILE`"
    );
}
