//! Attacks, run for real inside sandboxes, with the host side checked too.

use std::io::Write;
use std::net::TcpListener;
use std::time::Duration;

use forge_sandbox::Backend;
use forge_sandbox::proto::ErrorKind;
use forge_types::{ExecRequest, Limits, SandboxSpec};
use pretty_assertions::assert_eq;

use crate::{Ctx, text};

#[tokio::test]
async fn host_files_are_out_of_reach() {
    let ctx = Ctx::new();
    let secret = ctx.dir.path().join("host-secret.txt");
    std::fs::write(&secret, "top secret").unwrap();
    let secret = secret.to_str().unwrap().to_owned();
    let id = ctx.sandbox().await;

    // From processes: by absolute path, through /proc/1/root, through .. and symlinks.
    let script = format!(
        "for p in '{secret}' '/proc/1/root{secret}' '/workspace/../../../..{secret}'; do cat \"$p\" >/dev/null 2>&1 && echo \"READ $p\"; done; \
         ln -s / /workspace/up; cat '/workspace/up{secret}' >/dev/null 2>&1 && echo READ-LINK; \
         ls /proc/1/root/ 2>&1; ls / | tr '\\n' ' '"
    );
    // The init is not dumpable, so its /proc entries (root, memory, descriptors) are closed.
    assert_eq!(
        ctx.ok(&id, &script).await,
        "ls: cannot access '/proc/1/root/': Permission denied\n\
         bin dev etc home lib lib64 mnt opt proc root run sbin srv sys tmp usr var workspace "
    );

    // From the file API, which the init serves without Landlock.
    ctx.ok(
        &id,
        "ln -s /proc/1/mem /workspace/mem; ln -s /proc/1/root /workspace/rootlink",
    )
    .await;
    let attempts = [
        secret.clone(),
        format!("/proc/1/root{secret}"),
        format!("/workspace/../../..{secret}"),
        format!("/workspace/up{secret}"),
        format!("/workspace/rootlink{secret}"),
    ];
    for path in &attempts {
        let err = ctx.backend.read_file(&id, path).await.unwrap_err();
        assert_eq!(
            err.remote_kind(),
            Some(ErrorKind::NotFound),
            "{path}: {err}"
        );
    }
    let proc_denied = [
        ctx.backend
            .read_file(&id, "/proc/1/environ")
            .await
            .unwrap_err()
            .remote_kind(),
        ctx.backend
            .read_file(&id, "/workspace/mem")
            .await
            .unwrap_err()
            .remote_kind(),
        ctx.backend
            .write_file(&id, "/workspace/mem", b"x".to_vec(), None)
            .await
            .unwrap_err()
            .remote_kind(),
        ctx.backend
            .write_file(&id, "/proc/sys/kernel/hostname", b"x".to_vec(), None)
            .await
            .unwrap_err()
            .remote_kind(),
    ];
    assert_eq!(proc_denied, [Some(ErrorKind::PermissionDenied); 4]);
    assert_eq!(std::fs::read_to_string(&secret).unwrap(), "top secret");
    ctx.backend.destroy(&id).await.unwrap();
}

#[tokio::test]
async fn writes_outside_the_writable_paths_fail() {
    let ctx = Ctx::new();
    let id = ctx.sandbox().await;
    let marker = format!("forge-escape-{}", std::process::id());
    let script = format!(
        "for p in /usr/{marker} /etc/{marker} /{marker} /bin/{marker} /var/{marker} /mnt/{marker} /proc/{marker}; do \
           touch $p 2>/dev/null && echo \"WROTE $p\"; done; \
         for p in /workspace /tmp /var/tmp /root /dev/shm; do touch $p/{marker} && echo ok; done; echo end"
    );
    assert_eq!(ctx.ok(&id, &script).await, "ok\nok\nok\nok\nok\nend\n");
    // /var is writable by permissions (it belongs to the sandbox's root); Landlock is what
    // refuses it.
    let landlock = ctx.sh(&id, &format!("touch /var/{marker}")).await;
    assert_eq!(
        text(&landlock.stderr),
        format!("touch: cannot touch '/var/{marker}': Permission denied\n")
    );
    for host in [
        format!("/usr/{marker}"),
        format!("/etc/{marker}"),
        format!("/tmp/{marker}"),
        format!("/{marker}"),
    ] {
        assert!(
            !std::path::Path::new(&host).exists(),
            "{host} appeared on the host"
        );
    }
    ctx.backend.destroy(&id).await.unwrap();
}

