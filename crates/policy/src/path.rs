//! Lexical paths: the policy judges a path by its spelling after folding `.`, `..` and repeated
//! slashes, so `/workspace/../etc` is `/etc` and never counts as inside `/workspace`.
//!
//! Lexical is deliberate. The policy has no file system to look at; symlinks are the sandbox's
//! business, where file operations run inside the sandbox's mount namespace and resolve
//! beneath the session root. What this module guarantees is that no spelling of a path can
//! make it look like it is somewhere it is not.

/// Folds `.`, `..` and empty components of an absolute path: `//a/./b/../c/` is `/a/c`.
///
/// `..` at the root stays at the root, as the kernel does. A relative path gives `None`:
/// there is nothing to anchor it to, and the gateway promised absolute paths, so callers
/// treat it as being nowhere in particular.
pub fn normalize(path: &str) -> Option<String> {
    let rest = path.strip_prefix('/')?;
    let mut parts: Vec<&str> = Vec::new();
    for part in rest.split('/') {
        match part {
            "" | "." => {}
            ".." => {
                parts.pop();
            }
            name => parts.push(name),
        }
    }
    let mut normal = String::with_capacity(path.len());
    for part in &parts {
        normal.push('/');
        normal.push_str(part);
    }
    if normal.is_empty() {
        normal.push('/');
    }
    Some(normal)
}

/// Whether normalized `path` is `dir` or lies beneath it. Both must already be normalized;
/// comparing whole components is what keeps `/workspace-evil` out of `/workspace`.
pub fn is_within(path: &str, dir: &str) -> bool {
    if dir == "/" {
        return path.starts_with('/');
    }
    path.strip_prefix(dir)
        .is_some_and(|rest| rest.is_empty() || rest.starts_with('/'))
}

/// The deeper of two normalized paths when one contains the other: the part both allow.
pub fn narrower<'a>(a: &'a str, b: &'a str) -> Option<&'a str> {
    if is_within(a, b) {
        Some(a)
    } else if is_within(b, a) {
        Some(b)
    } else {
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use pretty_assertions::assert_eq;

    #[test]
    fn normalize_folds_dots_and_slashes() {
        let cases = [
            ("/", Some("/")),
            ("//", Some("/")),
            ("/workspace", Some("/workspace")),
            ("/workspace/", Some("/workspace")),
            ("//workspace//a/./b", Some("/workspace/a/b")),
            ("/workspace/../etc/passwd", Some("/etc/passwd")),
            ("/../../workspace", Some("/workspace")),
            ("/workspace/a/../../..", Some("/")),
            ("/a..b/c", Some("/a..b/c")),
            ("/.../x", Some("/.../x")),
            ("workspace/a", None),
            ("", None),
            ("./x", None),
        ];
        let got: Vec<_> = cases
            .iter()
            .map(|(input, _)| (*input, normalize(input)))
            .collect();
        let want: Vec<_> = cases
            .iter()
            .map(|(input, out)| (*input, out.map(str::to_owned)))
            .collect();
        assert_eq!(got, want);
    }

    #[test]
    fn within_compares_whole_components() {
        assert!(is_within("/workspace", "/workspace"));
        assert!(is_within("/workspace/a/b", "/workspace"));
        assert!(is_within("/etc", "/"));
        assert!(!is_within("/workspace-evil/a", "/workspace"));
        assert!(!is_within("/workspac", "/workspace"));
        assert!(!is_within("/tmp", "/workspace"));
    }

    #[test]
    fn narrower_keeps_the_deeper_path() {
        assert_eq!(
            narrower("/workspace", "/workspace/app"),
            Some("/workspace/app")
        );
        assert_eq!(
            narrower("/workspace/app", "/workspace"),
            Some("/workspace/app")
        );
        assert_eq!(narrower("/", "/tmp"), Some("/tmp"));
        assert_eq!(narrower("/tmp", "/workspace"), None);
    }
}
