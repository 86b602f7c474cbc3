//! Importing images offline: an OCI image layout (a directory or its tar) or a `docker save`
//! / `podman save` archive. Every blob is checked against its digest and every layer against
//! the uncompressed digest its configuration lists.

use std::fs::File;
use std::path::{Component, Path, PathBuf};

use forge_types::ImageSource;
use serde::Deserialize;

use crate::oci::{self, ConfigFile, Document};
use crate::progress::{Progress, ProgressEvent};
use crate::store::{Base, Image, ImageStore, LayerMeta, Ownership};
use crate::unpack::{self, HashingReader};
use crate::{ImageError, reference};

/// One entry of a `docker save` archive's `manifest.json`.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "PascalCase")]
struct SavedImage {
    config: String,
    #[serde(default)]
    repo_tags: Option<Vec<String>>,
    layers: Vec<String>,
}

/// Annotations an OCI layout names its images with.
const CONTAINERD_NAME: &str = "io.containerd.image.name";
const REF_NAME: &str = "org.opencontainers.image.ref.name";

impl ImageStore {
    /// Imports every image in the archive or layout at `path`. `name` renames the image (the
    /// archive must then hold exactly one); an image with no name in the archive needs one.
    pub fn import(
        &self,
        path: &Path,
        name: Option<&str>,
        progress: &dyn Progress,
    ) -> Result<Vec<Image>, ImageError> {
        let fail = |reason: String| ImageError::Archive {
            path: path.to_path_buf(),
            reason,
        };
        let meta = std::fs::metadata(path).map_err(|e| fail(e.to_string()))?;
        // A tar is unpacked first (as plain files, owned by us) and read like a directory.
        let staging;
        let dir = if meta.is_dir() {
            path.to_path_buf()
        } else {
            staging = self.temp_dir()?;
            let file = File::open(path).map_err(|e| fail(e.to_string()))?;
            unpack::unpack(file, staging.path(), Ownership::Current)
                .map_err(|e| fail(format!("not a readable tar archive: {e}")))?;
            staging.path().to_path_buf()
        };
        let name = name.map(reference::normalize).transpose()?;
        let import = Import {
            store: self,
            source: path,
            dir: &dir,
            progress,
        };
        let images = if dir.join("manifest.json").is_file() {
            import.docker(name.as_deref())?
        } else if dir.join("index.json").is_file() {
            import.oci_layout(name.as_deref())?
        } else {
            return Err(fail(
                "neither a docker archive (manifest.json) nor an OCI layout (index.json)".into(),
            ));
        };
        for image in &images {
            self.insert(image.clone())?;
        }
        Ok(images)
    }
}

struct Import<'a> {
    store: &'a ImageStore,
    source: &'a Path,
    dir: &'a Path,
    progress: &'a dyn Progress,
}

