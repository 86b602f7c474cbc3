//! The OCI (and Docker v2) document formats the store reads: manifests, indexes, image
//! configurations, and choosing one platform's manifest from an index.

use std::collections::BTreeMap;

use serde::Deserialize;
use sha2::{Digest as _, Sha256};

use crate::ImageError;
use crate::store::{RunConfig, hex};

pub(crate) const OCI_INDEX: &str = "application/vnd.oci.image.index.v1+json";
pub(crate) const OCI_MANIFEST: &str = "application/vnd.oci.image.manifest.v1+json";
pub(crate) const DOCKER_LIST: &str = "application/vnd.docker.distribution.manifest.list.v2+json";
pub(crate) const DOCKER_MANIFEST: &str = "application/vnd.docker.distribution.manifest.v2+json";

/// Media types a registry is asked for, in order of preference.
pub(crate) const ACCEPTED_MANIFESTS: [&str; 4] =
    [OCI_INDEX, OCI_MANIFEST, DOCKER_LIST, DOCKER_MANIFEST];

/// Layer media types the store unpacks.
const LAYER_TYPES: [&str; 6] = [
    "application/vnd.oci.image.layer.v1.tar",
    "application/vnd.oci.image.layer.v1.tar+gzip",
    "application/vnd.oci.image.layer.v1.tar+zstd",
    "application/vnd.docker.image.rootfs.diff.tar.gzip",
    "application/vnd.docker.image.rootfs.diff.tar",
    "application/vnd.oci.image.layer.nondistributable.v1.tar+gzip",
];

const CONFIG_TYPES: [&str; 2] = [
    "application/vnd.oci.image.config.v1+json",
    "application/vnd.docker.container.image.v1+json",
];

#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct Descriptor {
    #[serde(default)]
    pub(crate) media_type: String,
    pub(crate) digest: String,
    #[serde(default)]
    pub(crate) size: i64,
    #[serde(default)]
    pub(crate) platform: Option<Platform>,
    #[serde(default)]
    pub(crate) annotations: BTreeMap<String, String>,
}

#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub(crate) struct Platform {
    pub(crate) architecture: String,
    pub(crate) os: String,
    #[serde(default)]
    pub(crate) variant: Option<String>,
}

impl std::fmt::Display for Platform {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}/{}", self.os, self.architecture)?;
        if let Some(variant) = &self.variant {
            write!(f, "/{variant}")?;
        }
        Ok(())
    }
}

impl Platform {
    /// Parses `os/arch[/variant]`.
    pub(crate) fn parse(text: &str) -> Result<Self, ImageError> {
        let mut parts = text.split('/');
        match (parts.next(), parts.next(), parts.next(), parts.next()) {
            (Some(os), Some(arch), variant, None) if !os.is_empty() && !arch.is_empty() => {
                Ok(Self {
                    os: os.to_owned(),
                    architecture: arch.to_owned(),
                    variant: variant.map(str::to_owned),
                })
            }
            _ => Err(ImageError::InvalidReference {
                reference: text.to_owned(),
                reason: "a platform is os/arch or os/arch/variant, such as linux/amd64".into(),
            }),
        }
    }

    /// The platform this binary runs on, in OCI's words.
    pub(crate) fn host() -> Self {
        let (architecture, variant) = match std::env::consts::ARCH {
            "x86_64" => ("amd64", None),
            "aarch64" => ("arm64", Some("v8")),
            "arm" => ("arm", Some("v7")),
            "x86" => ("386", None),
            "powerpc64" => ("ppc64le", None),
            other => (other, None),
        };
        Self {
            os: "linux".into(),
            architecture: architecture.into(),
            variant: variant.map(str::to_owned),
        }
    }

    fn matches(&self, other: &Platform) -> bool {
        self.os == other.os
            && self.architecture == other.architecture
            && match (&self.variant, &other.variant) {
                (Some(want), Some(have)) => want == have,
                _ => true,
            }
    }
}

/// A manifest or an index: which one is told by its media type or by its fields.
#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct Document {
    #[serde(default)]
    pub(crate) schema_version: u32,
    #[serde(default)]
    pub(crate) media_type: Option<String>,
    #[serde(default)]
    pub(crate) config: Option<Descriptor>,
    #[serde(default)]
    pub(crate) layers: Vec<Descriptor>,
    #[serde(default)]
    pub(crate) manifests: Vec<Descriptor>,
}

impl Document {
    pub(crate) fn parse(bytes: &[u8], reference: &str) -> Result<Self, ImageError> {
        let doc: Self = serde_json::from_slice(bytes).map_err(|err| ImageError::Unsupported {
            reference: reference.to_owned(),
            what: "manifest",
            detail: format!("not valid JSON: {err}"),
        })?;
        if doc.schema_version != 2 {
            return Err(ImageError::Unsupported {
                reference: reference.to_owned(),
                what: "manifest schema",
                detail: format!(
                    "version {} (only schema 2, OCI or Docker, is read)",
                    doc.schema_version
                ),
            });
        }
        Ok(doc)
    }