#[tokio::test]
async fn host_processes_are_invisible_and_unreachable() {
    let ctx = Ctx::new();
    let id = ctx.sandbox().await;
    let host_pid = std::process::id();
    let script =
        format!("ls /proc | grep -c '^[0-9]'; kill -0 {host_pid} 2>&1; kill -9 1 2>&1; echo $?");
    let result = ctx.sh(&id, &script).await;
    // Only init, the shell and ls/grep exist; the host's pid is unknown; init ignores kill.
    let out = text(&result.stdout);
    let lines: Vec<&str> = out.lines().collect();
    assert!(lines[0].parse::<u32>().unwrap() <= 5, "{out}");
    assert!(lines[1].contains("No such process"), "{out}");
    assert_eq!(
        ctx.ok(&id, "echo init still serves").await,
        "init still serves\n"
    );
    ctx.backend.destroy(&id).await.unwrap();
}

#[cfg(target_arch = "x86_64")]
#[tokio::test]
async fn dangerous_system_calls_are_refused() {
    let ctx = Ctx::new();
    let id = ctx.sandbox().await;
    let script = r#"
import ctypes, errno, os
libc = ctypes.CDLL(None, use_errno=True)
libc.syscall.restype = ctypes.c_long
def call(name, nr, *args):
    r = libc.syscall(ctypes.c_long(nr), *[ctypes.c_long(a) for a in args])
    e = ctypes.get_errno()
    print(name, "ok" if r >= 0 else errno.errorcode.get(e, e))
call("mount", 165, 0, 0, 0, 0, 0)
call("umount2", 166, 0, 0)
call("ptrace", 101, 16, 1, 0, 0)
call("unshare_user", 272, 0x10000000)
call("unshare_mount", 272, 0x00020000)
call("unshare_files", 272, 0x400)
call("clone_newuser", 56, 0x10000000 | 17, 0, 0, 0, 0)
call("clone3", 435, 0, 0)
call("setns", 308, 0, 0)
call("keyctl", 250, 0, 0, 0, 0, 0)
call("add_key", 248, 0, 0, 0, 0, 0)
call("bpf", 321, 0, 0, 0)
call("perf_event_open", 298, 0, 0, -1, -1, 0)
call("userfaultfd", 323, 0)
call("open_by_handle_at", 304, 0, 0, 0)
call("kexec_load", 246, 0, 0, 0, 0)
call("init_module", 175, 0, 0, 0)
call("process_vm_readv", 310, 1, 0, 0, 0, 0, 0)
call("iopl", 172, 3)
call("swapon", 167, 0, 0)
call("reboot", 169, 0, 0, 0, 0)
call("io_uring_setup", 425, 1, 0)
call("x32_getpid", 0x40000000 + 39)
call("mknod_char", 133, ctypes.cast(ctypes.c_char_p(b"/tmp/null"), ctypes.c_void_p).value, 0o20666, os.makedev(1, 3))
"#;
    let result = ctx
        .backend
        .exec(&id, ExecRequest::argv(["python3", "-c", script]))
        .await
        .unwrap();
    assert_eq!(text(&result.stderr), "");
    assert_eq!(
        text(&result.stdout),
        "mount EPERM\numount2 EPERM\nptrace EPERM\nunshare_user EPERM\nunshare_mount EPERM\nunshare_files ok\n\
         clone_newuser EPERM\nclone3 ENOSYS\nsetns EPERM\nkeyctl EPERM\nadd_key EPERM\nbpf EPERM\n\
         perf_event_open EPERM\nuserfaultfd EPERM\nopen_by_handle_at EPERM\nkexec_load EPERM\ninit_module EPERM\n\
         process_vm_readv EPERM\niopl EPERM\nswapon EPERM\nreboot EPERM\nio_uring_setup ENOSYS\nx32_getpid ENOSYS\n\
         mknod_char EPERM\n"
    );
    // The tools people would reach for fail the same way.
    let tools = ctx.sh(&id, "unshare -U true 2>/dev/null || echo unshare refused; mount -t tmpfs none /mnt 2>/dev/null || echo mount refused").await;
    assert_eq!(text(&tools.stdout), "unshare refused\nmount refused\n");
    ctx.backend.destroy(&id).await.unwrap();
}

