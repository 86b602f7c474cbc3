//! Building a Debian root file system with `mmdebstrap` from the Debian mirror this machine
//! is configured with, straight into a one-layer image.
//!
//! `mmdebstrap` picks its mode: as root it builds in a chroot in a private mount namespace,
//! otherwise in a user namespace of its own. Only packages apt verifies against the host's
//! Debian archive keys are installed (a mirror cannot substitute its own), so what runs
//! during the build is Debian's own maintainer scripts, as with `apt-get install`. The tree
//! arrives as a tar stream on its standard output and is unpacked as it arrives.

use std::io::BufRead as _;
use std::path::Path;
use std::process::Stdio;

use forge_types::ImageSource;

use crate::progress::{Progress, ProgressEvent};
use crate::store::{Base, Image, ImageStore, LayerMeta, RunConfig};
use crate::{ImageError, reference, unpack};

/// Package sets `mmdebstrap` can start from, smallest first.
pub const VARIANTS: [&str; 5] = ["essential", "apt", "required", "minbase", "important"];

const DEFAULT_MIRROR: &str = "http://deb.debian.org/debian";

/// What to build.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DebianBuild {
    /// Name of the image to create.
    pub name: String,
    /// Debian suite: `bookworm`, `stable`, `trixie`…
    pub suite: String,
    /// Packages on top of the variant's.
    pub packages: Vec<String>,
    /// One of [`VARIANTS`].
    pub variant: String,
    /// Mirror URL; the host's configured Debian mirror when `None`.
    pub mirror: Option<String>,
}

impl DebianBuild {
    fn validate(&self) -> Result<(), ImageError> {
        let bad = |reason: String| Err(ImageError::Build { reason });
        let word = |s: &str| {
            !s.is_empty()
                && s.bytes()
                    .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b"-.+".contains(&b))
                && !s.starts_with(['-', '.', '+'])
        };
        if !word(&self.suite) {
            return bad(format!("{:?} is not a Debian suite name", self.suite));
        }
        if !VARIANTS.contains(&self.variant.as_str()) {
            return bad(format!(
                "unknown variant {:?}; expected one of {}",
                self.variant,
                VARIANTS.join(", ")
            ));
        }
        if let Some(package) = self.packages.iter().find(|p| !word(p)) {
            return bad(format!("{package:?} is not a Debian package name"));
        }
        if let Some(mirror) = &self.mirror
            && !(mirror.starts_with("http://") || mirror.starts_with("https://"))
        {
            return bad(format!("mirror {mirror:?} is not an http(s) URL"));
        }
        reference::normalize(&self.name)?;
        Ok(())
    }
}

impl ImageStore {
    /// Builds `build` with `mmdebstrap` and records it as an image.
    pub fn build_debian(
        &self,
        build: &DebianBuild,
        progress: &dyn Progress,
    ) -> Result<Image, ImageError> {
        build.validate()?;
        let mirror = build.mirror.clone().unwrap_or_else(host_mirror);
        let mut args = vec![
            format!("--variant={}", build.variant),
            "--format=tar".to_owned(),
        ];
        if !build.packages.is_empty() {
            args.push(format!("--include={}", build.packages.join(",")));
        }
        args.extend([build.suite.clone(), "-".to_owned(), mirror]);
        progress.event(ProgressEvent::Log {
            line: format!("mmdebstrap {}", args.join(" ")),
        });

        #[expect(
            clippy::disallowed_methods,
            reason = "a host build tool, not user code: it installs archive-verified Debian packages"
        )]
        let mut command = std::process::Command::new("mmdebstrap");
        let mut child = command
            .args(&args)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .map_err(|err| ImageError::Build {
                reason: if err.kind() == std::io::ErrorKind::NotFound {
                    "mmdebstrap is not installed; install it with `apt-get install mmdebstrap`"
                        .into()
                } else {
                    format!("cannot run mmdebstrap: {err}")
                },
            })?;
        let stderr = child.stderr.take();
        let stdout = child.stdout.take();
        let work = self.temp_dir()?;
        let root = work.path().join("root");
        std::fs::create_dir(&root).map_err(ImageError::io("create", &root))?;
        let ownership = self.ownership;

        let (unpacked, log) = std::thread::scope(|scope| {
            let log = scope.spawn(move || {
                let mut tail = Vec::new();
                if let Some(stderr) = stderr {
                    for line in std::io::BufReader::new(stderr)
                        .lines()
                        .map_while(Result::ok)
                    {
                        progress.event(ProgressEvent::Log { line: line.clone() });
                        tail.push(line);
                        if tail.len() > 20 {
                            tail.remove(0);
                        }
                    }
                }
                tail
            });
            let unpacked = stdout.map(|out| unpack::unpack(out, &root, ownership));
            (unpacked, log.join().unwrap_or_default())
        });
        let status = child.wait().map_err(|err| ImageError::Build {
            reason: format!("mmdebstrap: {err}"),
        })?;
        if !status.success() {
            return Err(ImageError::Build {
                reason: format!("mmdebstrap exited with {status}:\n{}", log.join("\n")),
            });
        }
        let unpacked = match unpacked {
            Some(Ok(unpacked)) => unpacked,
            Some(Err(err)) => {
                return Err(ImageError::Build {
                    reason: format!("its output could not be unpacked: {err}"),
                });
            }
            None => {
                return Err(ImageError::Build {
                    reason: "mmdebstrap gave no output".into(),
                });
            }
        };
        let id = unpacked.diff_id.trim_start_matches("sha256:").to_owned();
        self.install_layer(
            &work,
            &LayerMeta {
                id: id.clone(),
                diff_id: Some(unpacked.diff_id.clone()),
                size_bytes: unpacked.size_bytes,
                entries: unpacked.entries,
                created_at: jiff::Timestamp::now(),
            },
        )?;
        let image = Image {
            reference: reference::normalize(&build.name)?,
            id: crate::oci::sha256(format!("debian\n{}", unpacked.diff_id).as_bytes()),
            digest: None,
            base: Base::Scratch,
            layers: vec![id],
            config: RunConfig {
                env: vec![
                    "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin".into(),
                ],
                ..RunConfig::default()
            },
            size_bytes: unpacked.size_bytes,
            created_at: jiff::Timestamp::now(),
            source: ImageSource::Debian {
                suite: build.suite.clone(),
                packages: build.packages.clone(),
            },
            parent: None,
            hidden: false,
        };
        self.insert(image.clone())?;
        Ok(image)
    }
}

