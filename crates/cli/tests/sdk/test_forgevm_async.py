"""ForgeVM SDK (forgevm 0.1.2, async API: AsyncClient / AsyncSandbox) against a live Forge
server. Same wire calls as the sync API; the async stream parser is stricter (it raises on a
non-JSON NDJSON line instead of skipping it)."""

from __future__ import annotations

import asyncio
import time

import pytest

import forgevm
from forgevm import (
    AsyncClient,
    AsyncSandbox,
    ExecResult,
    ForgevmError,
    ProviderError,
    SandboxInfo,
    SandboxNotFound,
)
from forgevm.streaming import StreamChunk

from conftest import (
    FORGE_API_KEY,
    FORGE_URL,
    GO_DURATION_RE,
    IMAGE,
    SANDBOX_ID_RE,
    SANDBOX_TTL,
    assert_sandbox_json,
    basename,
    parse_time,
    permission_bits,
    unique,
)

pytestmark = pytest.mark.asyncio

UNICODE_TEXT = "héllo wörld ✓ 日本語 🚀\nzweite Zeile — ok\n"
NOT_A_SANDBOX = "sb-nonexistent"


def assert_not_sandbox_not_found(exc: BaseException, what: str) -> None:
    assert isinstance(exc, ForgevmError), f"{what}: expected a ForgevmError, got {type(exc).__name__}: {exc}"
    assert not isinstance(exc, SandboxNotFound), (
        f"{what}: the sandbox exists, so the server must not answer 404 "
        f"(the SDK turns every 404 into SandboxNotFound); got {exc!r}"
    )


async def collect(agen) -> list[StreamChunk]:
    return [c async for c in agen]


def stdout_of(chunks) -> str:
    return "".join(c.data for c in chunks if c.stream == "stdout")


# ======================================================================================
# client
# ======================================================================================


async def test_health_status_ok(async_client):
    h = await async_client.health()
    assert h.get("status") == "ok", f"health: {h!r}"
    assert GO_DURATION_RE.match(h.get("uptime", "")), f"uptime {h.get('uptime')!r}"


async def test_pool_status_has_enabled(async_client):
    st = await async_client.pool_status()
    assert isinstance(st.get("enabled"), bool), f"pool status: {st!r}"


async def test_spawn_returns_running_sandbox(async_client, cleanup):
    sb = await async_client.spawn(image=IMAGE, ttl=SANDBOX_TTL)
    cleanup.append(sb.id)
    assert isinstance(sb, AsyncSandbox)
    assert sb.id.startswith("sb-") and SANDBOX_ID_RE.match(sb.id), f"sandbox id {sb.id!r}"
    assert sb.state == "running", f"state {sb.state!r}"
    assert sb.image == IMAGE and sb.provider, f"info {sb._info!r}"
    assert repr(sb) == f"AsyncSandbox(id={sb.id!r}, state='running')"
    assert_sandbox_json(sb._info)


async def test_get(async_client, async_sandbox):
    got = await async_client.get(async_sandbox.id)
    assert isinstance(got, AsyncSandbox)
    assert got.id == async_sandbox.id and got.state == "running", f"get returned {got._info!r}"


async def test_get_unknown_raises_sandbox_not_found(async_client):
    with pytest.raises(SandboxNotFound):
        await async_client.get(NOT_A_SANDBOX)


async def test_list_contains_spawned_sandbox(async_client, async_sandbox):
    items = await async_client.list()
    assert all(isinstance(i, SandboxInfo) for i in items)
    ids = [i.id for i in items]
    assert async_sandbox.id in ids, f"{async_sandbox.id} missing from list(): {ids}"


async def test_prune_returns_int(async_client):
    n = await async_client.prune()
    assert isinstance(n, int) and n >= 0, f"prune() returned {n!r}"


async def test_prune_removes_expired_sandbox(async_client, cleanup):
    sb = await async_client.spawn(image=IMAGE, ttl="1ms")
    cleanup.append(sb.id)
    await asyncio.sleep(0.05)
    assert isinstance(await async_client.prune(), int)
    with pytest.raises(SandboxNotFound):
        await async_client.get(sb.id)