#[tokio::test]
async fn a_fork_bomb_hits_the_pids_limit_while_the_host_stays_responsive() {
    let ctx = Ctx::new();
    let spec = SandboxSpec {
        limits: Limits {
            pids: 64,
            ..Limits::default()
        },
        ..SandboxSpec::default()
    };
    let bomb = ctx.sandbox_with(spec).await;
    let neighbour = ctx.sandbox().await;
    let backend = ctx.backend.clone();
    let bomb_id = bomb.clone();
    let running = tokio::spawn(async move {
        backend
            .exec(
                &bomb_id,
                // The shell then waits in a loop of builtins: once the bomb has
                // taken every pid, it could not fork a `sleep`.
                ExecRequest::shell("f() { f | f & }; f; while :; do :; done")
                    .with_timeout_ms(4000)
                    .with_output_limit(4096),
            )
            .await
    });
    tokio::time::sleep(Duration::from_millis(1500)).await;
    let stats = ctx.backend.stats(&bomb).await.unwrap();
    assert!(stats.pids.is_some_and(|n| n <= 64), "{stats:?}");
    // The host and other sandboxes keep working while the bomb runs.
    assert_eq!(ctx.ok(&neighbour, "echo alive").await, "alive\n");
    #[expect(
        clippy::disallowed_methods,
        reason = "checks the host can still spawn processes"
    )]
    let host = std::process::Command::new("/bin/true").status().unwrap();
    assert!(host.success());
    let result = running.await.unwrap().unwrap();
    assert!(result.timed_out, "{result:?}");
    assert!(
        text(&result.stderr).contains("fork"),
        "{:?}",
        text(&result.stderr)
    );
    ctx.backend.destroy(&bomb).await.unwrap();
    ctx.backend.destroy(&neighbour).await.unwrap();
}

#[tokio::test]
async fn a_memory_bomb_is_oom_killed_and_reported() {
    let ctx = Ctx::new();
    let spec = SandboxSpec {
        limits: Limits {
            memory_bytes: 64 << 20,
            ..Limits::default()
        },
        ..SandboxSpec::default()
    };
    let id = ctx.sandbox_with(spec).await;
    let result = ctx
        .backend
        .exec(
            &id,
            ExecRequest::argv(["python3", "-c", "x = b'a' * (512 << 20)"]),
        )
        .await
        .unwrap();
    assert_eq!(
        (
            result.oom_killed,
            result.signal,
            result.exit_code,
            result.timed_out
        ),
        (true, Some(9), 137, false)
    );
    assert!(
        ctx.backend
            .stats(&id)
            .await
            .unwrap()
            .oom_kills
            .is_some_and(|n| n >= 1)
    );
    // The sandbox survives its process being killed.
    assert_eq!(ctx.ok(&id, "echo still here").await, "still here\n");
    ctx.backend.destroy(&id).await.unwrap();
}

#[tokio::test]
async fn a_cpu_spin_is_killed_at_its_timeout() {
    let ctx = Ctx::new();
    let id = ctx.sandbox().await;
    let result = ctx
        .backend
        .exec(
            &id,
            ExecRequest::shell("while :; do :; done").with_timeout_ms(1000),
        )
        .await
        .unwrap();
    assert_eq!(
        (
            result.timed_out,
            result.signal,
            result.exit_code,
            result.oom_killed
        ),
        (true, Some(9), 137, false)
    );
    ctx.backend.destroy(&id).await.unwrap();
}

#[tokio::test]
async fn huge_output_is_capped() {
    let ctx = Ctx::new();
    let id = ctx.sandbox().await;
    let request =
        ExecRequest::shell("head -c 200000000 /dev/zero; echo tail >&2").with_output_limit(1 << 20);
    let result = ctx.backend.exec(&id, request).await.unwrap();
    assert_eq!(
        (
            result.exit_code,
            result.stdout.len(),
            result.stdout_truncated,
            text(&result.stderr),
            result.stderr_truncated
        ),
        (0, 1 << 20, true, "tail\n".to_owned(), false)
    );
    ctx.backend.destroy(&id).await.unwrap();
}

