//! One module per command; each turns parsed arguments into calls on the libraries.

mod bench;
mod doctor;
mod sandbox;

use std::process::ExitCode;

use crate::cli::{BenchCommand, Cli, Command, SandboxCommand};

pub(crate) async fn run(cli: Cli) -> anyhow::Result<ExitCode> {
    match cli.command {
        Command::Sandbox(SandboxCommand::Run(args)) => sandbox::run(args).await,
        Command::Doctor(args) => doctor::run(args).await,
        Command::Bench(BenchCommand::Sandbox(args)) => bench::sandbox(args).await,
    }
}