async def test_spawn_connection_refused_raises_connection_error():
    async with AsyncClient("http://127.0.0.1:1", timeout=2.0) as dead:
        with pytest.raises(forgevm.ConnectionError):
            await dead.spawn(image=IMAGE)


async def test_concurrent_spawns(async_client, cleanup):
    sandboxes = await asyncio.gather(*(async_client.spawn(image=IMAGE, ttl=SANDBOX_TTL) for _ in range(3)))
    cleanup.extend(sb.id for sb in sandboxes)
    ids = {sb.id for sb in sandboxes}
    assert len(ids) == 3, f"concurrent spawns returned duplicate ids: {ids}"
    results = await asyncio.gather(*(sb.exec("echo ok") for sb in sandboxes))
    assert all(r.exit_code == 0 for r in results), f"exec in concurrent sandboxes: {results!r}"


# ======================================================================================
# lifecycle
# ======================================================================================


async def test_destroy_then_get_raises(async_client, cleanup):
    sb = await async_client.spawn(image=IMAGE, ttl=SANDBOX_TTL)
    cleanup.append(sb.id)
    await sb.destroy()
    with pytest.raises(SandboxNotFound):
        await async_client.get(sb.id)
    await sb.destroy()  # idempotent


async def test_async_context_manager_destroys(async_client, cleanup):
    async with await async_client.spawn(image=IMAGE, ttl=SANDBOX_TTL) as sb:
        cleanup.append(sb.id)
        assert (await sb.exec("echo inside")).stdout == "inside\n"
    with pytest.raises(SandboxNotFound):
        await async_client.get(sb.id)


async def test_async_client_context_manager_closes_http():
    async with AsyncClient(FORGE_URL, api_key=FORGE_API_KEY) as c:
        assert (await c.health())["status"] == "ok"
    assert c._http.is_closed, "AsyncClient.__aexit__ did not close its httpx client"


async def test_extend_ttl_moves_expiry_later(async_sandbox):
    before = parse_time(async_sandbox._info["expires_at"])
    assert await async_sandbox.extend_ttl("2h") is None
    after = parse_time(async_sandbox._info["expires_at"])
    assert after > before, f"extend_ttl('2h') did not move expires_at later: {before} -> {after}"


async def test_extend_ttl_negative_is_bad_request(async_sandbox):
    with pytest.raises(ForgevmError) as ei:
        await async_sandbox.extend_ttl("-5m")
    assert not isinstance(ei.value, (SandboxNotFound, ProviderError)), f"expected a 400, got {ei.value!r}"
    assert ei.value.code == "BAD_REQUEST", f"code {ei.value.code!r}"


async def test_user_id_sets_owner(async_client, cleanup):
    async with AsyncClient(FORGE_URL, api_key=FORGE_API_KEY, user_id="bob") as bob:
        sb = await bob.spawn(image=IMAGE, ttl=SANDBOX_TTL)
        cleanup.append(sb.id)
    assert sb._info.get("owner_id") == "bob", f"owner_id in spawn reply: {sb._info!r}"
    got = await async_client.get(sb.id)
    assert got._info.get("owner_id") == "bob", f"owner_id in get reply: {got._info!r}"


async def test_spawn_template(async_client, template, cleanup):
    sb = await async_client.spawn_template(template.name)
    cleanup.append(sb.id)
    assert isinstance(sb, AsyncSandbox)
    assert SANDBOX_ID_RE.match(sb.id) and sb.state == "running" and sb.image == IMAGE, f"{sb._info!r}"
    assert sb._info.get("metadata") == {"template": template.name}, f"metadata {sb._info.get('metadata')!r}"


async def test_spawn_unknown_template_raises_not_found(async_client):
    with pytest.raises(SandboxNotFound):
        await async_client.spawn_template(unique("no-such-template"))


# ======================================================================================
# exec
# ======================================================================================


async def test_exec_echo(async_sandbox):
    r = await async_sandbox.exec("echo hello")
    assert isinstance(r, ExecResult)
    assert (r.exit_code, r.stdout, r.stderr) == (0, "hello\n", ""), f"{r!r}"
    assert GO_DURATION_RE.match(r.duration), f"duration {r.duration!r}"


