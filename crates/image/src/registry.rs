//! Pulling images from OCI registries with the distribution API, through `oci-client`: token
//! and basic authentication, mirrors tried before the registry they mirror, plain HTTP for
//! loopback and listed registries, a platform chosen from multi-platform indexes, and every
//! manifest, configuration and layer checked against its digest before it is kept.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::task::{Context, Poll};
use std::time::Duration;

use futures::StreamExt as _;
use oci_client::errors::OciDistributionError;
use oci_client::secrets::RegistryAuth;
use oci_client::{Client, Reference};
use serde::{Deserialize, Serialize};
use tokio::io::AsyncWrite;

use crate::oci::{self, ACCEPTED_MANIFESTS, ConfigFile, Descriptor, Document, Platform};
use crate::progress::{Progress, ProgressEvent};
use crate::store::{Base, Image, ImageStore, LayerMeta, TempDir};
use crate::unpack;
use crate::{ImageError, reference};
use forge_types::ImageSource;

/// Layers downloaded at once.
const PARALLEL_LAYERS: usize = 3;

/// How images are fetched: mirrors, plain-HTTP registries, credentials, platform.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct RegistryConfig {
    /// Mirrors per registry (`docker.io` is Docker Hub), as `host[:port]`, tried in order
    /// before the registry itself.
    pub mirrors: BTreeMap<String, Vec<String>>,
    /// Registries spoken to over plain HTTP. Loopback registries always are.
    pub insecure: Vec<String>,
    /// Credentials per registry; others come from Docker's `config.json` when present.
    pub credentials: BTreeMap<String, Credentials>,
    /// Platform to take from multi-platform images, such as `linux/arm64`; the host's when
    /// unset.
    pub platform: Option<String>,
    /// Whether spawning an image that is not in the store pulls it first.
    pub pull_missing: bool,
    /// Seconds to wait for a registry to accept a connection.
    pub connect_timeout_secs: u64,
}

impl Default for RegistryConfig {
    fn default() -> Self {
        Self {
            mirrors: BTreeMap::new(),
            insecure: Vec::new(),
            credentials: BTreeMap::new(),
            platform: None,
            pull_missing: true,
            connect_timeout_secs: 10,
        }
    }
}

/// A user name and password (or token) for one registry.
#[derive(Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Credentials {
    pub username: String,
    pub password: String,
}

impl std::fmt::Debug for Credentials {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Credentials")
            .field("username", &self.username)
            .field("password", &"<redacted>")
            .finish()
    }
}

impl RegistryConfig {
    pub(crate) fn platform(&self) -> Result<Platform, ImageError> {
        self.platform
            .as_deref()
            .map_or_else(|| Ok(Platform::host()), Platform::parse)
    }

    /// Where to try `registry`'s content: its mirrors, then itself.
    fn endpoints(&self, registry: &str) -> Vec<String> {
        let mut endpoints = self.mirrors.get(registry).cloned().unwrap_or_default();
        endpoints.push(registry.to_owned());
        endpoints
    }

    fn auth_for(&self, registry: &str) -> RegistryAuth {
        if let Some(creds) = self.credentials.get(registry) {
            return RegistryAuth::Basic(creds.username.clone(), creds.password.clone());
        }
        docker_config_auth(registry).unwrap_or(RegistryAuth::Anonymous)
    }

    fn client(&self, endpoints: &[String]) -> Client {
        crate::install_tls_provider();
        let mut plain: Vec<String> = self.insecure.clone();
        plain.extend(
            endpoints
                .iter()
                .filter(|e| reference::is_loopback(e))
                .cloned(),
        );
        let config = oci_client::client::ClientConfig {
            protocol: oci_client::client::ClientProtocol::HttpsExcept(plain),
            platform_resolver: None,
            connect_timeout: Some(Duration::from_secs(self.connect_timeout_secs.max(1))),
            read_timeout: Some(Duration::from_mins(2)),
            user_agent: concat!("forge/", env!("CARGO_PKG_VERSION")),
            ..Default::default()
        };
        Client::new(config)
    }
}