/// The Debian mirror apt on this machine uses (the first non-security source), or
/// `deb.debian.org`.
fn host_mirror() -> String {
    mirror_from(Path::new("/etc/apt")).unwrap_or_else(|| DEFAULT_MIRROR.to_owned())
}

fn mirror_from(apt: &Path) -> Option<String> {
    let mut files = vec![apt.join("sources.list")];
    if let Ok(entries) = std::fs::read_dir(apt.join("sources.list.d")) {
        let mut more: Vec<_> = entries.flatten().map(|e| e.path()).collect();
        more.sort();
        files.extend(more);
    }
    for file in files {
        let Ok(text) = std::fs::read_to_string(&file) else {
            continue;
        };
        for line in text.lines().map(str::trim) {
            let uri = if let Some(rest) = line.strip_prefix("URIs:") {
                rest.split_whitespace().next()
            } else if let Some(rest) = line.strip_prefix("deb ") {
                rest.split_whitespace().find(|w| w.contains("://"))
            } else {
                None
            };
            if let Some(uri) = uri
                && uri.starts_with("http")
                && !uri.contains("security")
            {
                return Some(uri.trim_end_matches('/').to_owned());
            }
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;
    use pretty_assertions::assert_eq;

    #[test]
    fn the_mirror_comes_from_apt_sources_in_either_format() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir(dir.path().join("sources.list.d")).unwrap();
        std::fs::write(
            dir.path().join("sources.list.d/debian.sources"),
            "Types: deb\nURIs: http://security.debian.org/debian-security\nSuites: bookworm-security\n\nTypes: deb\nURIs: http://mirror.example/debian/\nSuites: bookworm\n",
        )
        .unwrap();
        assert_eq!(
            mirror_from(dir.path()).as_deref(),
            Some("http://mirror.example/debian")
        );
        std::fs::write(
            dir.path().join("sources.list"),
            "# comment\ndeb [arch=amd64] http://old.example/debian bookworm main\n",
        )
        .unwrap();
        assert_eq!(
            mirror_from(dir.path()).as_deref(),
            Some("http://old.example/debian")
        );
    }

    #[test]
    fn bad_builds_are_refused_before_anything_runs() {
        let build = |suite: &str, packages: &[&str], variant: &str| DebianBuild {
            name: "t".into(),
            suite: suite.into(),
            packages: packages.iter().map(|p| (*p).to_owned()).collect(),
            variant: variant.into(),
            mirror: None,
        };
        let errors: Vec<String> = [
            build("bookworm; rm -rf /", &[], "apt"),
            build("bookworm", &["--evil"], "apt"),
            build("bookworm", &["python3"], "huge"),
        ]
        .iter()
        .map(|b| b.validate().unwrap_err().to_string())
        .collect();
        assert_eq!(
            errors,
            [
                "debian build failed: \"bookworm; rm -rf /\" is not a Debian suite name",
                "debian build failed: \"--evil\" is not a Debian package name",
                "debian build failed: unknown variant \"huge\"; expected one of essential, apt, required, minbase, important",
            ]
        );
        build("bookworm", &["python3", "libc6-dev", "g++"], "apt")
            .validate()
            .unwrap();
    }
}
