//! Every `unsafe` block of the sandbox crate, each wrapped in a small safe function.
//!
//! Most system calls go through rustix's safe API; what it does not cover (creating
//! namespaces with `clone`, the loopback interface ioctl, signal dispositions, `pre_exec`,
//! idmapped mounts, registering descriptors with tokio) lives here.
#![allow(
    unsafe_code,
    reason = "this module is the crate's one home for unsafe code"
)]

use std::io;
use std::os::fd::{AsRawFd, BorrowedFd, RawFd};
use std::os::unix::process::CommandExt;

/// Which namespaces a new sandbox gets at birth. The cgroup namespace is entered later, after
/// the child has been moved into its cgroup, so that the cgroup becomes its root.
pub(crate) const SANDBOX_NAMESPACES: libc::c_int = libc::CLONE_NEWUSER
    | libc::CLONE_NEWPID
    | libc::CLONE_NEWNS
    | libc::CLONE_NEWIPC
    | libc::CLONE_NEWUTS
    | libc::CLONE_NEWNET;

/// Forks into new namespaces. Returns `Some(child pid)` in the parent and `None` in the
/// child, like `fork`.
///
/// Must only be called from a single-threaded process: the child is a copy of this one
/// and runs Rust code (allocations included) afterwards.
pub(crate) fn fork_into_namespaces(flags: libc::c_int) -> io::Result<Option<i32>> {
    let flags = libc::c_ulong::try_from(flags | libc::SIGCHLD).map_err(io::Error::other)?;
    // SAFETY: `clone` without CLONE_VM and with a null stack behaves like `fork`: the child
    // gets a copy-on-write copy of the address space and continues here with its own stack.
    // The caller guarantees the process is single-threaded, so no lock can be held by a
    // thread that does not exist in the child.
    let pid = unsafe { libc::syscall(libc::SYS_clone, flags, 0usize, 0usize, 0usize, 0usize) };
    match pid {
        -1 => Err(io::Error::last_os_error()),
        0 => Ok(None),
        pid => Ok(Some(i32::try_from(pid).map_err(io::Error::other)?)),
    }
}

/// Ends the current process at once, without running destructors or atexit handlers (a
/// forked child must not flush buffers it shares with its parent).
pub(crate) fn exit_immediately(code: i32) -> ! {
    // SAFETY: `_exit` is always safe to call; it never returns.
    unsafe { libc::_exit(code) }
}

/// Lets children that exit be reaped by the kernel (the helper never waits for them;
/// their exit is observed through pidfds).
pub(crate) fn auto_reap_children() -> io::Result<()> {
    set_disposition(libc::SIGCHLD, libc::SIG_IGN)
}

/// Restores the default action of `SIGCHLD` (undoing [`auto_reap_children`] in a child).
pub(crate) fn default_sigchld() -> io::Result<()> {
    set_disposition(libc::SIGCHLD, libc::SIG_DFL)
}

