//! Image names: parsing and normalising them the way Docker does (`alpine` is
//! `docker.io/library/alpine:latest`), and shortening them back for people.

use oci_client::Reference;

use crate::ImageError;

/// Parses an image name into a fully qualified reference.
pub fn parse(name: &str) -> Result<Reference, ImageError> {
    let trimmed = name.trim();
    if trimmed.is_empty() {
        return Err(ImageError::InvalidReference {
            reference: name.to_owned(),
            reason: "the name is empty".into(),
        });
    }
    let reference = trimmed
        .parse::<Reference>()
        .map_err(|err| ImageError::InvalidReference {
            reference: name.to_owned(),
            reason: err.to_string(),
        })?;
    if reference
        .repository()
        .bytes()
        .any(|b| b.is_ascii_uppercase())
    {
        return Err(ImageError::InvalidReference {
            reference: name.to_owned(),
            reason: "repository names are lower case".into(),
        });
    }
    Ok(reference)
}

/// The fully qualified form of `name`: `alpine` → `docker.io/library/alpine:latest`.
pub fn normalize(name: &str) -> Result<String, ImageError> {
    parse(name).map(|r| r.whole())
}

/// The form people write: `docker.io/library/alpine:latest` → `alpine:latest`,
/// `docker.io/org/tool:1` → `org/tool:1`; other registries are kept.
pub fn short(reference: &str) -> String {
    reference
        .strip_prefix("docker.io/library/")
        .or_else(|| reference.strip_prefix("docker.io/"))
        .unwrap_or(reference)
        .to_owned()
}

/// Whether `registry` (`host[:port]`) is on this machine, where Docker speaks plain HTTP
/// without being told to.
pub(crate) fn is_loopback(registry: &str) -> bool {
    let host = match registry.rsplit_once(':') {
        Some((host, port)) if port.bytes().all(|b| b.is_ascii_digit()) => host,
        _ => registry,
    };
    let host = host.trim_start_matches('[').trim_end_matches(']');
    host == "localhost"
        || host
            .parse::<std::net::IpAddr>()
            .is_ok_and(|ip| ip.is_loopback())
}

#[cfg(test)]
mod tests {
    use super::*;
    use pretty_assertions::assert_eq;

    #[test]
    fn names_normalise_and_shorten_like_docker() {
        let cases = [
            ("alpine", "docker.io/library/alpine:latest", "alpine:latest"),
            (
                "python:3.12",
                "docker.io/library/python:3.12",
                "python:3.12",
            ),
            ("org/tool:1", "docker.io/org/tool:1", "org/tool:1"),
            (
                "127.0.0.1:5000/team/app:v2",
                "127.0.0.1:5000/team/app:v2",
                "127.0.0.1:5000/team/app:v2",
            ),
            ("ghcr.io/a/b", "ghcr.io/a/b:latest", "ghcr.io/a/b:latest"),
        ];
        let got: Vec<(String, String)> = cases
            .iter()
            .map(|(name, _, _)| {
                let full = normalize(name).unwrap();
                let short = short(&full);
                (full, short)
            })
            .collect();
        let want: Vec<(String, String)> = cases
            .iter()
            .map(|(_, full, short)| ((*full).to_owned(), (*short).to_owned()))
            .collect();
        assert_eq!(got, want);
    }

    #[test]
    fn bad_names_are_refused_with_the_reason() {
        for name in ["", "  ", "UPPER/case", "a:b:c:d", "x@sha256:12"] {
            let err = normalize(name).unwrap_err();
            assert!(
                matches!(err, ImageError::InvalidReference { .. }),
                "{name}: {err}"
            );
        }
    }

    #[test]
    fn loopback_registries_are_recognised() {
        let got: Vec<bool> = [
            "127.0.0.1:5000",
            "localhost:5000",
            "localhost",
            "[::1]:5000",
            "registry-1.docker.io",
            "10.0.0.1:5000",
        ]
        .iter()
        .map(|r| is_loopback(r))
        .collect();
        assert_eq!(got, [true, true, true, true, false, false]);
    }
}
