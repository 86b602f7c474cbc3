//! One module per command; each turns parsed arguments into calls on the libraries.

mod bench;
mod bench_gateway;
mod bench_image;
mod bench_net;
mod bench_server;
mod client;
mod doctor;
mod gateway;
mod image;
mod mcp;
mod sandbox;
mod serve;

use std::process::ExitCode;

use crate::cli::{
    BenchCommand, Cli, Command, FilesCommand, LedgerCommand, SandboxCommand, ToolsCommand,
};

pub(crate) async fn run(cli: Cli) -> anyhow::Result<ExitCode> {
    match cli.command {
        Command::Serve(args) => serve::run(*args).await,
        Command::Mcp(args) => mcp::run(*args).await,
        Command::Spawn(args) => client::spawn(args).await,
        Command::List(args) => client::list(args).await,
        Command::Exec(args) => client::exec(args).await,
        Command::Files(FilesCommand::Get {
            client,
            id,
            path,
            dest,
        }) => client::get(client, &id, &path, dest).await,
        Command::Files(FilesCommand::Put {
            client,
            id,
            source,
            path,
        }) => client::put(client, &id, &source, &path).await,
        Command::Files(FilesCommand::Ls { client, id, path }) => {
            client::ls(client, &id, &path).await
        }
        Command::Kill(args) => client::kill(args).await,
        Command::Prune(args) => client::prune(args).await,
        Command::Snapshot(args) => client::snapshot(args).await,
        Command::Fork(args) => client::fork(args).await,
        Command::Port(args) => client::port(args).await,
        Command::Sandbox(SandboxCommand::Run(args)) => sandbox::run(args).await,
        Command::Image(command) => image::run(command).await,
        Command::Doctor(args) => doctor::run(args).await,
        Command::Bench(BenchCommand::Sandbox(args)) => bench::sandbox(args).await,
        Command::Bench(BenchCommand::Server(args)) => bench_server::server(args).await,
        Command::Bench(BenchCommand::Image(args)) => bench_image::image(args).await,
        Command::Bench(BenchCommand::Net(args)) => bench_net::net(args).await,
        Command::Bench(BenchCommand::Gateway(args)) => bench_gateway::gateway(args).await,
        Command::Tools(ToolsCommand::Ls { client, session }) => {
            gateway::tools_ls(client, session).await
        }
        Command::Tools(ToolsCommand::Call {
            client,
            tool,
            session,
            args,
            idempotency_key,
        }) => gateway::tools_call(client, &tool, &session, &args, idempotency_key).await,
        Command::Ledger(LedgerCommand::Tail {
            client,
            session,
            lines,
        }) => gateway::ledger_tail(client, session, lines).await,
        Command::Ledger(LedgerCommand::Verify { data, json }) => {
            gateway::ledger_verify(&data, json).await
        }
    }
}
