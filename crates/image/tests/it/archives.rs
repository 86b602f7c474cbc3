//! Importing OCI layouts and `docker save` archives offline.

use std::os::unix::fs::MetadataExt;

use forge_image::{ImageError, NoProgress};
use forge_types::ImageSource;
use pretty_assertions::assert_eq;

use crate::{Ctx, three_layers, tree};

#[test]
fn an_oci_layout_imports_with_whiteouts_opaque_dirs_and_owners() {
    let ctx = Ctx::new();
    let layout = ctx.scratch("layout");
    let written = three_layers().write_oci_layout(&layout, "v1");
    let images = ctx
        .store
        .import(&layout, Some("team/app:v1"), &NoProgress)
        .expect("import");
    assert_eq!(images.len(), 1);
    let image = &images[0];
    assert_eq!(
        (
            image.reference.as_str(),
            image.id.as_str(),
            image.digest.as_deref(),
            image.layers.len(),
            image.config.env.clone(),
        ),
        (
            "docker.io/team/app:v1",
            written.config_digest.as_str(),
            Some(written.manifest_digest.as_str()),
            3,
            vec![
                "PATH=/usr/local/bin:/usr/bin:/bin".to_owned(),
                "FROM_IMAGE=yes".to_owned()
            ],
        )
    );
    assert!(
        matches!(image.source, ImageSource::Archive { ref format, .. } if format == "oci-layout")
    );
    assert_eq!(
        tree(&ctx.layer_dir(image, 1)),
        [
            "etc/",
            "etc/added = \"added\"",
            "etc/doomed (whiteout)",
            "srv/",
            "srv/owned = \"by 1000\"",
        ]
    );
    assert_eq!(
        tree(&ctx.layer_dir(image, 2)),
        ["etc/", "etc/app/ (opaque)", "etc/app/new.conf = \"new\""]
    );
    let owned = std::fs::metadata(ctx.layer_dir(image, 1).join("srv/owned")).expect("stat");
    if forge_test_support::is_root() {
        assert_eq!(
            (owned.uid(), owned.gid(), owned.mode() & 0o7777),
            (1000, 1000, 0o640)
        );
    } else {
        assert_eq!(owned.uid(), rustix::process::getuid().as_raw());
    }
    // The store found it again by any of its names.
    for name in [
        "team/app:v1",
        "docker.io/team/app:v1",
        &written.config_digest[7..19],
    ] {
        let found = ctx.store.get(name).expect("find");
        assert_eq!(found.reference, "docker.io/team/app:v1", "{name}");
    }
}

#[test]
fn a_docker_save_archive_imports_under_its_tag() {
    let ctx = Ctx::new();
    let archive = ctx.scratch("out").join("app.tar");
    three_layers().write_docker_archive(&archive, "example.com/app:2");
    let images = ctx
        .store
        .import(&archive, None, &NoProgress)
        .expect("import");
    let names: Vec<String> = images.iter().map(forge_image::Image::name).collect();
    assert_eq!(names, ["example.com/app:2"]);
    assert_eq!(
        tree(&ctx.layer_dir(&images[0], 0))
            .into_iter()
            .filter(|e| e.starts_with("etc/app"))
            .collect::<Vec<_>>(),
        [
            "etc/app/",
            "etc/app/keep.conf = \"keep\"",
            "etc/app/old.conf = \"old\""
        ]
    );
    // The same layers again are not unpacked twice.
    let before = ctx.layers_on_disk();
    let layout = ctx.scratch("layout");
    three_layers().write_oci_layout(&layout, "v1");
    ctx.store
        .import(&layout, Some("again:1"), &NoProgress)
        .expect("import again");
    assert_eq!(ctx.layers_on_disk(), before);
}

#[test]
fn corrupt_and_hostile_archives_are_refused_and_leave_nothing() {
    let ctx = Ctx::new();
    // A layer blob whose bytes no longer match its digest.
    let layout = ctx.scratch("bad-layout");
    let written = three_layers().write_oci_layout(&layout, "v1");
    let blob = layout
        .join("blobs/sha256")
        .join(written.layer_digests[1].trim_start_matches("sha256:"));
    let mut bytes = std::fs::read(&blob).expect("blob");
    let n = bytes.len();
    bytes[n - 1] ^= 0xff;
    std::fs::write(&blob, bytes).expect("corrupt");
    let err = ctx
        .store
        .import(&layout, Some("bad:1"), &NoProgress)
        .unwrap_err();
    assert!(
        matches!(
            err,
            ImageError::DigestMismatch { .. } | ImageError::Layer { .. }
        ),
        "{err}"
    );
    assert!(ctx.store.find("bad:1").expect("find").is_none());

    // A docker archive that names a layer outside itself.
    let dir = ctx.scratch("escape");
    std::fs::write(
        dir.join("manifest.json"),
        r#"[{"Config":"../../etc/passwd","RepoTags":["x:1"],"Layers":[]}]"#,
    )
    .expect("manifest");
    let err = ctx.store.import(&dir, None, &NoProgress).unwrap_err();
    assert_eq!(
        err.to_string(),
        format!(
            "cannot import {}: the archive names a path outside itself: ../../etc/passwd",
            dir.display()
        )
    );

    // Neither format.
    let junk = ctx.scratch("junk").join("junk.tar");
    std::fs::write(&junk, b"not a tar at all").expect("junk");
    let err = ctx.store.import(&junk, None, &NoProgress).unwrap_err();
    assert!(matches!(err, ImageError::Archive { .. }), "{err}");

    // An archive without a name needs one.
    let unnamed = ctx.scratch("unnamed");
    three_layers().write_oci_layout(&unnamed, "latest");
    let err = ctx.store.import(&unnamed, None, &NoProgress).unwrap_err();
    assert!(err.to_string().contains("pass one with --name"), "{err}");

    // Nothing was installed and no work was left behind.
    assert_eq!(
        ctx.store.list().expect("list").len(),
        1,
        "only the host base"
    );
    let report = ctx.store.prune().expect("prune");
    assert_eq!(report.images, Vec::<String>::new());
    let tmp: Vec<_> = std::fs::read_dir(ctx.store.root().join("tmp"))
        .expect("tmp")
        .collect();
    assert_eq!(tmp.len(), 0);
}
