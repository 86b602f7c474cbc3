//! Images for tests, built here from scratch: layers as tar streams, written out as an OCI
//! image layout or a `docker save` archive, and a real registry (Debian's `docker-registry`)
//! on loopback that `skopeo` pushes them to.
//!
//! The base layer is `busybox` (from Debian's `busybox-static`, a static binary) with its
//! applets linked in `/bin`, so images built here run real shells.

#![expect(
    clippy::expect_used,
    reason = "fixtures for tests: a failure should stop the test loudly"
)]

use std::path::{Path, PathBuf};
use std::process::{Child, Stdio};
use std::time::{Duration, Instant};

use sha2::{Digest as _, Sha256};

/// Where Debian's `busybox-static` installs its binary.
pub const BUSYBOX: &str = "/bin/busybox";

/// One entry of a layer.
#[derive(Debug, Clone)]
enum Entry {
    Dir {
        path: String,
        mode: u32,
    },
    File {
        path: String,
        data: Vec<u8>,
        mode: u32,
        uid: u64,
        gid: u64,
    },
    Symlink {
        path: String,
        target: String,
    },
}

/// A layer, described entry by entry.
#[derive(Debug, Clone, Default)]
pub struct Layer {
    entries: Vec<Entry>,
}

impl Layer {
    pub fn new() -> Self {
        Self::default()
    }

    /// A base layer: `busybox` with its applets (sh, ls, cat, id, stat…) linked in `/bin`,
    /// and the usual top-level directories.
    pub fn busybox() -> Self {
        let binary = std::fs::read(BUSYBOX).unwrap_or_else(|e| {
            panic!("{BUSYBOX}: {e}; install Debian's busybox-static (see .ci/run)")
        });
        let mut layer = Self::new();
        for dir in ["bin", "etc", "root", "tmp", "usr", "usr/bin", "var"] {
            layer = layer.dir(dir, 0o755);
        }
        layer = layer
            .file_with("bin/busybox", binary, 0o755, 0, 0)
            .file(
                "etc/passwd",
                "root:x:0:0:root:/root:/bin/sh\nnobody:x:65534:65534:nobody:/:/bin/false\n",
            )
            .file("etc/group", "root:x:0:\nnogroup:x:65534:\n");
        for applet in [
            "sh", "ls", "cat", "echo", "id", "stat", "mkdir", "rm", "touch", "test", "head", "wc",
            "sleep", "chown", "chmod", "mv", "cp", "grep", "true", "false", "env", "sync",
        ] {
            layer = layer.symlink(&format!("bin/{applet}"), "busybox");
        }
        layer
    }

    #[must_use]
    pub fn dir(mut self, path: &str, mode: u32) -> Self {
        self.entries.push(Entry::Dir {
            path: path.to_owned(),
            mode,
        });
        self
    }

    #[must_use]
    pub fn file(self, path: &str, data: &str) -> Self {
        self.file_with(path, data.as_bytes().to_vec(), 0o644, 0, 0)
    }

    #[must_use]
    pub fn file_with(mut self, path: &str, data: Vec<u8>, mode: u32, uid: u64, gid: u64) -> Self {
        self.entries.push(Entry::File {
            path: path.to_owned(),
            data,
            mode,
            uid,
            gid,
        });
        self
    }

    #[must_use]
    pub fn symlink(mut self, path: &str, target: &str) -> Self {
        self.entries.push(Entry::Symlink {
            path: path.to_owned(),
            target: target.to_owned(),
        });
        self
    }

    /// Deletes `path` of a lower layer (an OCI whiteout, `.wh.NAME`).
    #[must_use]
    pub fn whiteout(self, path: &str) -> Self {
        let (dir, name) = path.rsplit_once('/').map_or(("", path), |(d, n)| (d, n));
        let marker = if dir.is_empty() {
            format!(".wh.{name}")
        } else {
            format!("{dir}/.wh.{name}")
        };
        self.file(&marker, "")
    }

    /// Hides everything lower layers have in `dir` (an opaque directory).
    #[must_use]
    pub fn opaque(self, dir: &str) -> Self {
        self.dir(dir, 0o755)
            .file(&format!("{dir}/.wh..wh..opq"), "")
    }

