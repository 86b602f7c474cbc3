//! Pulling from a real registry on loopback: layers with whiteouts, cached layers, pinned
//! digests, platform selection, mirrors, corrupted blobs and unreachable registries.

use std::collections::BTreeMap;
use std::sync::Mutex;

use forge_image::{ImageError, NoProgress, ProgressEvent, RegistryConfig};
use forge_test_support::oci::{self, Layer, Registry, TestImage};
use forge_types::ImageSource;
use pretty_assertions::assert_eq;

use crate::{Ctx, three_layers, tree};

#[tokio::test]
async fn a_multi_layer_image_pulls_with_whiteouts_and_reuses_its_layers() {
    let registry = Registry::start();
    let ctx = Ctx::new();
    let layout = ctx.scratch("layout");
    let written = three_layers().write_oci_layout(&layout, "v1");
    registry.push(&layout, "v1", "team/app");

    let events = Mutex::new(Vec::new());
    let record = |event: ProgressEvent| events.lock().expect("events").push(event);
    let name = format!("{}/team/app:v1", registry.address);
    let image = ctx.store.pull(&name, &record).await.expect("pull");
    assert_eq!(
        (
            image.reference.as_str(),
            image.id.as_str(),
            image.layers.len(),
            &image.source
        ),
        (
            name.as_str(),
            written.config_digest.as_str(),
            3,
            &ImageSource::Registry {
                registry: registry.address.clone()
            }
        )
    );
    assert_eq!(
        tree(&ctx.layer_dir(&image, 1))
            .into_iter()
            .filter(|e| e.starts_with("etc"))
            .collect::<Vec<_>>(),
        ["etc/", "etc/added = \"added\"", "etc/doomed (whiteout)"]
    );
    let ready = events
        .lock()
        .expect("events")
        .iter()
        .filter(|e| matches!(e, ProgressEvent::LayerReady { .. }))
        .count();
    assert_eq!(ready, 3);

    // Pulled again (by its digest): nothing is downloaded.
    events.lock().expect("events").clear();
    let pinned = format!(
        "{}/team/app@{}",
        registry.address,
        image.digest.clone().expect("digest")
    );
    let again = ctx
        .store
        .pull(&pinned, &record)
        .await
        .expect("pull by digest");
    assert_eq!(again.layers, image.layers);
    let cached = events
        .lock()
        .expect("events")
        .iter()
        .filter(|e| matches!(e, ProgressEvent::LayerCached { .. }))
        .count();
    assert_eq!(cached, 3);
}

#[tokio::test]
async fn the_hosts_platform_is_chosen_from_a_multi_platform_image() {
    let registry = Registry::start();
    let ctx = Ctx::new();
    let layout = ctx.scratch("multi");
    let amd64 = TestImage::new(vec![Layer::busybox().file("arch", "amd64")]);
    let mut arm64 = TestImage::new(vec![Layer::new().file("arch", "arm64")]);
    arm64.architecture = "arm64".into();
    oci::write_multi_platform_layout(&layout, "multi", &[arm64, amd64]);
    registry.push(&layout, "multi", "team/multi");

    let image = ctx
        .store
        .pull(
            &format!("{}/team/multi:multi", registry.address),
            &NoProgress,
        )
        .await
        .expect("pull");
    let arch = std::fs::read_to_string(ctx.layer_dir(&image, 0).join("arch")).expect("arch");
    assert_eq!(arch, std::env::consts::ARCH.replace("x86_64", "amd64"));

    let riscv = Ctx::with(RegistryConfig {
        platform: Some("linux/riscv64".into()),
        ..RegistryConfig::default()
    });
    let err = riscv
        .store
        .pull(
            &format!("{}/team/multi:multi", registry.address),
            &NoProgress,
        )
        .await
        .unwrap_err();
    assert_eq!(
        err.to_string(),
        format!(
            "{}/team/multi:multi has no image for linux/riscv64 (it has: linux/arm64, linux/amd64)",
            registry.address
        )
    );
}