async def test_exec_nonzero_exit_code(async_sandbox):
    r = await async_sandbox.exec("exit 42")
    assert r.exit_code == 42, f"'exit 42' gave {r.exit_code}"


async def test_exec_stderr_captured(async_sandbox):
    r = await async_sandbox.exec("echo oops >&2")
    assert (r.stdout, r.stderr) == ("", "oops\n"), f"{r!r}"


async def test_exec_args_env_workdir(async_sandbox):
    r = await async_sandbox.exec("printf '%s|' \"$FOO\" \"$(pwd)\"", args=["a b", "it's"], env={"FOO": "bar"}, workdir="/tmp")
    assert r.stdout == "bar|/tmp|a b|it's|", f"args/env/workdir: {r.stdout!r} (stderr {r.stderr!r})"


async def test_exec_timeout_is_enforced(async_sandbox):
    t0 = time.monotonic()
    r = await async_sandbox.exec("sleep 30", timeout="1s")
    elapsed = time.monotonic() - t0
    assert elapsed < 10, f"exec with timeout '1s' took {elapsed:.1f}s: the timeout is not enforced"
    assert r.exit_code != 0, f"a timed-out command must not report success: {r!r}"


async def test_concurrent_execs_in_one_sandbox(async_sandbox):
    results = await asyncio.gather(*(async_sandbox.exec(f"sleep 0.2; echo {i}") for i in range(5)))
    assert [r.stdout for r in results] == [f"{i}\n" for i in range(5)], f"{results!r}"


# ======================================================================================
# exec_stream
# ======================================================================================


async def test_exec_stream_chunks(async_sandbox):
    chunks = await collect(async_sandbox.exec_stream("for i in 1 2 3; do echo line$i; done"))
    assert chunks and all(isinstance(c, StreamChunk) for c in chunks), f"chunks {chunks!r}"
    assert stdout_of(chunks) == "line1\nline2\nline3\n", f"stdout {stdout_of(chunks)!r}"


async def test_exec_stream_stderr_and_unicode(async_sandbox):
    chunks = await collect(async_sandbox.exec_stream("printf '%s' \"$T\"; echo err >&2", env={"T": UNICODE_TEXT}))
    assert stdout_of(chunks) == UNICODE_TEXT, f"streamed unicode: {stdout_of(chunks)!r}"
    assert "".join(c.data for c in chunks if c.stream == "stderr") == "err\n"


async def test_exec_stream_args_and_workdir(async_sandbox):
    chunks = await collect(async_sandbox.exec_stream("pwd; printf '%s|'", args=["x y"], workdir="/tmp"))
    assert stdout_of(chunks) == "/tmp\nx y|", f"stream args/workdir: {stdout_of(chunks)!r}"


async def test_exec_stream_is_incremental(async_sandbox):
    t0 = time.monotonic()
    arrivals = []
    async for c in async_sandbox.exec_stream("echo first; sleep 1; echo second"):
        if c.data:
            arrivals.append((time.monotonic() - t0, c.data))
    assert "".join(d for _, d in arrivals) == "first\nsecond\n", f"{arrivals!r}"
    assert arrivals[-1][0] - arrivals[0][0] >= 0.5, f"output was not delivered as produced: {arrivals!r}"


async def test_exec_stream_large_output(async_sandbox):
    expected = "".join(f"{i}\n" for i in range(1, 20001))
    out = stdout_of(await collect(async_sandbox.exec_stream("seq 1 20000")))
    assert out == expected, f"streamed {len(out)} chars, expected {len(expected)}"


# ======================================================================================
# files
# ======================================================================================


async def test_write_read_round_trip(async_sandbox):
    await async_sandbox.write_file("/workspace/test.txt", "hello world")
    assert await async_sandbox.read_file("/workspace/test.txt") == "hello world"
    await async_sandbox.write_file("/workspace/unicode.txt", UNICODE_TEXT)
    got = await async_sandbox.read_file("/workspace/unicode.txt")
    assert got == UNICODE_TEXT, f"unicode round trip: {got!r}"