fn set_disposition(signal: libc::c_int, handler: libc::sighandler_t) -> io::Result<()> {
    // SAFETY: installing SIG_IGN or SIG_DFL involves no handler code; `signal` is a valid
    // signal number.
    let previous = unsafe { libc::signal(signal, handler) };
    if previous == libc::SIG_ERR {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// Closes every descriptor from 3 up except those in `keep`.
pub(crate) fn close_descriptors_except(keep: &[RawFd]) -> io::Result<()> {
    let mut keep: Vec<RawFd> = keep.iter().copied().filter(|fd| *fd >= 3).collect();
    keep.sort_unstable();
    keep.dedup();
    let mut first = 3;
    for fd in keep.into_iter().chain(std::iter::once(RawFd::MAX)) {
        if fd > first {
            let last = if fd == RawFd::MAX {
                u32::MAX
            } else {
                (fd - 1).cast_unsigned()
            };
            // SAFETY: closing descriptors nobody else in this (single-threaded, freshly
            // forked) process uses; Rust objects owning them are never used again.
            let rc =
                unsafe { libc::syscall(libc::SYS_close_range, first.cast_unsigned(), last, 0u32) };
            if rc == -1 {
                return Err(io::Error::last_os_error());
            }
        }
        first = fd.saturating_add(1);
    }
    Ok(())
}

/// Brings up the loopback interface of the current network namespace.
pub(crate) fn loopback_up() -> io::Result<()> {
    // SAFETY: plain socket creation; the descriptor is closed below.
    let sock = unsafe { libc::socket(libc::AF_INET, libc::SOCK_DGRAM | libc::SOCK_CLOEXEC, 0) };
    if sock < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: `ifreq` is plain old data; zeroed is a valid value.
    let mut request: libc::ifreq = unsafe { std::mem::zeroed() };
    for (dst, src) in request.ifr_name.iter_mut().zip(b"lo\0") {
        *dst = libc::c_char::from_ne_bytes([*src]);
    }
    // SAFETY: SIOCGIFFLAGS/SIOCSIFFLAGS read and write the `ifr_flags` member of the
    // properly initialised `ifreq` we pass; `sock` is a valid socket.
    let result = unsafe {
        if libc::ioctl(sock, libc::SIOCGIFFLAGS, &raw mut request) < 0 {
            Err(io::Error::last_os_error())
        } else {
            let flags = request.ifr_ifru.ifru_flags;
            request.ifr_ifru.ifru_flags =
                flags | libc::c_short::try_from(libc::IFF_UP).unwrap_or(1);
            if libc::ioctl(sock, libc::SIOCSIFFLAGS, &raw const request) < 0 {
                Err(io::Error::last_os_error())
            } else {
                Ok(())
            }
        }
    };
    // SAFETY: `sock` was opened above and is not used afterwards.
    unsafe { libc::close(sock) };
    result
}

/// Registers a descriptor with the tokio reactor.
pub(crate) fn async_fd(
    fd: std::os::fd::OwnedFd,
    interest: tokio::io::Interest,
) -> io::Result<tokio::io::unix::AsyncFd<std::os::fd::OwnedFd>> {
    // SAFETY: the `OwnedFd` is a valid descriptor that the returned `AsyncFd` owns; nothing
    // else closes or replaces it while it is registered.
    unsafe { tokio::io::unix::AsyncFd::register_with_interest(fd, interest) }
        .map_err(|e| e.into_parts().1)
}

/// Enters a new cgroup namespace rooted at the process's current cgroups.
pub(crate) fn unshare_cgroup_namespace() -> io::Result<()> {
    // SAFETY: CLONE_NEWCGROUP only changes how this process sees cgroup paths; it does not
    // unshare memory, descriptors or anything Rust relies on.
    unsafe { rustix::thread::unshare_unsafe(rustix::thread::UnshareFlags::NEWCGROUP) }?;
    Ok(())
}

/// Moves this process into a new network namespace (the helper's stock of namespaces).
pub(crate) fn unshare_network_namespace() -> io::Result<()> {
    // SAFETY: CLONE_NEWNET only changes which network stack this process's new sockets
    // belong to; it does not unshare memory, descriptors or anything Rust relies on.
    unsafe { rustix::thread::unshare_unsafe(rustix::thread::UnshareFlags::NEWNET) }?;
    Ok(())
}

/// Drops capability `cap` from the bounding set; `Ok(false)` once `cap` is past the last
/// capability the kernel knows.
pub(crate) fn drop_bounding_capability(cap: u32) -> io::Result<bool> {
    // SAFETY: PR_CAPBSET_DROP takes a capability number and touches no memory.
    let rc = unsafe { libc::prctl(libc::PR_CAPBSET_DROP, libc::c_ulong::from(cap), 0, 0, 0) };
    if rc == 0 {
        return Ok(true);
    }
    let err = io::Error::last_os_error();
    if err.raw_os_error() == Some(libc::EINVAL) {
        return Ok(false);
    }
    Err(err)
}

/// Registers `hook` to run in the child between `fork` and `exec`.
///
/// The hook must only make system calls: the child is a copy of a process that may have
/// other threads, so it must not allocate or take locks.
pub(crate) fn before_exec<F>(command: &mut std::process::Command, hook: F)
where
    F: FnMut() -> io::Result<()> + Send + Sync + 'static,
{
    // SAFETY: the only hook passed here (`init::confine::terminal_hook`) makes two system
    // calls, setsid and ioctl(TIOCSCTTY), both async-signal-safe, and allocates nothing.
    unsafe {
        command.pre_exec(hook);
    }
}

/// `struct mount_attr` of `mount_setattr(2)`.
#[repr(C)]
struct MountAttr {
    attr_set: u64,
    attr_clr: u64,
    propagation: u64,
    userns_fd: u64,
}

const MOUNT_ATTR_IDMAP: u64 = 0x0010_0000;

/// Turns a detached mount tree into an idmapped one that presents ids through the mapping
/// of the user namespace `userns` (host root's files appear owned by the sandbox's root).
pub(crate) fn idmap_mount(tree: BorrowedFd<'_>, userns: BorrowedFd<'_>) -> io::Result<()> {
    let attr = MountAttr {
        attr_set: MOUNT_ATTR_IDMAP,
        attr_clr: 0,
        propagation: 0,
        userns_fd: u64::try_from(userns.as_raw_fd()).map_err(io::Error::other)?,
    };
    // SAFETY: `attr` is a properly initialised `struct mount_attr` whose size is passed; the
    // path is an empty C string (AT_EMPTY_PATH) and both descriptors are valid.
    let rc = unsafe {
        libc::syscall(
            libc::SYS_mount_setattr,
            tree.as_raw_fd(),
            c"".as_ptr(),
            libc::AT_EMPTY_PATH | libc::AT_RECURSIVE,
            &raw const attr,
            std::mem::size_of::<MountAttr>(),
        )
    };
    if rc != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// The Landlock ABI version the kernel supports, if any.
pub(crate) fn landlock_abi() -> Option<u32> {
    const LANDLOCK_CREATE_RULESET_VERSION: u32 = 1;
    // SAFETY: with a null attribute pointer, size 0 and the VERSION flag the call only
    // returns the ABI version; it reads and writes no memory.
    let rc = unsafe {
        libc::syscall(
            libc::SYS_landlock_create_ruleset,
            std::ptr::null::<u8>(),
            0usize,
            LANDLOCK_CREATE_RULESET_VERSION,
        )
    };
    u32::try_from(rc).ok().filter(|v| *v > 0)
}