/// Credentials for `registry` from Docker's `config.json` (`$DOCKER_CONFIG` or
/// `~/.docker`), which `docker login` and `podman login` write.
fn docker_config_auth(registry: &str) -> Option<RegistryAuth> {
    use base64::Engine as _;
    let dir = std::env::var_os("DOCKER_CONFIG")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".docker")))?;
    let bytes = std::fs::read(dir.join("config.json")).ok()?;
    let config: serde_json::Value = serde_json::from_slice(&bytes).ok()?;
    let auths = config.get("auths")?.as_object()?;
    let keys: Vec<String> = if registry == "docker.io" {
        vec![
            "https://index.docker.io/v1/".into(),
            "index.docker.io".into(),
            "docker.io".into(),
        ]
    } else {
        vec![registry.to_owned(), format!("https://{registry}")]
    };
    let entry = keys.iter().find_map(|k| auths.get(k))?;
    let encoded = entry.get("auth")?.as_str()?;
    let decoded = base64::engine::general_purpose::STANDARD
        .decode(encoded)
        .ok()?;
    let text = String::from_utf8(decoded).ok()?;
    let (user, pass) = text.split_once(':')?;
    Some(RegistryAuth::Basic(user.to_owned(), pass.to_owned()))
}

/// The pull of one reference from one endpoint.
struct Pull<'a> {
    store: &'a ImageStore,
    client: Client,
    reference: Reference,
    /// The reference as people wrote it, for messages.
    shown: String,
    endpoint: String,
    progress: &'a dyn Progress,
}

impl ImageStore {
    /// Pulls `name` from its registry (or a mirror) into the store and returns the image.
    /// Layers already in the store are not downloaded again.
    pub async fn pull(&self, name: &str, progress: &dyn Progress) -> Result<Image, ImageError> {
        let reference = reference::parse(name)?;
        let registry = reference.registry().to_owned();
        let endpoints = self.registries.endpoints(&registry);
        let client = self.registries.client(&endpoints);
        let mut last_error = None;
        for endpoint in &endpoints {
            let mut target = reference.clone();
            if endpoint != &registry {
                target.set_mirror_registry(endpoint.clone());
            }
            let pull = Pull {
                store: self,
                client: client.clone(),
                reference: target,
                shown: reference.whole(),
                endpoint: endpoint.clone(),
                progress,
            };
            match pull.run().await {
                Ok(image) => return Ok(image),
                // A mirror that is down or lacks the image gives way to the next endpoint;
                // anything else (a digest mismatch, a refused credential) is final.
                Err(err) if endpoint != &registry && mirror_may_fall_through(&err) => {
                    tracing::info!(mirror = %endpoint, error = %err, "mirror failed; trying the next endpoint");
                    last_error = Some(err);
                }
                Err(err) => return Err(err),
            }
        }
        Err(last_error.unwrap_or_else(|| ImageError::Unreachable {
            reference: reference.whole(),
            registry,
            reason: "no endpoint to try".into(),
        }))
    }
}

fn mirror_may_fall_through(err: &ImageError) -> bool {
    matches!(
        err,
        ImageError::Unreachable { .. } | ImageError::NotFound { .. } | ImageError::Registry { .. }
    )
}