async def test_list_files(async_sandbox):
    await async_sandbox.write_file("/workspace/ls/a.txt", "a")
    await async_sandbox.write_file("/workspace/ls/b.txt", "b")
    names = sorted(basename(e["path"]) for e in await async_sandbox.list_files("/workspace/ls"))
    assert names == ["a.txt", "b.txt"], f"listed {names}"


async def test_delete_file_then_read_raises(async_sandbox):
    await async_sandbox.write_file("/workspace/gone.txt", "bye")
    await async_sandbox.delete_file("/workspace/gone.txt")
    with pytest.raises(ForgevmError) as ei:
        await async_sandbox.read_file("/workspace/gone.txt")
    assert_not_sandbox_not_found(ei.value, "read of a deleted file")


async def test_delete_recursive(async_sandbox):
    await async_sandbox.write_file("/workspace/tree/sub/y.txt", "y")
    await async_sandbox.delete_file("/workspace/tree", recursive=True)
    assert await async_sandbox.glob_files("/workspace/tree*") == [], "recursive delete left files behind"


async def test_move_file(async_sandbox):
    await async_sandbox.write_file("/workspace/old.txt", "moving")
    await async_sandbox.move_file("/workspace/old.txt", "/workspace/moved/new.txt")
    assert await async_sandbox.read_file("/workspace/moved/new.txt") == "moving"
    with pytest.raises(ForgevmError) as ei:
        await async_sandbox.read_file("/workspace/old.txt")
    assert_not_sandbox_not_found(ei.value, "read of a moved-away file")


async def test_chmod_then_stat_mode(async_sandbox):
    await async_sandbox.write_file("/workspace/perm.sh", "#!/bin/sh\n")
    await async_sandbox.chmod_file("/workspace/perm.sh", "0755")
    st = await async_sandbox.stat_file("/workspace/perm.sh")
    assert permission_bits(st["mode"]) == 0o755, f"chmod 0755 then stat mode {st.get('mode')!r}"


async def test_stat_file(async_sandbox):
    await async_sandbox.write_file("/workspace/info.txt", "hello world")
    st = await async_sandbox.stat_file("/workspace/info.txt")
    assert st["size"] == 11 and st["is_dir"] is False, f"stat {st!r}"


async def test_glob_files(async_sandbox):
    for name in ("a.log", "b.log", "c.txt"):
        await async_sandbox.write_file(f"/workspace/g/{name}", name)
    matches = await async_sandbox.glob_files("/workspace/g/*.log")
    assert sorted(basename(m) for m in matches) == ["a.log", "b.log"], f"glob *.log: {matches!r}"


async def test_read_missing_file_is_not_sandbox_not_found(async_sandbox):
    with pytest.raises(ForgevmError) as ei:
        await async_sandbox.read_file("/workspace/does-not-exist.txt")
    assert_not_sandbox_not_found(ei.value, "read of a missing file")


async def test_operations_on_destroyed_sandbox_raise_not_found(async_client, cleanup):
    sb = await async_client.spawn(image=IMAGE, ttl=SANDBOX_TTL)
    cleanup.append(sb.id)
    await sb.write_file("/workspace/x.txt", "x")
    await sb.destroy()
    calls = {
        "exec": lambda: sb.exec("echo hi"),
        "write_file": lambda: sb.write_file("/workspace/y.txt", "y"),
        "read_file": lambda: sb.read_file("/workspace/x.txt"),
        "list_files": lambda: sb.list_files("/workspace"),
        "delete_file": lambda: sb.delete_file("/workspace/x.txt"),
        "move_file": lambda: sb.move_file("/workspace/x.txt", "/workspace/z.txt"),
        "chmod_file": lambda: sb.chmod_file("/workspace/x.txt", "0600"),
        "stat_file": lambda: sb.stat_file("/workspace/x.txt"),
        "glob_files": lambda: sb.glob_files("/workspace/*"),
        "extend_ttl": lambda: sb.extend_ttl("5m"),
    }
    wrong = {}
    for name, call in calls.items():
        try:
            await call()
            wrong[name] = "no exception"
        except SandboxNotFound:
            pass
        except Exception as e:  # noqa: BLE001
            wrong[name] = f"{type(e).__name__}: {e}"
    assert not wrong, f"on a destroyed sandbox these did not raise SandboxNotFound: {wrong}"
