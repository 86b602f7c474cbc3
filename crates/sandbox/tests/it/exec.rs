//! Running commands: arguments, environment, stdin, binary output, streaming, timeouts and
//! errors.

use forge_sandbox::Backend;
use forge_types::{ExecEvent, ExecRequest, StreamKind};
use futures::StreamExt;
use pretty_assertions::assert_eq;

use crate::{Ctx, text};

#[tokio::test]
async fn argv_env_cwd_and_stdin() {
    let ctx = Ctx::new();
    let id = ctx.sandbox().await;
    let mut request = ExecRequest::argv([
        "sh",
        "-c",
        "printf '%s|%s|%s|' \"$1\" \"$GREETING\" \"$PWD\"; cat",
        "sh",
        "two words",
    ])
    .with_stdin(b"from stdin".to_vec())
    .with_cwd("/tmp");
    request.env.insert("GREETING".into(), "hello".into());
    let result = ctx.backend.exec(&id, request).await.unwrap();
    assert_eq!(
        (result.exit_code, text(&result.stdout), text(&result.stderr)),
        (
            0,
            "two words|hello|/tmp|from stdin".to_owned(),
            String::new()
        )
    );
    ctx.backend.destroy(&id).await.unwrap();
}

#[tokio::test]
async fn exit_codes_signals_and_missing_programs() {
    let ctx = Ctx::new();
    let id = ctx.sandbox().await;
    let exit = ctx.sh(&id, "echo oops >&2; exit 42").await;
    assert_eq!(
        (exit.exit_code, exit.signal, text(&exit.stderr)),
        (42, None, "oops\n".to_owned())
    );
    let killed = ctx.sh(&id, "kill -TERM $$").await;
    assert_eq!((killed.exit_code, killed.signal), (143, Some(15)));
    let missing = ctx
        .backend
        .exec(&id, ExecRequest::argv(["nosuchprog", "--flag"]))
        .await
        .unwrap();
    assert_eq!(
        (missing.exit_code, text(&missing.stderr)),
        (127, "nosuchprog: command not found\n".to_owned())
    );
    let missing_path = ctx
        .backend
        .exec(&id, ExecRequest::argv(["/no/such/file"]))
        .await
        .unwrap();
    assert_eq!(
        (missing_path.exit_code, text(&missing_path.stderr)),
        (127, "/no/such/file: No such file or directory\n".to_owned())
    );
    ctx.ok(
        &id,
        "echo 'echo hi' > /workspace/plain; chmod 644 /workspace/plain",
    )
    .await;
    let not_executable = ctx
        .backend
        .exec(&id, ExecRequest::argv(["/workspace/plain"]))
        .await
        .unwrap();
    assert_eq!(
        (not_executable.exit_code, text(&not_executable.stderr)),
        (126, "/workspace/plain: Permission denied\n".to_owned())
    );
    let bad_cwd = ctx
        .backend
        .exec(&id, ExecRequest::argv(["true"]).with_cwd("/nowhere"))
        .await
        .unwrap_err();
    assert_eq!(
        bad_cwd.to_string(),
        format!("sandbox {id}: working directory /nowhere does not exist")
    );
    ctx.backend.destroy(&id).await.unwrap();
}

#[tokio::test]
async fn scripts_without_a_shebang_run_through_sh_however_they_are_named() {
    let ctx = Ctx::new();
    let id = ctx.sandbox().await;
    ctx.ok(
        &id,
        "printf 'echo \"ran $0 with $1\"\n' > /workspace/plain; chmod 755 /workspace/plain",
    )
    .await;
    // As argv, as a shell string the init splits itself (an absolute path, plain words) and
    // as one the shell runs.
    let argv = ctx
        .backend
        .exec(&id, ExecRequest::argv(["/workspace/plain", "x"]))
        .await
        .unwrap();
    let split = ctx.sh(&id, "/workspace/plain y").await;
    let shell = ctx.sh(&id, "/workspace/plain \"z\"").await;
    let missing = ctx.sh(&id, "/no/such/file --flag").await;
    assert_eq!(
        [argv, split, shell, missing].map(|r| (r.exit_code, text(&r.stdout), text(&r.stderr))),
        [
            (0, "ran /workspace/plain with x\n".to_owned(), String::new()),
            (0, "ran /workspace/plain with y\n".to_owned(), String::new()),
            (0, "ran /workspace/plain with z\n".to_owned(), String::new()),
            (
                127,
                String::new(),
                "/no/such/file: No such file or directory\n".to_owned()
            ),
        ]
    );
    ctx.backend.destroy(&id).await.unwrap();
}