impl Pull<'_> {
    async fn run(self) -> Result<Image, ImageError> {
        let auth = self.store.registries.auth_for(self.reference.registry());
        let (manifest_bytes, manifest_digest) = self.manifest(&self.reference, &auth).await?;
        let mut document = Document::parse(&manifest_bytes, &self.shown)?;
        let mut image_digest = manifest_digest.clone();
        if document.is_index() {
            let platform = self.store.registries.platform()?;
            let chosen = document.select(&platform, &self.shown)?.digest.clone();
            oci::check_digest(&chosen, &self.shown)?;
            let by_digest = self.reference.clone_with_digest(chosen.clone());
            let (bytes, _) = self.manifest(&by_digest, &auth).await?;
            oci::verify(&bytes, &chosen, "platform manifest", &self.shown)?;
            document = Document::parse(&bytes, &self.shown)?;
            if document.is_index() {
                return Err(ImageError::Unsupported {
                    reference: self.shown.clone(),
                    what: "index",
                    detail: "an index nested in an index".into(),
                });
            }
            image_digest = chosen;
        }
        let (config_desc, layers) = document.image_parts(&self.shown)?;
        oci::check_digest(&config_desc.digest, &self.shown)?;
        let mut config_bytes = Vec::new();
        self.client
            .pull_blob(
                &self.reference,
                config_desc.digest.as_str(),
                &mut config_bytes,
            )
            .await
            .map_err(|e| self.error(e, "configuration"))?;
        oci::verify(
            &config_bytes,
            &config_desc.digest,
            "configuration",
            &self.shown,
        )?;
        let config = ConfigFile::parse(&config_bytes, &self.shown)?;
        config.check_platform(&self.store.registries.platform()?, &self.shown)?;
        if config.rootfs.diff_ids.len() != layers.len() {
            return Err(ImageError::Unsupported {
                reference: self.shown.clone(),
                what: "image",
                detail: format!(
                    "{} layers but {} layer digests in its configuration",
                    layers.len(),
                    config.rootfs.diff_ids.len()
                ),
            });
        }
        for layer in layers {
            oci::check_digest(&layer.digest, &self.shown)?;
        }
        let total: u64 = layers
            .iter()
            .map(|l| u64::try_from(l.size).unwrap_or(0))
            .sum();
        self.progress.event(ProgressEvent::Resolved {
            reference: self.shown.clone(),
            digest: image_digest.clone(),
            layers: layers.len(),
            bytes: total,
        });

        // Owned, so that the stream's type names no borrowed iterator (the future must be
        // `Send` for any lifetime).
        let jobs: Vec<(usize, Descriptor, String)> = layers
            .iter()
            .cloned()
            .zip(config.rootfs.diff_ids.iter().cloned())
            .enumerate()
            .map(|(index, (desc, diff_id))| (index, desc, diff_id))
            .collect();
        let this = &self;
        let results: Vec<Result<u64, ImageError>> = futures::stream::iter(jobs)
            .map(|(index, desc, diff_id)| async move { this.layer(index, &desc, &diff_id).await })
            .buffered(PARALLEL_LAYERS)
            .collect()
            .await;
        let mut size = 0;
        for result in results {
            size += result?;
        }

        self.store.put_blob(&config_desc.digest, &config_bytes)?;
        self.store.put_blob(&manifest_digest, &manifest_bytes)?;
        let image = Image {
            reference: self.shown.clone(),
            id: config_desc.digest.clone(),
            digest: Some(manifest_digest),
            base: Base::Scratch,
            layers: config
                .rootfs
                .diff_ids
                .iter()
                .map(|d| d.trim_start_matches("sha256:").to_owned())
                .collect(),
            config: config.run_config(),
            size_bytes: size,
            created_at: jiff::Timestamp::now(),
            source: ImageSource::Registry {
                registry: self.endpoint.clone(),
            },
            parent: None,
            hidden: false,
        };
        self.store.insert(image.clone())?;
        Ok(image)
    }

    /// Fetches a manifest, checking it against the digest the reference pins (if any) and
    /// the one the registry announces.
    async fn manifest(
        &self,
        reference: &Reference,
        auth: &RegistryAuth,
    ) -> Result<(Vec<u8>, String), ImageError> {
        let (bytes, announced) = self
            .client
            .pull_manifest_raw(reference, auth, &ACCEPTED_MANIFESTS)
            .await
            .map_err(|e| self.error(e, "manifest"))?;
        let actual = oci::sha256(&bytes);
        if let Some(pinned) = reference.digest()
            && pinned != actual
        {
            return Err(ImageError::DigestMismatch {
                reference: self.shown.clone(),
                what: "manifest".into(),
                expected: pinned.to_owned(),
                actual,
            });
        }
        if announced.starts_with("sha256:") && announced != actual {
            return Err(ImageError::DigestMismatch {
                reference: self.shown.clone(),
                what: "manifest (as the registry announced it)".into(),
                expected: announced,
                actual,
            });
        }
        Ok((bytes.to_vec(), actual))
    }

    /// Downloads, verifies and unpacks one layer unless the store has it; returns its size.
    async fn layer(
        &self,
        index: usize,
        desc: &Descriptor,
        diff_id: &str,
    ) -> Result<u64, ImageError> {
        let id = diff_id.trim_start_matches("sha256:").to_owned();
        let digest = desc.digest.clone();
        if let Some(meta) = self
            .store
            .layer_meta(&id)
            .filter(|_| self.store.has_layer(&id))
        {
            self.progress
                .event(ProgressEvent::LayerCached { index, digest });
            return Ok(meta.size_bytes);
        }
        let work = self.store.temp_dir()?;
        let blob = work.path().join("blob");
        let file = tokio::fs::File::create(&blob)
            .await
            .map_err(ImageError::io("create", &blob))?;
        let mut counter = Counting {
            inner: file,
            done: Arc::new(AtomicU64::new(0)),
            reported: 0,
            total: u64::try_from(desc.size).unwrap_or(0),
            index,
            digest: digest.clone(),
            progress: self.progress,
        };
        self.client
            .pull_blob(&self.reference, desc.digest.as_str(), &mut counter)
            .await
            .map_err(|e| self.error(e, &format!("layer {} ({digest})", index + 1)))?;
        tokio::io::AsyncWriteExt::flush(&mut counter.inner)
            .await
            .map_err(ImageError::io("write", &blob))?;
        drop(counter);
        self.progress.event(ProgressEvent::Unpacking {
            index,
            digest: digest.clone(),
        });
        let ownership = self.store.ownership;
        let shown = self.shown.clone();
        let expected = diff_id.to_owned();
        let layer_digest = digest.clone();
        let meta = tokio::task::spawn_blocking(move || {
            unpack_verified(
                &work,
                &blob,
                ownership,
                &expected,
                &layer_digest,
                &shown,
                index,
            )
            .map(|meta| (meta, work))
        })
        .await
        .map_err(|e| ImageError::layer(&id, format!("unpacking stopped: {e}")))??;
        let (meta, work) = meta;
        self.store.install_layer(&work, &meta)?;
        self.progress
            .event(ProgressEvent::LayerReady { index, digest });
        Ok(meta.size_bytes)
    }

    fn error(&self, err: OciDistributionError, what: &str) -> ImageError {
        classify(err, &self.shown, &self.endpoint, what)
    }
}