    /// The layer as an uncompressed tar stream.
    pub fn tar(&self) -> Vec<u8> {
        let mut builder = tar::Builder::new(Vec::new());
        for entry in &self.entries {
            let mut header = tar::Header::new_gnu();
            header.set_mtime(1_700_000_000);
            match entry {
                Entry::Dir { path, mode } => {
                    header.set_entry_type(tar::EntryType::Directory);
                    header.set_mode(*mode);
                    header.set_size(0);
                    builder
                        .append_data(&mut header, format!("{path}/"), std::io::empty())
                        .expect("append dir");
                }
                Entry::File {
                    path,
                    data,
                    mode,
                    uid,
                    gid,
                } => {
                    header.set_entry_type(tar::EntryType::Regular);
                    header.set_mode(*mode);
                    header.set_uid(*uid);
                    header.set_gid(*gid);
                    header.set_size(data.len() as u64);
                    builder
                        .append_data(&mut header, path, data.as_slice())
                        .expect("append file");
                }
                Entry::Symlink { path, target } => {
                    header.set_entry_type(tar::EntryType::Symlink);
                    header.set_mode(0o777);
                    header.set_size(0);
                    builder
                        .append_link(&mut header, path, target)
                        .expect("append link");
                }
            }
        }
        builder.into_inner().expect("finish tar")
    }
}

/// `sha256:` and the hex digest of `bytes`.
pub fn digest(bytes: &[u8]) -> String {
    use std::fmt::Write as _;
    Sha256::digest(bytes)
        .iter()
        .fold(String::from("sha256:"), |mut out, b| {
            let _ = write!(out, "{b:02x}");
            out
        })
}

fn gzip(bytes: &[u8]) -> Vec<u8> {
    let mut encoder = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
    std::io::Write::write_all(&mut encoder, bytes).expect("gzip");
    encoder.finish().expect("gzip")
}

/// An image: layers bottom first, an environment and a platform.
#[derive(Debug, Clone)]
pub struct TestImage {
    pub layers: Vec<Layer>,
    pub env: Vec<String>,
    pub architecture: String,
}

/// What writing an image produced.
#[derive(Debug, Clone)]
pub struct Written {
    pub manifest_digest: String,
    pub config_digest: String,
    /// Compressed layer digests, bottom first.
    pub layer_digests: Vec<String>,
}

impl TestImage {
    pub fn new(layers: Vec<Layer>) -> Self {
        Self {
            layers,
            env: vec![
                "PATH=/usr/local/bin:/usr/bin:/bin".into(),
                "FROM_IMAGE=yes".into(),
            ],
            architecture: "amd64".into(),
        }
    }

    fn config(&self, diff_ids: &[String]) -> Vec<u8> {
        serde_json::to_vec(&serde_json::json!({
            "architecture": self.architecture,
            "os": "linux",
            "config": {"Env": self.env, "Cmd": ["/bin/sh"], "WorkingDir": "/"},
            "rootfs": {"type": "layers", "diff_ids": diff_ids},
        }))
        .expect("config json")
    }

