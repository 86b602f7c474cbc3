//! The image store against real inputs: OCI layouts and `docker save` archives written by
//! the tests, and a real registry (`docker-registry`) on loopback that `skopeo` pushes to.
#![expect(
    clippy::tests_outside_test_module,
    clippy::expect_used,
    reason = "an integration test crate is all tests, and a test fails by panicking"
)]

mod archives;
mod gc;
mod pull;

use std::path::{Path, PathBuf};

use forge_image::{ImageStore, RegistryConfig};
use forge_test_support::oci::{Layer, TestImage};

/// A store in a temporary directory.
struct Ctx {
    dir: tempfile::TempDir,
    store: ImageStore,
}

impl Ctx {
    fn new() -> Self {
        Self::with(RegistryConfig {
            pull_missing: false,
            ..RegistryConfig::default()
        })
    }

    fn with(config: RegistryConfig) -> Self {
        let dir = tempfile::tempdir().expect("tempdir");
        let store = ImageStore::open(dir.path().join("images"), config).expect("open store");
        Self { dir, store }
    }

    /// A file's content inside a layer of the store, by the image's layer index.
    fn layer_dir(&self, image: &forge_image::Image, index: usize) -> PathBuf {
        self.store.layer_dir(&image.layers[index])
    }

    /// Names of the layers on disk.
    fn layers_on_disk(&self) -> Vec<String> {
        let mut names: Vec<String> = std::fs::read_dir(self.store.root().join("layers"))
            .expect("layers dir")
            .map(|e| e.expect("entry").file_name().to_string_lossy().into_owned())
            .collect();
        names.sort();
        names
    }

    fn scratch(&self, name: &str) -> PathBuf {
        let path = self.dir.path().join(name);
        std::fs::create_dir_all(&path).expect("scratch dir");
        path
    }
}

/// Three layers: a base, a layer that adds and deletes files, a layer with an opaque
/// directory.
fn three_layers() -> TestImage {
    TestImage::new(vec![
        Layer::busybox()
            .dir("etc/app", 0o755)
            .file("etc/app/old.conf", "old")
            .file("etc/app/keep.conf", "keep")
            .file("etc/doomed", "doomed"),
        Layer::new()
            .whiteout("etc/doomed")
            .file("etc/added", "added")
            .file_with("srv/owned", b"by 1000".to_vec(), 0o640, 1000, 1000),
        Layer::new()
            .opaque("etc/app")
            .file("etc/app/new.conf", "new"),
    ])
}

/// What a directory holds, for whole-value comparisons: path, then `dir`, a file's content,
/// a link's target or `whiteout`.
fn tree(dir: &Path) -> Vec<String> {
    use std::os::unix::fs::FileTypeExt;
    fn walk(base: &Path, dir: &Path, out: &mut Vec<String>) {
        let mut entries: Vec<_> = std::fs::read_dir(dir)
            .expect("read dir")
            .map(|e| e.expect("entry").path())
            .collect();
        entries.sort();
        for path in entries {
            let rel = path
                .strip_prefix(base)
                .expect("prefix")
                .display()
                .to_string();
            let meta = std::fs::symlink_metadata(&path).expect("metadata");
            let kind = meta.file_type();
            if kind.is_dir() {
                let opaque =
                    rustix::fs::getxattr(&path, "user.overlay.opaque", &mut [0u8; 4]).is_ok();
                out.push(format!("{rel}/{}", if opaque { " (opaque)" } else { "" }));
                walk(base, &path, out);
            } else if kind.is_symlink() {
                let target = std::fs::read_link(&path).expect("link");
                if target != Path::new("busybox") {
                    out.push(format!("{rel} -> {}", target.display()));
                }
            } else if kind.is_char_device() {
                out.push(format!("{rel} (whiteout)"));
            } else if rel == "bin/busybox" {
                out.push(rel);
            } else {
                let text = std::fs::read_to_string(&path).expect("read");
                out.push(format!("{rel} = {text:?}"));
            }
        }
    }
    let mut out = Vec::new();
    walk(dir, dir, &mut out);
    out
}