    pub(crate) fn is_index(&self) -> bool {
        match self.media_type.as_deref() {
            Some(OCI_INDEX | DOCKER_LIST) => true,
            Some(_) => false,
            None => self.config.is_none() && !self.manifests.is_empty(),
        }
    }

    /// The manifest in this index for `platform`.
    pub(crate) fn select(
        &self,
        platform: &Platform,
        reference: &str,
    ) -> Result<&Descriptor, ImageError> {
        let candidates: Vec<&Descriptor> = self
            .manifests
            .iter()
            .filter(|d| d.platform.as_ref().is_some_and(|p| platform.matches(p)))
            .collect();
        // Prefer an exact variant match, then the first that fits.
        let exact = candidates.iter().find(|d| {
            d.platform
                .as_ref()
                .is_some_and(|p| p.variant == platform.variant)
        });
        if let Some(found) = exact.or(candidates.first()) {
            return Ok(found);
        }
        // An index without platforms (an OCI layout of one image) has one choice.
        if self.manifests.len() == 1 && self.manifests[0].platform.is_none() {
            return Ok(&self.manifests[0]);
        }
        let available: Vec<String> = self
            .manifests
            .iter()
            .filter_map(|d| d.platform.as_ref())
            .filter(|p| p.os != "unknown")
            .map(ToString::to_string)
            .collect();
        Err(ImageError::NoPlatform {
            reference: reference.to_owned(),
            platform: platform.to_string(),
            available: if available.is_empty() {
                "no platforms".into()
            } else {
                available.join(", ")
            },
        })
    }

    /// The configuration and layers of an image manifest, checked to be an image.
    pub(crate) fn image_parts(
        &self,
        reference: &str,
    ) -> Result<(&Descriptor, &[Descriptor]), ImageError> {
        let config = self
            .config
            .as_ref()
            .ok_or_else(|| ImageError::Unsupported {
                reference: reference.to_owned(),
                what: "manifest",
                detail: "it has no configuration".into(),
            })?;
        if !config.media_type.is_empty() && !CONFIG_TYPES.contains(&config.media_type.as_str()) {
            return Err(ImageError::Unsupported {
                reference: reference.to_owned(),
                what: "artifact",
                detail: format!(
                    "configuration type {} is not a container image",
                    config.media_type
                ),
            });
        }
        for layer in &self.layers {
            if !layer.media_type.is_empty() && !LAYER_TYPES.contains(&layer.media_type.as_str()) {
                return Err(ImageError::Unsupported {
                    reference: reference.to_owned(),
                    what: "layer type",
                    detail: layer.media_type.clone(),
                });
            }
        }
        Ok((config, &self.layers))
    }
}

/// An image configuration: the layers' uncompressed digests and how processes start.
#[derive(Debug, Clone, Deserialize)]
pub(crate) struct ConfigFile {
    #[serde(default)]
    pub(crate) architecture: Option<String>,
    #[serde(default)]
    pub(crate) os: Option<String>,
    #[serde(default)]
    pub(crate) config: Option<ContainerConfig>,
    pub(crate) rootfs: RootFs,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "PascalCase")]
pub(crate) struct ContainerConfig {
    #[serde(default)]
    pub(crate) env: Option<Vec<String>>,
    #[serde(default)]
    pub(crate) cmd: Option<Vec<String>>,
    #[serde(default)]
    pub(crate) entrypoint: Option<Vec<String>>,
    #[serde(default)]
    pub(crate) working_dir: Option<String>,
    #[serde(default)]
    pub(crate) user: Option<String>,
}

#[derive(Debug, Clone, Deserialize)]
pub(crate) struct RootFs {
    #[serde(default)]
    pub(crate) diff_ids: Vec<String>,
}

impl ConfigFile {
    pub(crate) fn parse(bytes: &[u8], reference: &str) -> Result<Self, ImageError> {
        let config: Self =
            serde_json::from_slice(bytes).map_err(|err| ImageError::Unsupported {
                reference: reference.to_owned(),
                what: "image configuration",
                detail: err.to_string(),
            })?;
        if let Some(os) = &config.os
            && os != "linux"
        {
            return Err(ImageError::Unsupported {
                reference: reference.to_owned(),
                what: "operating system",
                detail: format!("{os} (sandboxes run Linux images)"),
            });
        }
        for diff_id in &config.rootfs.diff_ids {
            check_digest(diff_id, reference)?;
        }
        Ok(config)
    }

    /// Refuses an image built for another CPU than `platform`'s: its programs could not run.
    pub(crate) fn check_platform(
        &self,
        platform: &Platform,
        reference: &str,
    ) -> Result<(), ImageError> {
        match &self.architecture {
            Some(arch) if !arch.is_empty() && arch != &platform.architecture => {
                Err(ImageError::NoPlatform {
                    reference: reference.to_owned(),
                    platform: platform.to_string(),
                    available: format!("linux/{arch}"),
                })
            }
            _ => Ok(()),
        }
    }

