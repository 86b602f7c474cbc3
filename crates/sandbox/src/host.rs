//! What this host can do for sandboxes: the facts `forge doctor` prints and the jail
//! backend relies on.

use std::fmt;
use std::path::Path;

use crate::cgroup::{CgroupLayout, Version};

/// Hardware virtualisation behind `/dev/kvm`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kvm {
    Absent,
    /// VT-x or AMD-V: stock guest kernels boot.
    Hardware(&'static str),
    /// `/dev/kvm` without VT-x or AMD-V (for example PVM): stock guest kernels do not boot.
    Paravirtual,
}

/// One line of the report: a capability, whether it is usable, and a detail.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Check {
    pub name: &'static str,
    pub ok: bool,
    pub detail: String,
}

/// Everything the host offers sandboxes.
#[derive(Debug, Clone)]
pub struct HostReport {
    pub checks: Vec<Check>,
}

impl HostReport {
    /// Probes the running host. Reads `/proc` and `/sys`; changes nothing.
    pub fn detect() -> Self {
        let mut checks = Vec::new();
        let uname = rustix::system::uname();
        checks.push(Check {
            name: "kernel",
            ok: true,
            detail: format!(
                "{} {} ({})",
                uname.sysname().to_string_lossy(),
                uname.release().to_string_lossy(),
                uname.machine().to_string_lossy()
            ),
        });
        let root = rustix::process::geteuid().is_root();
        checks.push(Check {
            name: "privileges",
            ok: true,
            detail: if root {
                "root: per-sandbox uid ranges, cgroups and idmapped workspaces".to_owned()
            } else {
                format!(
                    "uid {} without root: sandboxes map only this uid, cgroups only if delegated",
                    rustix::process::geteuid().as_raw()
                )
            },
        });
        let max_userns =
            read_trimmed("/proc/sys/user/max_user_namespaces").and_then(|v| v.parse::<u64>().ok());
        let unprivileged_clone = read_trimmed("/proc/sys/kernel/unprivileged_userns_clone");
        let userns_ok =
            max_userns.unwrap_or(1) > 0 && (root || unprivileged_clone.as_deref() != Some("0"));
        checks.push(Check {
            name: "namespaces",
            ok: userns_ok && Path::new("/proc/self/ns/cgroup").exists(),
            detail: format!(
                "user (max {}), pid, mount, ipc, uts, net, cgroup{}",
                max_userns.map_or_else(|| "unknown".to_owned(), |v| v.to_string()),
                if unprivileged_clone.as_deref() == Some("0") && !root {
                    "; unprivileged user namespaces are disabled (kernel.unprivileged_userns_clone=0)"
                } else {
                    ""
                }
            ),
        });
        let seccomp = read_trimmed("/proc/sys/kernel/seccomp/actions_avail");
        checks.push(Check {
            name: "seccomp",
            ok: seccomp.is_some(),
            detail: seccomp.map_or_else(
                || "not available".to_owned(),
                |a| format!("filter actions: {a}"),
            ),
        });
        let landlock = crate::sys::landlock_abi();
        checks.push(Check {
            name: "landlock",
            ok: landlock.is_some(),
            detail: landlock.map_or_else(
                || "not available (writes confined by permissions only)".to_owned(),
                |abi| format!("ABI {abi}"),
            ),
        });
        let layout = CgroupLayout::detect().unwrap_or_default();
        let mut parts: Vec<String> = layout
            .hierarchies
            .iter()
            .map(|h| {
                let names: Vec<&str> = h.controllers.iter().map(|c| c.name()).collect();
                let writable = rustix::fs::access(&h.own_dir, rustix::fs::Access::WRITE_OK).is_ok();
                format!(
                    "{} {} at {}{}",
                    h.version,
                    names.join(","),
                    h.own_dir.display(),
                    if writable { "" } else { " (not writable)" }
                )
            })
            .collect();
        let missing = layout.missing();
        if !missing.is_empty() {
            parts.push(format!(
                "missing: {}",
                missing
                    .iter()
                    .map(|c| c.name())
                    .collect::<Vec<_>>()
                    .join(",")
            ));
        }
        let versions: Vec<Version> = layout.hierarchies.iter().map(|h| h.version).collect();
        let kind = match (
            versions.contains(&Version::V1),
            versions.contains(&Version::V2),
        ) {
            (true, true) => "hybrid",
            (true, false) => "v1",
            (false, true) => "v2",
            (false, false) => "none",
        };
        checks.push(Check {
            name: "cgroups",
            ok: missing.is_empty(),
            detail: format!("{kind}: {}", parts.join("; ")),
        });
        let overlay = read_trimmed("/proc/filesystems")
            .is_some_and(|t| t.lines().any(|l| l.ends_with("\toverlay")));
        checks.push(Check {
            name: "overlayfs",
            ok: overlay,
            detail: if overlay {
                "available (mounted from inside user namespaces)".to_owned()
            } else {
                "not available".to_owned()
            },
        });
        let missing: Vec<&str> = ["pasta", "nsenter", "ip"]
            .into_iter()
            .filter(|tool| !on_path(tool))
            .collect();
        checks.push(Check {
            name: "network",
            ok: missing.is_empty(),
            detail: if missing.is_empty() {
                "pasta, nsenter and ip found: sandboxes may use network mode \"open\"".to_owned()
            } else {
                format!(
                    "{} not found: network mode \"open\" is unavailable (apt-get install passt iproute2 util-linux)",
                    missing.join(", ")
                )
            },
        });
        let kvm = kvm();
        checks.push(Check {
            name: "kvm",
            ok: matches!(kvm, Kvm::Hardware(_)),
            detail: match kvm {
                Kvm::Absent => "no /dev/kvm: microVM backends unavailable".to_owned(),
                Kvm::Hardware(kind) => format!("/dev/kvm with {kind}"),
                Kvm::Paravirtual => {
                    "/dev/kvm without VT-x or AMD-V (paravirtualised, e.g. PVM): stock guest kernels will not boot".to_owned()
                }
            },
        });
        Self { checks }
    }
}

impl fmt::Display for HostReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for check in &self.checks {
            writeln!(
                f,
                "{} {:<11} {}",
                if check.ok { "✓" } else { "✗" },
                check.name,
                check.detail
            )?;
        }
        Ok(())
    }
}

fn kvm() -> Kvm {
    if !Path::new("/dev/kvm").exists() {
        return Kvm::Absent;
    }
    let cpuinfo = read_trimmed("/proc/cpuinfo").unwrap_or_default();
    let flags = cpuinfo
        .lines()
        .find(|l| l.starts_with("flags"))
        .unwrap_or_default();
    if flags.split_whitespace().any(|f| f == "vmx") {
        Kvm::Hardware("Intel VT-x")
    } else if flags.split_whitespace().any(|f| f == "svm") {
        Kvm::Hardware("AMD-V")
    } else {
        Kvm::Paravirtual
    }
}

fn on_path(program: &str) -> bool {
    std::env::var_os("PATH")
        .is_some_and(|path| std::env::split_paths(&path).any(|dir| dir.join(program).is_file()))
}

fn read_trimmed(path: &str) -> Option<String> {
    std::fs::read_to_string(path)
        .ok()
        .map(|s| s.trim().to_owned())
}
