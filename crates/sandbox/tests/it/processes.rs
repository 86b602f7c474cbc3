//! Background processes and terminals.

use std::time::Duration;

use forge_sandbox::Backend;
use forge_types::{Command, ProcessSpec, ProcessState, PtySize, SandboxId};
use pretty_assertions::assert_eq;

use crate::{Ctx, text};

/// Reads a process's output from `cursor` until `needle` appears (or ten seconds pass).
async fn read_until(ctx: &Ctx, id: &SandboxId, process: u32, needle: &str) -> String {
    let mut seen = String::new();
    let mut cursor = 0;
    for _ in 0..100 {
        let output = ctx
            .backend
            .read_output(id, process, cursor, 1 << 20, 100)
            .await
            .unwrap();
        for chunk in &output.chunks {
            seen.push_str(&text(&chunk.data));
        }
        cursor = output.next_cursor;
        if seen.contains(needle) {
            return seen;
        }
    }
    panic!("{needle:?} never appeared; output was {seen:?}");
}

#[tokio::test]
async fn background_processes_take_stdin_and_report_their_exit() {
    let ctx = Ctx::new();
    let id = ctx.sandbox().await;
    let spec = ProcessSpec {
        tag: Some("echoer".into()),
        ..ProcessSpec::new(Command::Shell(
            "echo started; read line; echo got:$line >&2; exit 3".into(),
        ))
    };
    let info = ctx.backend.spawn(&id, spec).await.unwrap();
    assert_eq!(read_until(&ctx, &id, info.id, "started").await, "started\n");
    ctx.backend
        .write_stdin(&id, info.id, b"hello\n".to_vec(), true)
        .await
        .unwrap();
    let done = ctx.backend.wait(&id, info.id, Some(10_000)).await.unwrap();
    assert_eq!(
        done.state,
        ProcessState::Exited {
            exit_code: 3,
            signal: None
        }
    );
    let output = ctx
        .backend
        .read_output(&id, info.id, 0, 1 << 20, 0)
        .await
        .unwrap();
    let chunks: Vec<(String, String)> = output
        .chunks
        .iter()
        .map(|c| (c.stream.as_str().to_owned(), text(&c.data)))
        .collect();
    assert_eq!(
        chunks,
        [
            ("stdout".to_owned(), "started\n".to_owned()),
            ("stderr".to_owned(), "got:hello\n".to_owned())
        ]
    );
    assert_eq!((output.next_cursor, output.dropped), (18, 0));
    let listed = ctx.backend.processes(&id).await.unwrap();
    assert_eq!(
        listed
            .iter()
            .map(|p| (p.id, p.tag.clone(), p.state))
            .collect::<Vec<_>>(),
        [(info.id, Some("echoer".to_owned()), done.state)]
    );
    ctx.backend.destroy(&id).await.unwrap();
}

#[tokio::test]
async fn signals_reach_background_processes() {
    let ctx = Ctx::new();
    let id = ctx.sandbox().await;
    let info = ctx
        .backend
        .spawn(
            &id,
            ProcessSpec::new(Command::Argv(vec!["sleep".into(), "300".into()])),
        )
        .await
        .unwrap();
    let running = ctx.backend.wait(&id, info.id, Some(50)).await.unwrap();
    assert_eq!(running.state, ProcessState::Running);
    ctx.backend.signal(&id, info.id, 15).await.unwrap();
    let done = ctx.backend.wait(&id, info.id, Some(10_000)).await.unwrap();
    assert_eq!(
        done.state,
        ProcessState::Exited {
            exit_code: 143,
            signal: Some(15)
        }
    );
    let unknown = ctx.backend.signal(&id, 999, 15).await.unwrap_err();
    assert_eq!(
        unknown.to_string(),
        format!("sandbox {id}: no background process with id 999")
    );
    ctx.backend.destroy(&id).await.unwrap();
}

#[tokio::test]
async fn attach_streams_until_exit() {
    let ctx = Ctx::new();
    let id = ctx.sandbox().await;
    let info = ctx
        .backend
        .spawn(
            &id,
            ProcessSpec::new(Command::Shell(
                "for i in 1 2 3; do echo line$i; sleep 0.1; done".into(),
            )),
        )
        .await
        .unwrap();
    let events: Vec<_> =
        futures::StreamExt::collect::<Vec<_>>(ctx.backend.attach(&id, info.id, 0).await.unwrap())
            .await;
    let mut output = String::new();
    let mut exit = None;
    for event in events {
        match event.unwrap() {
            forge_types::ExecEvent::Output { data, .. } => output.push_str(&text(&data)),
            forge_types::ExecEvent::Exit(result) => exit = Some(result.exit_code),
        }
    }
    assert_eq!((output.as_str(), exit), ("line1\nline2\nline3\n", Some(0)));
    ctx.backend.destroy(&id).await.unwrap();
}

#[tokio::test]
async fn terminals_run_interactive_shells() {
    let ctx = Ctx::new();
    let id = ctx.sandbox().await;
    let spec = ProcessSpec {
        pty: Some(PtySize { cols: 80, rows: 24 }),
        ..ProcessSpec::new(Command::Argv(vec!["sh".into()]))
    };
    let info = ctx.backend.spawn(&id, spec).await.unwrap();
    assert!(info.pty);
    ctx.backend
        .write_stdin(&id, info.id, b"echo $((6*7)); tty\n".to_vec(), false)
        .await
        .unwrap();
    let seen = read_until(&ctx, &id, info.id, "/dev/pts/").await;
    assert!(seen.contains("42"), "{seen:?}");
    ctx.backend
        .resize(
            &id,
            info.id,
            PtySize {
                cols: 100,
                rows: 40,
            },
        )
        .await
        .unwrap();
    ctx.backend
        .write_stdin(&id, info.id, b"stty size\n".to_vec(), false)
        .await
        .unwrap();
    read_until(&ctx, &id, info.id, "40 100").await;
    ctx.backend
        .write_stdin(&id, info.id, b"exit 5\n".to_vec(), false)
        .await
        .unwrap();
    let done = ctx.backend.wait(&id, info.id, Some(10_000)).await.unwrap();
    assert_eq!(
        done.state,
        ProcessState::Exited {
            exit_code: 5,
            signal: None
        }
    );
    tokio::time::sleep(Duration::from_millis(10)).await;
    ctx.backend.destroy(&id).await.unwrap();
}
