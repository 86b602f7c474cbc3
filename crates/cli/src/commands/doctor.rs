//! `forge doctor`: what this host supports, then a real sandbox started and used.

use std::process::ExitCode;
use std::time::Instant;

use anyhow::Context;
use forge_sandbox::host::HostReport;
use forge_sandbox::{Backend, JailBackend, JailConfig};
use forge_types::{ExecRequest, SandboxSpec};

use crate::cli::DoctorArgs;
use crate::output;

pub(crate) async fn run(args: DoctorArgs) -> anyhow::Result<ExitCode> {
    let report = HostReport::detect();
    for line in report.to_string().lines() {
        output::line(line);
    }
    let stale = forge_sandbox::cgroup::stale_sandbox_cgroups(forge_sandbox::cgroup::STALE_AFTER);
    if stale.is_empty() {
        output::line("✓ leftovers   no stale sandbox cgroups");
    } else {
        // They slow every cgroup operation on the host; nothing runs in them.
        let removed = forge_sandbox::cgroup::remove_stale(&stale);
        output::line(&format!(
            "! leftovers   removed {removed} of {} stale sandbox cgroups (empty, left by Forge processes that ended before their cleanup)",
            stale.len()
        ));
    }
    if args.no_sandbox {
        return Ok(ExitCode::SUCCESS);
    }
    let data_dir = crate::settings::data_dir(&args.data)?;
    let started = Instant::now();
    let backend = JailBackend::new(JailConfig::new(&data_dir))
        .context("cannot set up the sandbox backend")?;
    let info = backend
        .create(SandboxSpec::default())
        .await
        .context("cannot create a sandbox")?;
    let result = backend
        .exec(&info.id, ExecRequest::argv(["/bin/true"]))
        .await;
    backend
        .destroy(&info.id)
        .await
        .context("cannot remove the test sandbox")?;
    let result = result.context("cannot run /bin/true in the test sandbox")?;
    let elapsed = started.elapsed();
    output::line(&format!(
        "{} sandbox     created, ran /bin/true (exit {}) and removed in {:.1} ms, data in {}",
        if result.success() { "✓" } else { "✗" },
        result.exit_code,
        elapsed.as_secs_f64() * 1000.0,
        data_dir.display()
    ));
    for note in backend.host_notes() {
        output::line(&format!("! degraded    {note}"));
    }
    Ok(if result.success() {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    })
}