/// Unpacks the downloaded `blob` into `work/root` and checks its uncompressed digest.
fn unpack_verified(
    work: &TempDir,
    blob: &std::path::Path,
    ownership: crate::store::Ownership,
    diff_id: &str,
    digest: &str,
    shown: &str,
    index: usize,
) -> Result<LayerMeta, ImageError> {
    let id = diff_id.trim_start_matches("sha256:");
    let root = work.path().join("root");
    std::fs::create_dir(&root).map_err(ImageError::io("create", &root))?;
    let file = std::fs::File::open(blob).map_err(ImageError::io("open", blob))?;
    let unpacked = unpack::unpack(file, &root, ownership).map_err(|err| ImageError::Layer {
        layer: digest.to_owned(),
        reason: err.to_string(),
        source: None,
    })?;
    let _ = std::fs::remove_file(blob);
    if unpacked.diff_id != diff_id {
        return Err(ImageError::DigestMismatch {
            reference: shown.to_owned(),
            what: format!("uncompressed layer {}", index + 1),
            expected: diff_id.to_owned(),
            actual: unpacked.diff_id,
        });
    }
    Ok(LayerMeta {
        id: id.to_owned(),
        diff_id: Some(diff_id.to_owned()),
        size_bytes: unpacked.size_bytes,
        entries: unpacked.entries,
        created_at: jiff::Timestamp::now(),
    })
}