impl Import<'_> {
    fn fail(&self, reason: impl Into<String>) -> ImageError {
        ImageError::Archive {
            path: self.source.to_path_buf(),
            reason: reason.into(),
        }
    }

    /// A path the archive names, kept inside the archive.
    fn inside(&self, relative: &str) -> Result<PathBuf, ImageError> {
        let path = Path::new(relative);
        let climbs = path
            .components()
            .any(|c| !matches!(c, Component::Normal(_) | Component::CurDir));
        if climbs || relative.is_empty() {
            return Err(self.fail(format!(
                "the archive names a path outside itself: {relative}"
            )));
        }
        Ok(self.dir.join(path))
    }

    fn read(&self, relative: &str) -> Result<Vec<u8>, ImageError> {
        let path = self.inside(relative)?;
        std::fs::read(&path).map_err(|e| self.fail(format!("{relative}: {e}")))
    }

    fn blob_path(&self, digest: &str) -> Result<PathBuf, ImageError> {
        let hex = oci::check_digest(digest, &self.source.display().to_string())?;
        Ok(self.dir.join("blobs/sha256").join(hex))
    }

    fn blob(&self, digest: &str, what: &str) -> Result<Vec<u8>, ImageError> {
        let path = self.blob_path(digest)?;
        let bytes = std::fs::read(&path).map_err(|e| self.fail(format!("{what} {digest}: {e}")))?;
        oci::verify(&bytes, digest, what, &self.source.display().to_string())?;
        Ok(bytes)
    }

    fn docker(&self, rename: Option<&str>) -> Result<Vec<Image>, ImageError> {
        let saved: Vec<SavedImage> = serde_json::from_slice(&self.read("manifest.json")?)
            .map_err(|e| self.fail(format!("manifest.json: {e}")))?;
        if rename.is_some() && saved.len() != 1 {
            return Err(self.fail(format!(
                "it holds {} images; a name applies to exactly one",
                saved.len()
            )));
        }
        let mut images = Vec::new();
        for entry in saved {
            let config_bytes = self.read(&entry.config)?;
            let id = oci::sha256(&config_bytes);
            let config = ConfigFile::parse(&config_bytes, &id)?;
            config.check_platform(&self.store.registries.platform()?, &id)?;
            if config.rootfs.diff_ids.len() != entry.layers.len() {
                return Err(self.fail(format!(
                    "{} lists {} layers but its configuration {}",
                    entry.config,
                    entry.layers.len(),
                    config.rootfs.diff_ids.len()
                )));
            }
            let mut layer_ids = Vec::new();
            let mut size = 0;
            for (index, (layer, diff_id)) in
                entry.layers.iter().zip(&config.rootfs.diff_ids).enumerate()
            {
                let path = self.inside(layer)?;
                size += self.layer(index, &path, None, diff_id)?;
                layer_ids.push(diff_id.trim_start_matches("sha256:").to_owned());
            }
            let names: Vec<String> = match rename {
                Some(name) => vec![name.to_owned()],
                None => entry
                    .repo_tags
                    .unwrap_or_default()
                    .iter()
                    .map(|t| reference::normalize(t))
                    .collect::<Result<_, _>>()?,
            };
            if names.is_empty() {
                return Err(self.fail(format!(
                    "image {id} has no name in the archive; pass one with --name"
                )));
            }
            for reference in names {
                images.push(self.image(
                    reference,
                    id.clone(),
                    None,
                    layer_ids.clone(),
                    &config,
                    size,
                    "docker-archive",
                ));
            }
        }
        Ok(images)
    }

    fn oci_layout(&self, rename: Option<&str>) -> Result<Vec<Image>, ImageError> {
        let index_bytes = self.read("index.json")?;
        let index = Document::parse(&index_bytes, "index.json")?;
        if rename.is_some() && index.manifests.len() != 1 {
            return Err(self.fail(format!(
                "its index lists {} images; a name applies to exactly one",
                index.manifests.len()
            )));
        }
        let platform = self.store.registries.platform()?;
        let mut images = Vec::new();
        for entry in &index.manifests {
            let name = match rename {
                Some(name) => name.to_owned(),
                None => layout_name(entry).ok_or_else(|| {
                    self.fail(format!(
                        "manifest {} has no name (annotation {REF_NAME}); pass one with --name",
                        entry.digest
                    ))
                })??,
            };
            let mut digest = entry.digest.clone();
            let mut document = Document::parse(&self.blob(&digest, "manifest")?, &name)?;
            if document.is_index() {
                digest.clone_from(&document.select(&platform, &name)?.digest);
                document = Document::parse(&self.blob(&digest, "platform manifest")?, &name)?;
            }
            let (config_desc, layers) = document.image_parts(&name)?;
            let config_bytes = self.blob(&config_desc.digest, "configuration")?;
            let config = ConfigFile::parse(&config_bytes, &name)?;
            config.check_platform(&platform, &name)?;
            if config.rootfs.diff_ids.len() != layers.len() {
                return Err(self.fail(format!(
                    "{name} has {} layers but {} layer digests",
                    layers.len(),
                    config.rootfs.diff_ids.len()
                )));
            }
            let mut layer_ids = Vec::new();
            let mut size = 0;
            for (index, (layer, diff_id)) in layers.iter().zip(&config.rootfs.diff_ids).enumerate()
            {
                let path = self.blob_path(&layer.digest)?;
                size += self.layer(index, &path, Some(&layer.digest), diff_id)?;
                layer_ids.push(diff_id.trim_start_matches("sha256:").to_owned());
            }
            self.store.put_blob(&config_desc.digest, &config_bytes)?;
            images.push(self.image(
                name,
                config_desc.digest.clone(),
                Some(digest),
                layer_ids,
                &config,
                size,
                "oci-layout",
            ));
        }
        Ok(images)
    }

    /// Unpacks the layer at `path` unless the store has it, checking its compressed digest
    /// (when the format names one) and its uncompressed one. Returns its size.
    fn layer(
        &self,
        index: usize,
        path: &Path,
        digest: Option<&str>,
        diff_id: &str,
    ) -> Result<u64, ImageError> {
        let id = diff_id.trim_start_matches("sha256:");
        let shown = digest.unwrap_or(diff_id).to_owned();
        if self.store.has_layer(id) {
            self.progress.event(ProgressEvent::LayerCached {
                index,
                digest: shown,
            });
            return Ok(self.store.layer_meta(id).map_or(0, |m| m.size_bytes));
        }
        self.progress.event(ProgressEvent::Unpacking {
            index,
            digest: shown.clone(),
        });
        let work = self.store.temp_dir()?;
        let root = work.path().join("root");
        std::fs::create_dir(&root).map_err(ImageError::io("create", &root))?;
        let file =
            File::open(path).map_err(|e| self.fail(format!("layer {}: {e}", path.display())))?;
        let mut raw = HashingReader::new(file);
        let unpacked = unpack::unpack(&mut raw, &root, self.store.ownership).map_err(|e| {
            ImageError::Layer {
                layer: shown.clone(),
                reason: e.to_string(),
                source: None,
            }
        })?;
        let (compressed, _) = raw
            .finish()
            .map_err(|e| self.fail(format!("layer {}: {e}", path.display())))?;
        let source = self.source.display().to_string();
        if let Some(expected) = digest
            && compressed != expected
        {
            return Err(ImageError::DigestMismatch {
                reference: source,
                what: format!("layer {}", index + 1),
                expected: expected.to_owned(),
                actual: compressed,
            });
        }
        if unpacked.diff_id != diff_id {
            return Err(ImageError::DigestMismatch {
                reference: source,
                what: format!("uncompressed layer {}", index + 1),
                expected: diff_id.to_owned(),
                actual: unpacked.diff_id,
            });
        }
        self.store.install_layer(
            &work,
            &LayerMeta {
                id: id.to_owned(),
                diff_id: Some(diff_id.to_owned()),
                size_bytes: unpacked.size_bytes,
                entries: unpacked.entries,
                created_at: jiff::Timestamp::now(),
            },
        )?;
        self.progress.event(ProgressEvent::LayerReady {
            index,
            digest: shown,
        });
        Ok(unpacked.size_bytes)
    }

    #[expect(clippy::too_many_arguments, reason = "one image record's fields")]
    fn image(
        &self,
        reference: String,
        id: String,
        digest: Option<String>,
        layers: Vec<String>,
        config: &ConfigFile,
        size_bytes: u64,
        format: &str,
    ) -> Image {
        Image {
            reference,
            id,
            digest,
            base: Base::Scratch,
            layers,
            config: config.run_config(),
            size_bytes,
            created_at: jiff::Timestamp::now(),
            source: ImageSource::Archive {
                path: self.source.display().to_string(),
                format: format.to_owned(),
            },
            parent: None,
            hidden: false,
        }
    }
}

/// The name an OCI layout gives an image: containerd's full-name annotation, or the
/// standard one when it holds a full reference rather than a bare tag.
fn layout_name(entry: &oci::Descriptor) -> Option<Result<String, ImageError>> {
    if let Some(full) = entry.annotations.get(CONTAINERD_NAME) {
        return Some(reference::normalize(full));
    }
    let name = entry.annotations.get(REF_NAME)?;
    if name.contains('/') || name.contains(':') {
        Some(reference::normalize(name))
    } else {
        None
    }
}