#[tokio::test]
async fn binary_output_survives_as_bytes() {
    let ctx = Ctx::new();
    let id = ctx.sandbox().await;
    let all_bytes: Vec<u8> = (0..=255).collect();
    let result = ctx
        .backend
        .exec(
            &id,
            ExecRequest::argv(["cat"]).with_stdin(all_bytes.clone()),
        )
        .await
        .unwrap();
    assert_eq!(result.stdout, all_bytes);
    ctx.backend.destroy(&id).await.unwrap();
}

#[tokio::test]
async fn output_streams_as_it_is_produced() {
    let ctx = Ctx::new();
    let id = ctx.sandbox().await;
    let mut events = ctx
        .backend
        .exec_stream(
            &id,
            ExecRequest::shell("echo one; sleep 0.2; echo two >&2; sleep 0.2; echo three; exit 3"),
        )
        .await
        .unwrap();
    let mut seen = Vec::new();
    while let Some(event) = events.next().await {
        match event.unwrap() {
            ExecEvent::Output { stream, data } => {
                seen.push(format!("{}:{}", stream.as_str(), text(&data).trim_end()));
            }
            ExecEvent::Exit(result) => seen.push(format!("exit:{}", result.exit_code)),
        }
    }
    assert_eq!(seen, ["stdout:one", "stderr:two", "stdout:three", "exit:3"]);
    ctx.backend.destroy(&id).await.unwrap();
}

#[tokio::test]
async fn dropping_a_stream_kills_the_command() {
    let ctx = Ctx::new();
    let id = ctx.sandbox().await;
    let mut events = ctx
        .backend
        .exec_stream(&id, ExecRequest::shell("echo started; exec sleep 300"))
        .await
        .unwrap();
    let first = events.next().await.unwrap().unwrap();
    assert_eq!(
        first,
        ExecEvent::Output {
            stream: StreamKind::Stdout,
            data: b"started\n".to_vec()
        }
    );
    drop(events);
    let mut remaining = String::new();
    for _ in 0..100 {
        remaining = ctx
            .ok(&id, "ps -eo comm= | grep -c '^sleep$' || true")
            .await;
        if remaining == "0\n" {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    assert_eq!(remaining, "0\n");
    ctx.backend.destroy(&id).await.unwrap();
}

#[tokio::test]
async fn a_timeout_kills_the_whole_process_group() {
    let ctx = Ctx::new();
    let id = ctx.sandbox().await;
    let result = ctx
        .backend
        .exec(
            &id,
            ExecRequest::shell("sleep 300 & sleep 300 & echo waiting; wait").with_timeout_ms(300),
        )
        .await
        .unwrap();
    assert_eq!(
        (
            result.timed_out,
            result.signal,
            result.exit_code,
            text(&result.stdout)
        ),
        (true, Some(9), 137, "waiting\n".to_owned())
    );
    assert_eq!(
        ctx.ok(&id, "ps -eo comm= | grep -c '^sleep$' || true")
            .await,
        "0\n"
    );
    ctx.backend.destroy(&id).await.unwrap();
}

#[tokio::test]
async fn background_children_do_not_hold_up_the_result() {
    let ctx = Ctx::new();
    let id = ctx.sandbox().await;
    let result = ctx.sh(&id, "sleep 300 & echo done").await;
    assert_eq!(
        (result.exit_code, text(&result.stdout)),
        (0, "done\n".to_owned())
    );
    // The daemon keeps running after the command that started it returned.
    assert_eq!(ctx.ok(&id, "ps -eo comm= | grep -c '^sleep$'").await, "1\n");
    ctx.backend.destroy(&id).await.unwrap();
}