#[tokio::test]
async fn a_corrupted_blob_is_rejected_and_nothing_is_kept() {
    let registry = Registry::start();
    let ctx = Ctx::new();
    let layout = ctx.scratch("layout");
    let written = three_layers().write_oci_layout(&layout, "v1");
    registry.push(&layout, "v1", "team/bad");
    registry.corrupt_blob(&written.layer_digests[2]);

    let name = format!("{}/team/bad:v1", registry.address);
    let err = ctx.store.pull(&name, &NoProgress).await.unwrap_err();
    match &err {
        ImageError::DigestMismatch { expected, .. } => {
            assert_eq!(expected, &written.layer_digests[2]);
        }
        other => panic!("expected a digest mismatch, got {other}"),
    }
    assert!(ctx.store.find(&name).expect("find").is_none());
    // The layers that did verify may stay for a retry; nothing names the bad one.
    let layers = ctx.layers_on_disk();
    assert!(layers.len() <= 2, "{layers:?}");
    let tmp = std::fs::read_dir(ctx.store.root().join("tmp"))
        .expect("tmp")
        .count();
    assert_eq!(tmp, 0, "no half-unpacked layer is left behind");
}

#[tokio::test]
async fn missing_tags_and_unreachable_registries_are_told_apart() {
    let registry = Registry::start();
    let ctx = Ctx::new();
    let err = ctx
        .store
        .pull(&format!("{}/team/none:1", registry.address), &NoProgress)
        .await
        .unwrap_err();
    assert!(matches!(err, ImageError::NotFound { .. }), "{err}");

    let closed = format!("127.0.0.1:{}", oci::free_port());
    let err = ctx
        .store
        .pull(&format!("{closed}/team/app:1"), &NoProgress)
        .await
        .unwrap_err();
    assert!(err.is_unreachable(), "{err}");
    assert!(
        err.to_string().starts_with(&format!(
            "cannot reach registry {closed} for {closed}/team/app:1"
        )),
        "{err}"
    );
}

#[tokio::test]
async fn docker_hub_names_are_pulled_through_a_mirror() {
    let registry = Registry::start();
    let layout = tempfile::tempdir().expect("tempdir");
    TestImage::new(vec![Layer::busybox().file("etc/alpine-release", "3.20.0")])
        .write_oci_layout(layout.path(), "latest");
    registry.push(layout.path(), "latest", "library/alpine");

    // A dead mirror first: it is skipped for the next one.
    let dead = format!("127.0.0.1:{}", oci::free_port());
    let ctx = Ctx::with(RegistryConfig {
        mirrors: BTreeMap::from([("docker.io".to_owned(), vec![dead, registry.address.clone()])]),
        ..RegistryConfig::default()
    });
    let image = ctx.store.pull("alpine", &NoProgress).await.expect("pull");
    assert_eq!(image.name(), "alpine:latest");
    assert_eq!(
        image.source,
        ImageSource::Registry {
            registry: registry.address.clone()
        }
    );
    let release = std::fs::read_to_string(ctx.layer_dir(&image, 0).join("etc/alpine-release"))
        .expect("release");
    assert_eq!(release, "3.20.0");
}

#[tokio::test]
async fn a_registry_that_wants_a_password_gets_the_configured_one() {
    let registry = Registry::start_with_password();
    let layout = tempfile::tempdir().expect("tempdir");
    TestImage::new(vec![Layer::busybox()]).write_oci_layout(layout.path(), "1");
    registry.push(layout.path(), "1", "private/app");
    let name = format!("{}/private/app:1", registry.address);

    let anonymous = Ctx::new();
    let err = anonymous.store.pull(&name, &NoProgress).await.unwrap_err();
    assert!(
        matches!(err, ImageError::Registry { .. }) && err.to_string().contains("not authorized"),
        "{err}"
    );

    let wrong = Ctx::with(RegistryConfig {
        credentials: BTreeMap::from([(
            registry.address.clone(),
            forge_image::Credentials {
                username: oci::REGISTRY_USER.into(),
                password: "wrong".into(),
            },
        )]),
        ..RegistryConfig::default()
    });
    let err = wrong.store.pull(&name, &NoProgress).await.unwrap_err();
    assert!(err.to_string().contains("not authorized"), "{err}");
    // The password never shows in messages or debug output.
    let config = format!("{:?}", wrong.store.registries());
    assert!(!config.contains("wrong"), "{config}");

    let right = Ctx::with(RegistryConfig {
        credentials: BTreeMap::from([(
            registry.address.clone(),
            forge_image::Credentials {
                username: oci::REGISTRY_USER.into(),
                password: oci::REGISTRY_PASSWORD.into(),
            },
        )]),
        ..RegistryConfig::default()
    });
    let image = right.store.pull(&name, &NoProgress).await.expect("pull");
    assert_eq!(image.layers.len(), 1);
}
