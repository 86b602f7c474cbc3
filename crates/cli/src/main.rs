//! The `forge` binary: parses the command line, picks implementations and runs commands.
//! Logic lives in the library crates; this crate wires them.

mod cli;
mod commands;
mod output;
mod settings;

use std::process::ExitCode;

use clap::Parser;

fn main() -> ExitCode {
    // The sandbox helper is this same binary; it must start before any thread exists.
    forge_sandbox::run_if_helper();
    // One TLS provider for every HTTP client of the process (registries, the API client).
    forge_image::install_tls_provider();
    let cli = cli::Cli::parse();
    output::init_logging(cli.verbose);
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(err) => {
            output::error(&anyhow::Error::new(err).context("cannot start the async runtime"));
            return ExitCode::from(1);
        }
    };
    match runtime.block_on(commands::run(cli)) {
        Ok(code) => code,
        Err(err) => {
            output::error(&err);
            ExitCode::from(1)
        }
    }
}
