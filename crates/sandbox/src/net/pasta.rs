//! `open` networking through `pasta` (Debian's `passt` package): a userspace TCP/IP stack
//! attached to the sandbox's network namespace that makes the sandbox's connections with
//! ordinary sockets of the host.
//!
//! The host's loopback is not mapped into the sandbox (`--no-map-gw`, and no port
//! forwarding in either direction), and cloud metadata addresses get `prohibit` routes in
//! the sandbox's namespace before any sandbox code runs; the sandbox's processes have no
//! capabilities, so they cannot remove them. `pasta` daemonises and records its pid beside the
//! sandbox's directory, from where destroy and recovery stop it.

use std::os::fd::OwnedFd;
use std::path::Path;
use std::process::Command;

/// The sandbox's address and gateway behind `pasta` (the addresses slirp made familiar).
const ADDRESS: &str = "10.0.2.15";
const GATEWAY: &str = "10.0.2.2";

/// Metadata services of cloud providers, unreachable from `open` sandboxes.
pub(crate) const BLOCKED: [&str; 3] = ["169.254.0.0/16", "100.100.100.200/32", "fd00:ec2::254/128"];

/// Where the `pasta` of the sandbox whose directory is `dir` records its pid: beside the
/// directory, which belongs to the sandbox's uid and is closed to a capability-less root.
pub(crate) fn pid_file(dir: &Path) -> std::path::PathBuf {
    dir.with_extension("pasta")
}

#[expect(
    clippy::disallowed_methods,
    reason = "pasta, nsenter and ip are host tools Forge runs for a sandbox, never user code"
)]
fn command(program: &str) -> Command {
    Command::new(program)
}

fn run(command: &mut Command, what: &str) -> Result<(), String> {
    let output = command
        .output()
        .map_err(|err| format!("cannot run {what}: {err}"))?;
    if output.status.success() {
        return Ok(());
    }
    Err(format!(
        "{what} failed ({}): {}",
        output.status,
        String::from_utf8_lossy(&output.stderr).trim()
    ))
}

/// Blocks metadata addresses in the sandbox's namespace and attaches `pasta` to it.
/// Blocking: runs host tools to completion (`pasta` returns once it has daemonised).
///
/// The namespaces come from the sandbox's init (it is not dumpable, so they cannot be
/// opened by pid without root); each tool gets them as its stdin (network) and stdout
/// (user) and names them `/proc/self/fd/0` and `/proc/self/fd/1`.
pub(crate) fn attach(
    netns: &OwnedFd,
    userns: &OwnedFd,
    dir: &Path,
    privileged: bool,
) -> Result<(), String> {
    let open = |fd: &OwnedFd| {
        fd.try_clone()
            .map_err(|err| format!("cannot pass the sandbox's namespaces on: {err}"))
    };
    for network in BLOCKED {
        let family = if network.contains(':') { "-6" } else { "-4" };
        let mut nsenter = command("nsenter");
        nsenter.arg("--net=/proc/self/fd/0");
        if !privileged {
            // Root holds CAP_NET_ADMIN over every namespace; without root, entering the
            // sandbox's user namespace (ours, where this uid is root) grants it.
            nsenter.args(["--user=/proc/self/fd/1", "--preserve-credentials"]);
        }
        nsenter
            .args(["ip", family, "route", "add", "prohibit", network])
            .stdin(open(netns)?)
            .stdout(open(userns)?);
        run(
            &mut nsenter,
            &format!("ip route add prohibit {network} in the sandbox"),
        )?;
    }
    let mut pasta = command("pasta");
    pasta
        .args(["--config-net", "--no-map-gw", "--quiet"])
        .args(["-t", "none", "-u", "none", "-T", "none", "-U", "none"])
        .args(["-a", ADDRESS, "-n", "24", "-g", GATEWAY])
        .args(["--netns", "/proc/self/fd/0", "--userns", "/proc/self/fd/1"])
        .arg("-P")
        .arg(pid_file(dir))
        .stdin(open(netns)?)
        .stdout(open(userns)?);
    if privileged {
        // As root, pasta would switch to `nobody`, which may not enter the sandbox's user
        // namespace.
        pasta.args(["--runas", "0"]);
    }
    run(&mut pasta, "pasta")
}

/// Stops the `pasta` serving the sandbox whose directory is `dir`, if one runs.
pub(crate) fn stop(dir: &Path) {
    let Ok(text) = std::fs::read_to_string(pid_file(dir)) else {
        return;
    };
    let Some(pid) = text
        .trim()
        .parse::<i32>()
        .ok()
        .and_then(rustix::process::Pid::from_raw)
    else {
        return;
    };
    // The pid may have been reused since a crash: only a pasta is stopped (it is passt
    // under another name, and re-executes itself as `passt.avx2` where it can).
    let comm =
        std::fs::read_to_string(format!("/proc/{}/comm", pid.as_raw_nonzero())).unwrap_or_default();
    let comm = comm.trim();
    if comm.starts_with("pasta") || comm.starts_with("passt") {
        let _ = rustix::process::kill_process(pid, rustix::process::Signal::KILL);
    }
    let _ = std::fs::remove_file(pid_file(dir));
}
