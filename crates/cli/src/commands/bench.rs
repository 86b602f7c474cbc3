//! `forge bench sandbox`.

use std::process::ExitCode;

use crate::cli::BenchSandboxArgs;

pub(crate) async fn sandbox(_args: BenchSandboxArgs) -> anyhow::Result<ExitCode> {
    anyhow::bail!("not yet")
}