#[tokio::test]
async fn the_hosts_loopback_is_unreachable() {
    let ctx = Ctx::new();
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    listener.set_nonblocking(true).unwrap();
    let port = listener.local_addr().unwrap().port();
    let id = ctx.sandbox().await;
    let script = format!(
        "import socket\ntry:\n    socket.create_connection(('127.0.0.1', {port}), timeout=3)\n    print('connected')\nexcept OSError as e:\n    print(type(e).__name__)\n\
         try:\n    socket.create_connection(('10.0.2.2', 80), timeout=3)\nexcept OSError as e:\n    print(type(e).__name__)\n\
         print(open('/sys/class/net/lo/operstate').read().strip(), sorted(__import__('os').listdir('/sys/class/net')))"
    );
    let result = ctx
        .backend
        .exec(&id, ExecRequest::argv(["python3", "-c", &script]))
        .await
        .unwrap();
    assert_eq!(
        text(&result.stdout),
        "ConnectionRefusedError\nOSError\nunknown ['lo']\n",
        "{}",
        text(&result.stderr)
    );
    assert!(
        listener.accept().is_err(),
        "the host's listener was reached"
    );
    ctx.backend.destroy(&id).await.unwrap();
}

#[tokio::test]
async fn sandboxes_cannot_see_each_other() {
    let ctx = Ctx::new();
    let a = ctx.sandbox().await;
    let b = ctx.sandbox().await;
    ctx.ok(&a, "echo mine > /workspace/a-secret; echo tmp > /tmp/a-tmp")
        .await;
    ctx.backend
        .spawn(
            &a,
            forge_types::ProcessSpec::new(forge_types::Command::Argv(vec![
                "sleep".into(),
                "300".into(),
            ])),
        )
        .await
        .unwrap();
    let seen = ctx
        .ok(
            &b,
            "ls -A /workspace /tmp; ps -eo comm= | grep -c '^sleep$' || true",
        )
        .await;
    assert_eq!(seen, "/tmp:\n\n/workspace:\n0\n");
    let mut file = std::fs::File::create(ctx.dir.path().join("probe")).unwrap();
    file.write_all(b"x").unwrap();
    // B cannot name A's upper layer either: it is not in B's mount namespace.
    let upper = ctx
        .backend
        .sandboxes_dir()
        .join(a.as_str())
        .join("upper/workspace/a-secret");
    assert_eq!(
        ctx.sh(&b, &format!("cat {}", upper.display()))
            .await
            .exit_code,
        1
    );
    ctx.backend.destroy(&a).await.unwrap();
    ctx.backend.destroy(&b).await.unwrap();
}

/// A sandbox that never administers its network (mode none here) is born in a network
/// namespace the helper made ahead of time, which belongs to the host's user namespace: the
/// kernel will not even name its owner to the sandbox, and nothing inside (not the init
/// either) holds a capability over it. Its loopback is up and its `/sys` shows only it.
#[tokio::test]
async fn a_prepared_network_belongs_to_the_host() {
    let ctx = Ctx::new();
    // Quiescing lets the helper stock its prepared namespaces.
    ctx.backend.quiesce().await.unwrap();
    let id = ctx.sandbox().await;
    let script = "import fcntl, os, socket\n\
                  fd = os.open('/proc/self/ns/net', os.O_RDONLY)\n\
                  try:\n    fcntl.ioctl(fd, 0xb701)\n    print('owner: the sandbox')\n\
                  except PermissionError:\n    print('owner: the host')\n\
                  server = socket.create_server(('127.0.0.1', 0))\n\
                  client = socket.create_connection(server.getsockname())\n\
                  print('loopback:', server.accept()[0].getpeername() == client.getsockname())\n\
                  print('sys:', sorted(os.listdir('/sys/class/net')))\n\
                  try:\n    open('/proc/sys/net/ipv4/ip_forward', 'w').write('1')\n    print('sysctl written')\n\
                  except OSError as e:\n    print('sysctl:', type(e).__name__)\n";
    let result = ctx
        .backend
        .exec(&id, ExecRequest::argv(["python3", "-c", script]))
        .await
        .unwrap();
    assert_eq!(
        (text(&result.stdout), text(&result.stderr)),
        (
            "owner: the host\nloopback: True\nsys: ['lo']\nsysctl: PermissionError\n".to_owned(),
            String::new()
        )
    );
    ctx.backend.destroy(&id).await.unwrap();
}