/// Sorts a client error into "cannot reach", "refused", "not there" and "corrupt".
fn classify(err: OciDistributionError, shown: &str, registry: &str, what: &str) -> ImageError {
    let reference = shown.to_owned();
    let registry = registry.to_owned();
    match err {
        OciDistributionError::RequestError(e) if e.is_connect() || e.is_timeout() => {
            ImageError::Unreachable {
                reference,
                registry,
                reason: root_cause(&e),
            }
        }
        OciDistributionError::RequestError(e) => ImageError::Unreachable {
            reference,
            registry,
            reason: format!("{what}: {}", error_chain(&e)),
        },
        OciDistributionError::DigestError(oci_client::errors::DigestError::VerificationError {
            expected,
            actual,
        }) => ImageError::DigestMismatch {
            reference,
            what: what.to_owned(),
            expected,
            actual,
        },
        OciDistributionError::ImageManifestNotFoundError(_)
        | OciDistributionError::ServerError { code: 404, .. } => {
            ImageError::NotFound { name: reference }
        }
        OciDistributionError::RegistryError { envelope, .. }
            if envelope.errors.iter().any(|e| {
                matches!(
                    e.code,
                    oci_client::errors::OciErrorCode::ManifestUnknown
                        | oci_client::errors::OciErrorCode::NameUnknown
                        | oci_client::errors::OciErrorCode::NotFound
                )
            }) =>
        {
            ImageError::NotFound { name: reference }
        }
        OciDistributionError::UnauthorizedError { .. }
        | OciDistributionError::AuthenticationFailure(_) => ImageError::Registry {
            reference,
            registry,
            reason: format!(
                "{what}: not authorized (log in with `docker login {}` or set credentials in the configuration)",
                reference_registry(shown)
            ),
        },
        other => ImageError::Registry {
            reference,
            registry,
            reason: format!("{what}: {other}"),
        },
    }
}

fn reference_registry(shown: &str) -> String {
    reference::parse(shown).map_or_else(|_| shown.to_owned(), |r| r.registry().to_owned())
}

/// The innermost cause ("connection refused", "failed to lookup address information"):
/// what a person needs, without the layers of HTTP client wrapping.
fn root_cause(err: &dyn std::error::Error) -> String {
    let mut cause = err;
    while let Some(next) = cause.source() {
        cause = next;
    }
    let text = cause.to_string();
    if err.to_string().contains("timed out") || text.is_empty() {
        return err.to_string();
    }
    text
}

fn error_chain(err: &dyn std::error::Error) -> String {
    let mut text = err.to_string();
    let mut source = err.source();
    while let Some(cause) = source {
        let cause_text = cause.to_string();
        if !text.contains(&cause_text) {
            text.push_str(": ");
            text.push_str(&cause_text);
        }
        source = cause.source();
    }
    text
}

/// Counts bytes written through it and reports them as download progress.
struct Counting<'a, W> {
    inner: W,
    done: Arc<AtomicU64>,
    reported: u64,
    total: u64,
    index: usize,
    digest: String,
    progress: &'a dyn Progress,
}

impl<W: AsyncWrite + Unpin> AsyncWrite for Counting<'_, W> {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<std::io::Result<usize>> {
        let poll = Pin::new(&mut self.inner).poll_write(cx, buf);
        if let Poll::Ready(Ok(n)) = &poll {
            let done = self.done.fetch_add(*n as u64, Ordering::Relaxed) + *n as u64;
            // Reports at most every 256 KiB, and at the end.
            if done - self.reported >= 256 << 10 || done == self.total {
                self.reported = done;
                self.progress.event(ProgressEvent::Downloading {
                    index: self.index,
                    digest: self.digest.clone(),
                    done,
                    total: self.total,
                });
            }
        }
        poll
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.inner).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }
}