    pub(crate) fn run_config(&self) -> RunConfig {
        let config = self.config.clone().unwrap_or_default();
        RunConfig {
            env: config.env.unwrap_or_default(),
            working_dir: config.working_dir.filter(|w| !w.is_empty()),
            user: config.user.filter(|u| !u.is_empty()),
            entrypoint: config.entrypoint.unwrap_or_default(),
            cmd: config.cmd.unwrap_or_default(),
        }
    }
}

/// Checks that `digest` is `sha256:` and 64 lowercase hex digits (the only algorithm the
/// store names files by), returning the hex part.
pub(crate) fn check_digest<'a>(digest: &'a str, reference: &str) -> Result<&'a str, ImageError> {
    digest
        .strip_prefix("sha256:")
        .filter(|hex| {
            hex.len() == 64 && hex.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'))
        })
        .ok_or_else(|| ImageError::Unsupported {
            reference: reference.to_owned(),
            what: "digest",
            detail: format!("{digest} (expected sha256: and 64 hex digits)"),
        })
}

/// `sha256:` digest of `bytes`.
pub(crate) fn sha256(bytes: &[u8]) -> String {
    format!("sha256:{}", hex(&Sha256::digest(bytes)))
}

/// Checks `bytes` against `expected`, naming `what` in the error.
pub(crate) fn verify(
    bytes: &[u8],
    expected: &str,
    what: &str,
    reference: &str,
) -> Result<(), ImageError> {
    let actual = sha256(bytes);
    if actual == expected {
        Ok(())
    } else {
        Err(ImageError::DigestMismatch {
            reference: reference.to_owned(),
            what: what.to_owned(),
            expected: expected.to_owned(),
            actual,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use pretty_assertions::assert_eq;

    fn index(platforms: &[&str]) -> Document {
        let manifests: Vec<serde_json::Value> = platforms
            .iter()
            .enumerate()
            .map(|(i, p)| {
                let p = Platform::parse(p).unwrap();
                serde_json::json!({
                    "mediaType": OCI_MANIFEST,
                    "digest": format!("sha256:{i:064}"),
                    "size": 1,
                    "platform": {"os": p.os, "architecture": p.architecture, "variant": p.variant},
                })
            })
            .collect();
        let doc =
            serde_json::json!({"schemaVersion": 2, "mediaType": OCI_INDEX, "manifests": manifests});
        Document::parse(&serde_json::to_vec(&doc).unwrap(), "test").unwrap()
    }

    #[test]
    fn the_index_entry_for_the_platform_is_chosen() {
        let doc = index(&[
            "linux/arm/v6",
            "linux/arm/v7",
            "linux/arm64/v8",
            "linux/amd64",
            "unknown/unknown",
        ]);
        let pick = |p: &str| {
            doc.select(&Platform::parse(p).unwrap(), "test")
                .map(|d| d.digest.clone())
        };
        assert_eq!(pick("linux/amd64").unwrap(), format!("sha256:{:064}", 3));
        assert_eq!(pick("linux/arm/v7").unwrap(), format!("sha256:{:064}", 1));
        assert_eq!(pick("linux/arm64").unwrap(), format!("sha256:{:064}", 2));
        let err = pick("linux/riscv64").unwrap_err();
        assert_eq!(
            err.to_string(),
            "test has no image for linux/riscv64 (it has: linux/arm/v6, linux/arm/v7, linux/arm64/v8, linux/amd64)"
        );
    }

    #[test]
    fn digests_are_checked_for_shape_and_content() {
        assert!(check_digest("sha256:abc", "r").is_err());
        assert!(check_digest(&format!("sha512:{:0128}", 0), "r").is_err());
        assert!(check_digest(&format!("sha256:{:064}", 0), "r").is_ok());
        let err = verify(b"x", &format!("sha256:{:064}", 0), "layer 1", "r").unwrap_err();
        assert!(matches!(err, ImageError::DigestMismatch { .. }), "{err}");
        verify(b"x", &sha256(b"x"), "layer 1", "r").unwrap();
    }

    #[test]
    fn schema_one_and_artifacts_are_refused() {
        let err = Document::parse(br#"{"schemaVersion":1}"#, "r").unwrap_err();
        assert!(err.to_string().contains("only schema 2"), "{err}");
        let doc = Document::parse(
            br#"{"schemaVersion":2,"config":{"mediaType":"application/vnd.cncf.helm.config.v1+json","digest":"sha256:00","size":1},"layers":[]}"#,
            "r",
        )
        .unwrap();
        let err = doc.image_parts("r").unwrap_err();
        assert!(err.to_string().contains("not a container image"), "{err}");
    }
}
