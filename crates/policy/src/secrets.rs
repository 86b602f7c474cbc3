//! Which files hold secrets: environment files, private keys and credential stores. Unless a
//! policy sets `read_secrets`, no tool returns their contents.
//!
//! Judged by name, case-insensitively, because the policy never sees contents. The gateway
//! uses the same test ([`crate::Policy::conceals`]) to skip these files inside directory
//! operations (search, export), where no single call names them.

/// Environment-file templates that by convention hold placeholders, not values. An agent
/// reads them to learn which variables a project needs before writing its `.env`.
const ENV_TEMPLATES: [&str; 3] = [".env.example", ".env.sample", ".env.template"];

/// File names of SSH private keys; with `.pub` they are the public halves and not secret.
const KEY_NAMES: [&str; 4] = ["id_rsa", "id_dsa", "id_ecdsa", "id_ed25519"];

/// Extensions of key and certificate-bundle files.
const KEY_EXTENSIONS: [&str; 4] = [".pem", ".key", ".p12", ".pfx"];

/// Files that store passwords or tokens for a tool.
const CREDENTIAL_FILES: [&str; 7] = [
    ".netrc",
    "_netrc",
    ".git-credentials",
    ".npmrc",
    ".pypirc",
    ".pgpass",
    ".htpasswd",
];

/// Credential files known by their directory as well as their name.
const CREDENTIAL_PATHS: [[&str; 2]; 3] = [
    [".docker", "config.json"],
    [".kube", "config"],
    ["gh", "hosts.yml"],
];

/// Directories whose every file is key material, except public keys and host lists.
const KEY_DIRECTORIES: [&str; 2] = [".ssh", ".gnupg"];

/// Whether the file at `path` (absolute or not, any spelling) holds secrets by its name.
#[expect(
    clippy::case_sensitive_file_extension_comparisons,
    reason = "the path is lower-cased first"
)]
pub fn is_secret(path: &str) -> bool {
    let lower = path.to_ascii_lowercase();
    let normal = crate::path::normalize(&lower).unwrap_or(lower);
    let mut components = normal.rsplit('/');
    let name = components.next().unwrap_or_default();
    let parent = components.next().unwrap_or_default();

    if name.starts_with(".env") {
        return !ENV_TEMPLATES.contains(&name);
    }
    if KEY_NAMES.iter().any(|key| name.starts_with(key)) && !name.ends_with(".pub") {
        return true;
    }
    if KEY_EXTENSIONS.iter().any(|ext| name.ends_with(ext)) {
        return true;
    }
    if CREDENTIAL_FILES.contains(&name) || name.starts_with("credentials") {
        return true;
    }
    if CREDENTIAL_PATHS.contains(&[parent, name]) {
        return true;
    }
    let in_key_directory = normal
        .split('/')
        .rev()
        .skip(1)
        .any(|dir| KEY_DIRECTORIES.contains(&dir));
    in_key_directory && !name.ends_with(".pub") && !name.starts_with("known_hosts")
}

#[cfg(test)]
mod tests {
    use super::*;
    use pretty_assertions::assert_eq;

    #[test]
    fn secret_files_by_name() {
        let secret = [
            "/workspace/.env",
            "/workspace/app/.env.local",
            "/workspace/.ENV.production",
            "/workspace/.envrc",
            "/root/.ssh/id_rsa",
            "/home/u/.ssh/id_ed25519_sk",
            "/workspace/id_rsa.bak",
            "/workspace/certs/server.pem",
            "/workspace/tls/server.KEY",
            "/workspace/store.p12",
            "/root/.netrc",
            "/root/.git-credentials",
            "/workspace/credentials.json",
            "/root/.aws/credentials",
            "/workspace/.npmrc",
            "/root/.pypirc",
            "/root/.pgpass",
            "/root/.docker/config.json",
            "/root/.kube/config",
            "/root/.config/gh/hosts.yml",
            "/root/.ssh/config",
            "/root/.gnupg/private-keys-v1.d/abc.key",
            "/workspace/../root/.ssh/./id_rsa",
            "relative/.env",
        ];
        let missed: Vec<_> = secret.iter().filter(|p| !is_secret(p)).collect();
        assert_eq!(missed, Vec::<&&str>::new());
    }

    #[test]
    fn ordinary_files_are_not_secret() {
        let ordinary = [
            "/workspace/app.py",
            "/workspace/.env.example",
            "/workspace/.env.sample",
            "/workspace/.env.template",
            "/workspace/environment.yml",
            "/root/.ssh/id_rsa.pub",
            "/root/.ssh/known_hosts",
            "/workspace/keys.txt",
            "/workspace/monkey.py",
            "/workspace/docs/credential-rotation.md",
            "/workspace/config.json",
            "/workspace/.ssh",
            "/workspace/.env/../app.py",
        ];
        let flagged: Vec<_> = ordinary.iter().filter(|p| is_secret(p)).collect();
        assert_eq!(flagged, Vec::<&&str>::new());
    }
}