    /// Writes the image's blobs into the OCI layout at `dir` (created if missing) and adds it
    /// to the layout's index under `tag`.
    pub fn write_oci_layout(&self, dir: &Path, tag: &str) -> Written {
        let blobs = dir.join("blobs/sha256");
        std::fs::create_dir_all(&blobs).expect("blobs dir");
        let put = |bytes: &[u8]| {
            let d = digest(bytes);
            std::fs::write(blobs.join(d.trim_start_matches("sha256:")), bytes).expect("blob");
            d
        };
        let mut diff_ids = Vec::new();
        let mut layers = Vec::new();
        for layer in &self.layers {
            let tar = layer.tar();
            diff_ids.push(digest(&tar));
            let gz = gzip(&tar);
            let size = gz.len();
            layers.push(serde_json::json!({
                "mediaType": "application/vnd.oci.image.layer.v1.tar+gzip",
                "digest": put(&gz),
                "size": size,
            }));
        }
        let config = self.config(&diff_ids);
        let config_digest = put(&config);
        let manifest = serde_json::to_vec(&serde_json::json!({
            "schemaVersion": 2,
            "mediaType": "application/vnd.oci.image.manifest.v1+json",
            "config": {
                "mediaType": "application/vnd.oci.image.config.v1+json",
                "digest": config_digest,
                "size": config.len(),
            },
            "layers": layers,
        }))
        .expect("manifest json");
        let manifest_digest = put(&manifest);
        let index_path = dir.join("index.json");
        let mut index: serde_json::Value = std::fs::read(&index_path)
            .ok()
            .and_then(|b| serde_json::from_slice(&b).ok())
            .unwrap_or_else(|| serde_json::json!({"schemaVersion": 2, "manifests": []}));
        index["manifests"]
            .as_array_mut()
            .expect("manifests")
            .push(serde_json::json!({
                "mediaType": "application/vnd.oci.image.manifest.v1+json",
                "digest": manifest_digest,
                "size": manifest.len(),
                "annotations": {"org.opencontainers.image.ref.name": tag},
                "platform": {"os": "linux", "architecture": self.architecture},
            }));
        std::fs::write(&index_path, serde_json::to_vec(&index).expect("index")).expect("index");
        std::fs::write(dir.join("oci-layout"), r#"{"imageLayoutVersion":"1.0.0"}"#)
            .expect("oci-layout");
        Written {
            manifest_digest,
            config_digest,
            layer_digests: layers
                .iter()
                .map(|l| l["digest"].as_str().unwrap_or_default().to_owned())
                .collect(),
        }
    }

    /// Writes a `docker save` archive (a tar of `manifest.json`, the configuration and one
    /// uncompressed `layer.tar` per layer) to `file`.
    pub fn write_docker_archive(&self, file: &Path, repo_tag: &str) {
        let mut builder = tar::Builder::new(Vec::new());
        let mut append = |name: &str, bytes: &[u8]| {
            let mut header = tar::Header::new_gnu();
            header.set_mode(0o644);
            header.set_size(bytes.len() as u64);
            header.set_mtime(1_700_000_000);
            builder
                .append_data(&mut header, name, bytes)
                .expect("append");
        };
        let mut diff_ids = Vec::new();
        let mut paths = Vec::new();
        for layer in &self.layers {
            let tar = layer.tar();
            let d = digest(&tar);
            let path = format!("{}/layer.tar", d.trim_start_matches("sha256:"));
            append(&path, &tar);
            diff_ids.push(d);
            paths.push(path);
        }
        let config = self.config(&diff_ids);
        let config_name = format!("{}.json", digest(&config).trim_start_matches("sha256:"));
        append(&config_name, &config);
        let manifest = serde_json::to_vec(&serde_json::json!([
            {"Config": config_name, "RepoTags": [repo_tag], "Layers": paths}
        ]))
        .expect("manifest");
        append("manifest.json", &manifest);
        let bytes = builder.into_inner().expect("finish tar");
        std::fs::write(file, bytes).expect("write archive");
    }
}

/// Writes an OCI layout holding an index of several platforms' images under `tag`.
pub fn write_multi_platform_layout(dir: &Path, tag: &str, images: &[TestImage]) -> String {
    let parts = tempfile::tempdir().expect("tempdir");
    let mut entries = Vec::new();
    for image in images {
        let written = image.write_oci_layout(parts.path(), "part");
        let manifest_bytes = std::fs::read(
            parts
                .path()
                .join("blobs/sha256")
                .join(written.manifest_digest.trim_start_matches("sha256:")),
        )
        .expect("manifest");
        entries.push(serde_json::json!({
            "mediaType": "application/vnd.oci.image.manifest.v1+json",
            "digest": written.manifest_digest,
            "size": manifest_bytes.len(),
            "platform": {"os": "linux", "architecture": image.architecture},
        }));
    }
    let blobs = dir.join("blobs/sha256");
    std::fs::create_dir_all(&blobs).expect("blobs");
    for entry in std::fs::read_dir(parts.path().join("blobs/sha256")).expect("read") {
        let entry = entry.expect("entry");
        std::fs::copy(entry.path(), blobs.join(entry.file_name())).expect("copy blob");
    }
    let index = serde_json::to_vec(&serde_json::json!({
        "schemaVersion": 2,
        "mediaType": "application/vnd.oci.image.index.v1+json",
        "manifests": entries,
    }))
    .expect("index");
    let index_digest = digest(&index);
    std::fs::write(
        blobs.join(index_digest.trim_start_matches("sha256:")),
        &index,
    )
    .expect("index blob");
    let top = serde_json::to_vec(&serde_json::json!({
        "schemaVersion": 2,
        "manifests": [{
            "mediaType": "application/vnd.oci.image.index.v1+json",
            "digest": index_digest,
            "size": index.len(),
            "annotations": {"org.opencontainers.image.ref.name": tag},
        }],
    }))
    .expect("top index");
    std::fs::write(dir.join("index.json"), top).expect("index.json");
    std::fs::write(dir.join("oci-layout"), r#"{"imageLayoutVersion":"1.0.0"}"#)
        .expect("oci-layout");
    index_digest
}

/// The user a password-protected [`Registry`] accepts.
pub const REGISTRY_USER: &str = "forge";
/// Its password.
pub const REGISTRY_PASSWORD: &str = "forge-test-password";
/// bcrypt of [`REGISTRY_PASSWORD`], as `htpasswd -B` writes it.
const REGISTRY_PASSWORD_BCRYPT: &str =
    "$2a$04$xG4Pp8JuF3Bnzqq794MqTOlx5S3Wt1s5FEV6P.cyPjnEZERdhPjTe";

/// A `docker-registry` serving on a free loopback port, stopped on drop.
#[derive(Debug)]
pub struct Registry {
    child: Child,
    /// `127.0.0.1:PORT`.
    pub address: String,
    storage: tempfile::TempDir,
    /// `user:password` when the registry wants basic authentication.
    credentials: Option<String>,
}

impl Registry {
    /// Starts a registry (with no authentication) and waits until it answers.
    pub fn start() -> Self {
        Self::start_with(false)
    }

    /// Starts a registry that wants [`REGISTRY_USER`] and [`REGISTRY_PASSWORD`] (HTTP basic
    /// authentication, from an htpasswd file).
    pub fn start_with_password() -> Self {
        Self::start_with(true)
    }

    fn start_with(password: bool) -> Self {
        use std::fmt::Write as _;
        let storage = tempfile::tempdir().expect("tempdir");
        let port = free_port();
        let address = format!("127.0.0.1:{port}");
        let config = storage.path().join("config.yml");
        let mut yaml = format!(
            "version: 0.1\nlog:\n  level: error\nstorage:\n  filesystem:\n    rootdirectory: {}\n  delete:\n    enabled: true\nhttp:\n  addr: {address}\n",
            storage.path().join("data").display()
        );
        if password {
            let htpasswd = storage.path().join("htpasswd");
            std::fs::write(
                &htpasswd,
                format!("{REGISTRY_USER}:{REGISTRY_PASSWORD_BCRYPT}\n"),
            )
            .expect("htpasswd");
            let _ = write!(
                yaml,
                "auth:\n  htpasswd:\n    realm: forge-test\n    path: {}\n",
                htpasswd.display()
            );
        }
        std::fs::write(&config, yaml).expect("registry config");
        #[expect(
            clippy::disallowed_methods,
            reason = "a test fixture: the registry a pull test talks to"
        )]
        let child = std::process::Command::new("docker-registry")
            .arg("serve")
            .arg(&config)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap_or_else(|e| {
                panic!("cannot start docker-registry: {e}; install Debian's docker-registry (see .ci/run)")
            });
        let registry = Self {
            child,
            address,
            storage,
            credentials: password.then(|| format!("{REGISTRY_USER}:{REGISTRY_PASSWORD}")),
        };
        let deadline = Instant::now() + Duration::from_secs(30);
        while std::net::TcpStream::connect(&registry.address).is_err() {
            assert!(Instant::now() < deadline, "docker-registry did not start");
            std::thread::sleep(Duration::from_millis(50));
        }
        registry
    }

