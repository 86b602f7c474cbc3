//! Removal and garbage collection: shared layers stay while anything uses them.

use forge_image::{Commit, ImageError, NoProgress};
use forge_test_support::oci::{Layer, TestImage};
use forge_types::ImageSource;
use pretty_assertions::assert_eq;

use crate::{Ctx, tree};

#[test]
fn removing_an_image_keeps_layers_that_others_or_leases_use() {
    let ctx = Ctx::new();
    let base = Layer::busybox();
    let a = TestImage::new(vec![base.clone(), Layer::new().file("a", "a")]);
    let b = TestImage::new(vec![base, Layer::new().file("b", "b")]);
    let dir_a = ctx.scratch("a");
    let dir_b = ctx.scratch("b");
    a.write_oci_layout(&dir_a, "1");
    b.write_oci_layout(&dir_b, "1");
    let image_a = ctx
        .store
        .import(&dir_a, Some("a:1"), &NoProgress)
        .expect("a")
        .remove(0);
    let image_b = ctx
        .store
        .import(&dir_b, Some("b:1"), &NoProgress)
        .expect("b")
        .remove(0);
    assert_eq!(
        image_a.layers[0], image_b.layers[0],
        "the base layer is shared"
    );
    assert_eq!(ctx.layers_on_disk().len(), 3);

    // A sandbox uses b: removing it is refused, forcing it keeps its layers.
    ctx.store.lease("sb-0000000b", &image_b).expect("lease");
    let err = ctx.store.remove("b:1", false).unwrap_err();
    assert!(matches!(err, ImageError::InUse { .. }), "{err}");
    assert_eq!(
        err.to_string(),
        "image b:1 is in use by sb-0000000b; destroy those first or pass --force"
    );
    let report = ctx.store.remove("b:1", true).expect("forced removal");
    assert_eq!((report.images, report.layers), (vec!["b:1".to_owned()], 0));
    assert_eq!(ctx.layers_on_disk().len(), 3);

    // Removing a deletes only its own layer: the base is b's lease's too.
    let report = ctx.store.remove("a:1", false).expect("remove a");
    assert_eq!((report.images, report.layers), (vec!["a:1".to_owned()], 1));
    assert_eq!(ctx.layers_on_disk().len(), 2);

    // Once the sandbox is gone, pruning frees the rest.
    ctx.store.release("sb-0000000b").expect("release");
    let report = ctx.store.prune().expect("prune");
    assert_eq!(report.layers, 2);
    assert_eq!(ctx.layers_on_disk(), Vec::<String>::new());
    assert!(
        report.freed_bytes > 1_000_000,
        "busybox was freed: {report:?}"
    );

    let err = ctx.store.remove("a:1", false).unwrap_err();
    assert!(matches!(err, ImageError::NotFound { .. }), "{err}");
    let err = ctx.store.remove("host", false).unwrap_err();
    assert!(matches!(err, ImageError::InUse { .. }), "{err}");
}

#[test]
fn a_committed_directory_becomes_a_layer_on_top_of_its_parent() {
    let ctx = Ctx::new();
    let dir = ctx.scratch("layout");
    TestImage::new(vec![Layer::busybox().file("etc/motd", "hello")]).write_oci_layout(&dir, "1");
    let parent = ctx
        .store
        .import(&dir, Some("base:1"), &NoProgress)
        .expect("import")
        .remove(0);

    // An upper directory as overlayfs leaves it: new files, a whiteout, an opaque directory.
    let upper = ctx.scratch("upper");
    std::fs::create_dir_all(upper.join("workspace/src")).expect("mkdir");
    std::fs::write(upper.join("workspace/src/main.py"), "print(1)").expect("write");
    std::os::unix::fs::symlink("src/main.py", upper.join("workspace/entry")).expect("symlink");
    std::fs::create_dir(upper.join("etc")).expect("mkdir");
    rustix::fs::mknodat(
        rustix::fs::CWD,
        upper.join("etc/motd"),
        rustix::fs::FileType::CharacterDevice,
        rustix::fs::Mode::empty(),
        0,
    )
    .expect("whiteout");
    std::fs::create_dir(upper.join("opt")).expect("mkdir");
    rustix::fs::setxattr(
        upper.join("opt"),
        "user.overlay.opaque",
        b"y",
        rustix::fs::XattrFlags::empty(),
    )
    .expect("opaque");
    rustix::fs::setxattr(
        upper.join("workspace"),
        "user.overlay.origin",
        b"junk",
        rustix::fs::XattrFlags::empty(),
    )
    .expect("origin");

    let image = ctx
        .store
        .commit(
            &upper,
            &Commit {
                parent: &parent,
                name: Some("snap:1"),
                source: ImageSource::Snapshot {
                    sandbox: "sb-00000001".into(),
                },
                shift: None,
            },
        )
        .expect("commit");
    assert_eq!(image.layers[..1], parent.layers[..]);
    assert_eq!(image.parent.as_deref(), Some("docker.io/library/base:1"));
    let layer = ctx.store.layer_dir(&image.layers[1]);
    assert_eq!(
        tree(&layer),
        [
            "etc/",
            "etc/motd (whiteout)",
            "opt/ (opaque)",
            "workspace/",
            "workspace/entry -> src/main.py",
            "workspace/src/",
            "workspace/src/main.py = \"print(1)\"",
        ]
    );
    // Only the opaque marker crossed over, never the old mount's bookkeeping.
    assert!(
        rustix::fs::getxattr(
            layer.join("workspace"),
            "user.overlay.origin",
            &mut [0u8; 8]
        )
        .is_err()
    );

    // A fork's image (no name) is hidden and goes with its last user.
    let hidden = ctx
        .store
        .commit(
            &upper,
            &Commit {
                parent: &image,
                name: None,
                source: ImageSource::Snapshot {
                    sandbox: "sb-00000001".into(),
                },
                shift: None,
            },
        )
        .expect("commit hidden");
    let listed: Vec<String> = ctx
        .store
        .list()
        .expect("list")
        .iter()
        .map(forge_image::Image::name)
        .collect();
    assert_eq!(listed, ["host", "base:1", "snap:1"]);
    ctx.store.lease("sb-00000002", &hidden).expect("lease");
    assert_eq!(ctx.layers_on_disk().len(), 3);
    ctx.store.release("sb-00000002").expect("release");
    assert!(ctx.store.find(&hidden.reference).expect("find").is_none());
    assert_eq!(ctx.layers_on_disk().len(), 2);
}