    /// Pushes `tag` of the OCI layout at `layout` to `repo:tag` with `skopeo` (all platforms
    /// of an index).
    pub fn push(&self, layout: &Path, tag: &str, repo: &str) {
        #[expect(
            clippy::disallowed_methods,
            reason = "a test fixture: skopeo pushes the test's image"
        )]
        let mut command = std::process::Command::new("skopeo");
        command.args(["copy", "--all", "--dest-tls-verify=false", "--quiet"]);
        if let Some(credentials) = &self.credentials {
            command.arg(format!("--dest-creds={credentials}"));
        }
        let output = command
            .arg(format!("oci:{}:{tag}", layout.display()))
            .arg(format!("docker://{}/{repo}:{tag}", self.address))
            .output()
            .unwrap_or_else(|e| {
                panic!("cannot run skopeo: {e}; install Debian's skopeo (see .ci/run)")
            });
        assert!(
            output.status.success(),
            "skopeo copy failed: {}",
            String::from_utf8_lossy(&output.stderr)
        );
    }

    /// Replaces the stored content of blob `digest` (keeping its name), so that the registry
    /// serves bytes that do not match their digest.
    pub fn corrupt_blob(&self, digest: &str) {
        let hex = digest.trim_start_matches("sha256:");
        let path: PathBuf = self
            .storage
            .path()
            .join("data/docker/registry/v2/blobs/sha256")
            .join(&hex[..2])
            .join(hex)
            .join("data");
        let mut bytes = std::fs::read(&path).expect("stored blob");
        let last = bytes.len() - 1;
        bytes[last] ^= 0xff;
        std::fs::write(&path, bytes).expect("corrupt blob");
    }
}

impl Drop for Registry {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A loopback port nobody listens on right now.
pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("free port")
}
