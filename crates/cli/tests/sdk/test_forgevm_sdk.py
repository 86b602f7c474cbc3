"""ForgeVM SDK (forgevm 0.1.2, sync API) against a live Forge server, plus raw-HTTP checks
of the wire contract (/work/shared/reference/forgevm-api.md) where the SDK hides it."""

from __future__ import annotations

import json
import threading
import time
import uuid

import httpx
import pytest

import forgevm
from forgevm import (
    ExecResult,
    ForgevmError,
    ProviderError,
    Sandbox,
    SandboxInfo,
    SandboxNotFound,
)
from forgevm.models import Template
from forgevm.providers import ProviderManager
from forgevm.streaming import StreamChunk

from conftest import (
    FORGE_API_KEY,
    FORGE_URL,
    GO_DURATION_RE,
    HTTP_TIMEOUT,
    IMAGE,
    SANDBOX_ID_RE,
    SANDBOX_TTL,
    assert_sandbox_json,
    auth_headers,
    basename,
    parse_time,
    permission_bits,
    raw_client,
    sse_events,
    unique,
)

UNICODE_TEXT = "héllo wörld ✓ 日本語 🚀\nzweite Zeile — ok\n"
NOT_A_SANDBOX = "sb-nonexistent"


def assert_not_sandbox_not_found(exc: BaseException, what: str) -> None:
    assert isinstance(exc, ForgevmError), f"{what}: expected a ForgevmError, got {type(exc).__name__}: {exc}"
    assert not isinstance(exc, SandboxNotFound), (
        f"{what}: the sandbox exists, so the server must not answer 404 "
        f"(the SDK turns every 404 into SandboxNotFound); got {exc!r}"
    )


# ======================================================================================
# client: health, pool, spawn, get, list, prune
# ======================================================================================


def test_health_status_ok(client):
    h = client.health()
    assert h.get("status") == "ok", f"health status is {h.get('status')!r}, expected 'ok': {h!r}"
    assert isinstance(h.get("version"), str) and h["version"], f"health lacks a version: {h!r}"
    assert isinstance(h.get("uptime"), str) and GO_DURATION_RE.match(h["uptime"]), (
        f"health uptime {h.get('uptime')!r} is not a Go duration string"
    )


def test_pool_status_has_enabled(client):
    st = client.pool_status()
    assert "enabled" in st, f"pool status lacks 'enabled': {st!r}"
    assert isinstance(st["enabled"], bool), f"'enabled' is not a bool: {st!r}"
    if not st["enabled"]:
        assert st == {"enabled": False}, f"disabled pool status must be exactly {{'enabled': false}}, got {st!r}"


def test_spawn_returns_running_sandbox(client, cleanup):
    sb = client.spawn(image=IMAGE, ttl=SANDBOX_TTL)
    cleanup.append(sb.id)
    assert isinstance(sb, Sandbox)
    assert sb.id.startswith("sb-"), f"sandbox id {sb.id!r} does not start with 'sb-'"
    assert SANDBOX_ID_RE.match(sb.id), f"sandbox id {sb.id!r} is not 'sb-' + 8 lowercase hex"
    assert sb.state == "running", f"fresh sandbox state is {sb.state!r}, expected 'running'"
    assert sb.image == IMAGE, f"sandbox image is {sb.image!r}, expected {IMAGE!r}"
    assert sb.provider, "sandbox provider is empty"
    assert repr(sb) == f"Sandbox(id={sb.id!r}, state='running')"
    assert_sandbox_json(sb._info)


def test_spawn_with_options_echoes_them(client, cleanup):
    sb = client.spawn(image=IMAGE, memory_mb=256, vcpus=1, ttl="7m", metadata={"purpose": "sdk-test"})
    cleanup.append(sb.id)
    info = sb._info
    assert info["memory_mb"] == 256, f"memory_mb not echoed: {info!r}"
    assert info["vcpus"] == 1, f"vcpus not echoed: {info!r}"
    assert info.get("metadata") == {"purpose": "sdk-test"}, f"metadata not echoed: {info!r}"
    lifetime = (parse_time(info["expires_at"]) - parse_time(info["created_at"])).total_seconds()
    assert 6 * 60 <= lifetime <= 8 * 60, f"ttl 7m gave a lifetime of {lifetime}s: {info!r}"


def test_spawn_unknown_provider_is_an_error(client, cleanup):
    # ForgeVM answers 500 (ProviderError); a 4xx (plain ForgevmError) is fine too, but not a
    # 404, which the SDK would report as a missing *sandbox*.
    with pytest.raises(ForgevmError) as ei:
        sb = client.spawn(image=IMAGE, provider="no-such-provider", ttl=SANDBOX_TTL)
        cleanup.append(sb.id)
    assert_not_sandbox_not_found(ei.value, "spawn with an unknown provider")


def test_spawn_connection_refused_raises_connection_error():
    # Pure SDK behaviour: only spawn/spawn_template convert httpx.ConnectError.
    with forgevm.Client("http://127.0.0.1:1", timeout=2.0) as dead:
        with pytest.raises(forgevm.ConnectionError):
            dead.spawn(image=IMAGE)


def test_get_returns_same_sandbox(client, sandbox):
    got = client.get(sandbox.id)
    assert isinstance(got, Sandbox)
    assert got.id == sandbox.id, f"get({sandbox.id!r}) returned id {got.id!r}"
    assert got.state == "running", f"state is {got.state!r}"
    assert got.image == IMAGE
    assert got.provider == sandbox.provider
    assert_sandbox_json(got._info)
    assert got._info["created_at"] and got._info["expires_at"]


def test_get_unknown_raises_sandbox_not_found(client):
    with pytest.raises(SandboxNotFound) as ei:
        client.get(NOT_A_SANDBOX)
    assert ei.value.code == "NOT_FOUND"


def test_list_contains_spawned_sandbox(client, sandbox):
    items = client.list()
    assert isinstance(items, list) and all(isinstance(i, SandboxInfo) for i in items)
    mine = [i for i in items if i.id == sandbox.id]
    assert mine, f"{sandbox.id} missing from list(): {[i.id for i in items]}"
    info = mine[0]
    assert info.state == "running", f"listed state {info.state!r}"
    assert info.image == IMAGE, f"listed image {info.image!r}"
    assert info.provider == sandbox.provider
    assert info.created_at and info.expires_at, f"listed sandbox lacks timestamps: {info!r}"


def test_list_omits_destroyed_sandbox(client, cleanup):
    sb = client.spawn(image=IMAGE, ttl=SANDBOX_TTL)
    cleanup.append(sb.id)
    sb.destroy()
    assert sb.id not in [i.id for i in client.list()], f"destroyed {sb.id} still listed"


def test_prune_returns_int(client):
    n = client.prune()
    assert isinstance(n, int) and n >= 0, f"prune() returned {n!r}"


def test_prune_removes_expired_sandbox(client, cleanup):
    sb = client.spawn(image=IMAGE, ttl="1ms")
    cleanup.append(sb.id)
    time.sleep(0.05)
    n = client.prune()
    assert isinstance(n, int) and n >= 0, f"prune() returned {n!r}"
    # Either prune or the reaper got it; either way it must be gone now.
    with pytest.raises(SandboxNotFound):
        client.get(sb.id)
    assert sb.id not in [i.id for i in client.list()], f"expired {sb.id} still listed after prune"


def test_client_context_manager_closes_http(client):
    with forgevm.Client(FORGE_URL, api_key=FORGE_API_KEY) as c:
        assert c.health()["status"] == "ok"
    assert c._http.is_closed, "Client.__exit__ did not close its httpx client"


# ======================================================================================
# sandbox lifecycle: destroy, context manager, extend, owner
# ======================================================================================


def test_destroy_then_get_raises(client, cleanup):
    sb = client.spawn(image=IMAGE, ttl=SANDBOX_TTL)
    cleanup.append(sb.id)
    sb.destroy()
    with pytest.raises(SandboxNotFound):
        client.get(sb.id)
    sb.destroy()  # idempotent: a second destroy is 200 as well


def test_sandbox_context_manager_destroys(client, cleanup):
    with client.spawn(image=IMAGE, ttl=SANDBOX_TTL) as sb:
        cleanup.append(sb.id)
        assert sb.exec("echo inside").stdout == "inside\n"
    with pytest.raises(SandboxNotFound):
        client.get(sb.id)


def test_extend_ttl_moves_expiry_later(sandbox):
    before = parse_time(sandbox._info["expires_at"])
    assert sandbox.extend_ttl("2h") is None
    after = parse_time(sandbox._info["expires_at"])
    assert after > before, f"extend_ttl('2h') did not move expires_at later: {before} -> {after}"
    assert sandbox.state == "running"


def test_extend_ttl_resets_from_now(sandbox):
    sandbox.extend_ttl("2h")
    two_hours = parse_time(sandbox._info["expires_at"])
    sandbox.extend_ttl("1h")
    one_hour = parse_time(sandbox._info["expires_at"])
    assert one_hour < two_hours, (
        f"extend is now+ttl (reset), not additive: after 2h then 1h expected an earlier expiry, "
        f"got {two_hours} then {one_hour}"
    )
    created = parse_time(sandbox._info["created_at"])
    assert (one_hour - created).total_seconds() >= 3600 - 5, "extend 1h gave less than an hour from creation"


def test_extend_ttl_negative_is_bad_request(sandbox):
    with pytest.raises(ForgevmError) as ei:
        sandbox.extend_ttl("-5m")
    assert not isinstance(ei.value, (SandboxNotFound, ProviderError)), f"expected a 400, got {ei.value!r}"
    assert ei.value.code == "BAD_REQUEST", f"code {ei.value.code!r}, expected BAD_REQUEST"


def test_extend_ttl_invalid_duration_is_bad_request(sandbox):
    with pytest.raises(ForgevmError) as ei:
        sandbox.extend_ttl("not-a-duration")
    assert ei.value.code == "BAD_REQUEST", f"{ei.value!r}"


def test_user_id_sets_owner(client, cleanup):
    with forgevm.Client(FORGE_URL, api_key=FORGE_API_KEY, user_id="bob") as bob:
        sb = bob.spawn(image=IMAGE, ttl=SANDBOX_TTL)
        cleanup.append(sb.id)
        assert sb._info.get("owner_id") == "bob", f"owner_id in spawn reply: {sb._info!r}"
    got = client.get(sb.id)
    assert got._info.get("owner_id") == "bob", f"owner_id in get reply: {got._info!r}"


def test_no_user_id_means_no_owner(sandbox):
    assert sandbox._info.get("owner_id", "") == "", f"owner_id must be omitted when empty: {sandbox._info!r}"


# ======================================================================================
# exec
# ======================================================================================


def test_exec_echo(sandbox):
    r = sandbox.exec("echo hello")
    assert isinstance(r, ExecResult)
    assert r.exit_code == 0, f"exit {r.exit_code}, stderr {r.stderr!r}"
    assert r.stdout == "hello\n", f"stdout {r.stdout!r}"
    assert r.stderr == "", f"stderr {r.stderr!r}"
    assert GO_DURATION_RE.match(r.duration), f"duration {r.duration!r} is not a Go duration string"


def test_exec_nonzero_exit_code(sandbox):
    r = sandbox.exec("exit 42")
    assert r.exit_code == 42, f"'exit 42' gave exit_code {r.exit_code}"


def test_exec_stderr_captured(sandbox):
    r = sandbox.exec("echo out; echo oops >&2; exit 3")
    assert r.stdout == "out\n", f"stdout {r.stdout!r}"
    assert r.stderr == "oops\n", f"stderr {r.stderr!r}"
    assert r.exit_code == 3


def test_exec_args_are_appended_shell_quoted(sandbox):
    # ForgeVM (agent/docker) semantics: sh -c "<command> 'arg1' 'arg2' ...".
    r = sandbox.exec("printf '%s|'", args=["a b", "$HOME", "it's", "*"])
    assert r.exit_code == 0, f"stderr {r.stderr!r}"
    assert r.stdout == "a b|$HOME|it's|*|", f"args not passed verbatim: {r.stdout!r}"


def test_exec_env(sandbox):
    r = sandbox.exec('echo "$FOO/$BAR"', env={"FOO": "bar baz", "BAR": "ünï"})
    assert r.stdout == "bar baz/ünï\n", f"env not applied: {r.stdout!r} (stderr {r.stderr!r})"


def test_exec_workdir(sandbox):
    r = sandbox.exec("pwd", workdir="/tmp")
    assert r.stdout.strip() == "/tmp", f"workdir not applied: {r.stdout!r} (stderr {r.stderr!r})"


def test_exec_timeout_is_enforced(sandbox):
    t0 = time.monotonic()
    r = sandbox.exec("sleep 30", timeout="1s")
    elapsed = time.monotonic() - t0
    assert elapsed < 10, f"exec with timeout '1s' took {elapsed:.1f}s: the timeout is not enforced"
    assert r.exit_code != 0, f"a timed-out command must not report success: {r!r}"


def test_exec_large_output(sandbox):
    r = sandbox.exec("seq 1 100000")
    expected = "".join(f"{i}\n" for i in range(1, 100001))
    assert r.exit_code == 0
    assert len(r.stdout) == len(expected), f"stdout has {len(r.stdout)} chars, expected {len(expected)}"
    assert r.stdout == expected


def test_exec_unicode_output(sandbox):
    r = sandbox.exec("printf '%s' \"$T\"", env={"T": UNICODE_TEXT})
    assert r.stdout == UNICODE_TEXT, f"unicode mangled: {r.stdout!r}"


def test_exec_sees_written_file(sandbox):
    sandbox.write_file("/workspace/seen.txt", "from the file API\n")
    r = sandbox.exec("cat /workspace/seen.txt")
    assert r.stdout == "from the file API\n", f"exec could not read the written file: {r!r}"


# ======================================================================================
# exec_stream
# ======================================================================================


def test_exec_stream_chunks(sandbox):
    chunks = list(sandbox.exec_stream("for i in 1 2 3; do echo line$i; done"))
    assert chunks, "exec_stream yielded no chunks"
    assert all(isinstance(c, StreamChunk) for c in chunks)
    assert all(c.stream in ("stdout", "stderr") for c in chunks), f"bad stream names: {chunks!r}"
    out = "".join(c.data for c in chunks if c.stream == "stdout")
    assert out == "line1\nline2\nline3\n", f"concatenated stdout {out!r}"


def test_exec_stream_separates_stderr(sandbox):
    chunks = list(sandbox.exec_stream("echo out; echo err >&2"))
    out = "".join(c.data for c in chunks if c.stream == "stdout")
    err = "".join(c.data for c in chunks if c.stream == "stderr")
    assert out == "out\n", f"stdout {out!r} from chunks {chunks!r}"
    assert err == "err\n", f"stderr {err!r} from chunks {chunks!r}"


def test_exec_stream_unicode_multiline(sandbox):
    chunks = list(sandbox.exec_stream("printf '%s' \"$T\"", env={"T": UNICODE_TEXT}))
    out = "".join(c.data for c in chunks if c.stream == "stdout")
    assert out == UNICODE_TEXT, f"streamed unicode mangled: {out!r}"


def test_exec_stream_args_and_workdir(sandbox):
    chunks = list(sandbox.exec_stream("pwd; printf '%s|'", args=["x y", "z"], workdir="/tmp"))
    out = "".join(c.data for c in chunks if c.stream == "stdout")
    assert out == "/tmp\nx y|z|", f"stream args/workdir not applied: {out!r}"


def test_exec_stream_large_output(sandbox):
    expected = "".join(f"{i}\n" for i in range(1, 20001))
    out = "".join(c.data for c in sandbox.exec_stream("seq 1 20000") if c.stream == "stdout")
    assert out == expected, f"streamed {len(out)} chars, expected {len(expected)}"


def test_exec_stream_is_incremental(sandbox):
    t0 = time.monotonic()
    arrivals = []
    for c in sandbox.exec_stream("echo first; sleep 1; echo second"):
        if c.data:
            arrivals.append((time.monotonic() - t0, c.data))
    text = "".join(d for _, d in arrivals)
    assert text == "first\nsecond\n", f"stream text {text!r}"
    first_at = arrivals[0][0]
    last_at = arrivals[-1][0]
    assert last_at - first_at >= 0.5, (
        f"output was not delivered as produced: first chunk at {first_at:.2f}s, last at {last_at:.2f}s"
    )


def test_exec_stream_on_destroyed_sandbox_raises(client, cleanup):
    sb = client.spawn(image=IMAGE, ttl=SANDBOX_TTL)
    cleanup.append(sb.id)
    sb.destroy()
    # SDK quirk: exec_stream calls handle_response on an unread response, so the error
    # surfaces as httpx.ResponseNotRead rather than a ForgeVM exception. Any exception is fine.
    with pytest.raises(Exception):
        list(sb.exec_stream("echo nope"))


# ======================================================================================
# files
# ======================================================================================


def test_write_read_round_trip(sandbox):
    assert sandbox.write_file("/workspace/test.txt", "hello world") is None
    assert sandbox.read_file("/workspace/test.txt") == "hello world"


def test_write_read_unicode_round_trip(sandbox):
    sandbox.write_file("/workspace/unicode.txt", UNICODE_TEXT)
    got = sandbox.read_file("/workspace/unicode.txt")
    assert got == UNICODE_TEXT, f"unicode round trip: wrote {UNICODE_TEXT!r}, read {got!r}"


def test_write_read_control_characters(sandbox):
    text = "tab\there\r\ncrlf\x00nul\x1besc\n"
    sandbox.write_file("/workspace/ctrl.txt", text)
    got = sandbox.read_file("/workspace/ctrl.txt")
    assert got == text, f"control characters not preserved: wrote {text!r}, read {got!r}"


def test_write_read_empty_and_large(sandbox):
    sandbox.write_file("/workspace/empty.txt", "")
    assert sandbox.read_file("/workspace/empty.txt") == ""
    big = ("0123456789abcdef" * 64 + "\n") * 1024  # ~1 MiB
    sandbox.write_file("/workspace/big.txt", big)
    got = sandbox.read_file("/workspace/big.txt")
    assert len(got) == len(big) and got == big, f"1 MiB round trip: read {len(got)} chars of {len(big)}"


def test_write_creates_parent_directories(sandbox):
    sandbox.write_file("/workspace/deep/er/still/file.txt", "nested")
    assert sandbox.read_file("/workspace/deep/er/still/file.txt") == "nested"


def test_write_overwrites(sandbox):
    sandbox.write_file("/workspace/over.txt", "a much longer first version\n")
    sandbox.write_file("/workspace/over.txt", "short\n")
    assert sandbox.read_file("/workspace/over.txt") == "short\n", "overwrite did not truncate"


def test_write_with_mode(sandbox):
    sandbox.write_file("/workspace/run.sh", "#!/bin/sh\necho ran\n", mode="0755")
    st = sandbox.stat_file("/workspace/run.sh")
    assert permission_bits(st["mode"]) == 0o755, f"write mode 0755 gave {st['mode']!r}"
    r = sandbox.exec("/workspace/run.sh")
    assert r.stdout == "ran\n", f"script written with mode 0755 did not run: {r!r}"


def test_write_default_mode_is_0644(sandbox):
    sandbox.write_file("/workspace/plain.txt", "x")
    st = sandbox.stat_file("/workspace/plain.txt")
    assert permission_bits(st["mode"]) == 0o644, f"default write mode gave {st['mode']!r}, expected 0644"


def test_list_files(sandbox):
    sandbox.write_file("/workspace/ls/a.txt", "a")
    sandbox.write_file("/workspace/ls/b.txt", "bb")
    sandbox.write_file("/workspace/ls/sub/c.txt", "c")
    entries = sandbox.list_files("/workspace/ls")
    assert isinstance(entries, list), f"list_files returned {entries!r}"
    for e in entries:
        for key in ("path", "size", "mode", "is_dir", "mod_time"):
            assert key in e, f"FileInfo lacks {key!r}: {e!r}"
    by_name = {basename(e["path"]): e for e in entries}
    assert set(by_name) == {"a.txt", "b.txt", "sub"}, f"listed names {sorted(by_name)}"
    assert by_name["a.txt"]["is_dir"] is False and by_name["a.txt"]["size"] == 1
    assert by_name["b.txt"]["size"] == 2
    assert by_name["sub"]["is_dir"] is True, f"sub is not a directory: {by_name['sub']!r}"


def test_list_files_default_path_is_root(sandbox):
    names = {basename(e["path"]) for e in sandbox.list_files()}
    assert "workspace" in names, f"list_files() (path '/') lacks workspace: {sorted(names)}"


def test_list_empty_directory(sandbox):
    sandbox.exec("mkdir -p /workspace/emptydir")
    assert sandbox.list_files("/workspace/emptydir") == [], "empty directory must list as []"


def test_delete_file_then_read_raises(sandbox):
    sandbox.write_file("/workspace/gone.txt", "bye")
    assert sandbox.delete_file("/workspace/gone.txt") is None
    with pytest.raises(ForgevmError) as ei:
        sandbox.read_file("/workspace/gone.txt")
    assert_not_sandbox_not_found(ei.value, "read of a deleted file")


def test_delete_recursive(sandbox):
    sandbox.write_file("/workspace/tree/x.txt", "x")
    sandbox.write_file("/workspace/tree/sub/y.txt", "y")
    with pytest.raises(ForgevmError) as ei:
        sandbox.delete_file("/workspace/tree")  # non-empty directory without recursive
    assert_not_sandbox_not_found(ei.value, "non-recursive delete of a non-empty directory")
    sandbox.delete_file("/workspace/tree", recursive=True)
    assert sandbox.glob_files("/workspace/tree*") == [], "recursive delete left the directory behind"
    with pytest.raises(ForgevmError):
        sandbox.stat_file("/workspace/tree")


def test_move_file(sandbox):
    sandbox.write_file("/workspace/mv/old.txt", "moving")
    assert sandbox.move_file("/workspace/mv/old.txt", "/workspace/mv/new/dir/new.txt") is None
    assert sandbox.read_file("/workspace/mv/new/dir/new.txt") == "moving"
    with pytest.raises(ForgevmError) as ei:
        sandbox.read_file("/workspace/mv/old.txt")
    assert_not_sandbox_not_found(ei.value, "read of a moved-away file")


def test_chmod_then_stat_mode(sandbox):
    sandbox.write_file("/workspace/perm.sh", "#!/bin/sh\necho ok\n")
    assert sandbox.chmod_file("/workspace/perm.sh", "0755") is None
    st = sandbox.stat_file("/workspace/perm.sh")
    assert st.get("mode"), f"stat after chmod has no mode: {st!r}"
    assert permission_bits(st["mode"]) == 0o755, f"chmod 0755 then stat mode {st['mode']!r}"
    sandbox.chmod_file("/workspace/perm.sh", "0600")
    assert permission_bits(sandbox.stat_file("/workspace/perm.sh")["mode"]) == 0o600


def test_stat_file(sandbox):
    sandbox.write_file("/workspace/info.txt", "hello world")
    st = sandbox.stat_file("/workspace/info.txt")
    for key in ("path", "size", "mode", "is_dir", "mod_time"):
        assert key in st, f"stat lacks {key!r}: {st!r}"
    assert st["size"] == 11, f"size {st['size']!r}, expected 11"
    assert st["is_dir"] is False, f"is_dir {st['is_dir']!r}"
    assert basename(st["path"]) == "info.txt", f"path {st['path']!r}"
    parse_time(st["mod_time"])


def test_stat_directory(sandbox):
    sandbox.write_file("/workspace/adir/f", "x")
    st = sandbox.stat_file("/workspace/adir")
    assert st["is_dir"] is True, f"stat of a directory: {st!r}"


def test_glob_files(sandbox):
    sandbox.write_file("/workspace/g/a.log", "1")
    sandbox.write_file("/workspace/g/b.log", "2")
    sandbox.write_file("/workspace/g/c.txt", "3")
    matches = sandbox.glob_files("/workspace/g/*.log")
    assert isinstance(matches, list), f"glob returned {matches!r}"
    assert len(matches) == 2, f"glob *.log matched {matches!r}"
    assert sorted(basename(m) for m in matches) == ["a.log", "b.log"]
    assert sandbox.glob_files("/workspace/g/*.none") == [], "a glob without matches must be []"


def test_read_missing_file_is_not_sandbox_not_found(sandbox):
    with pytest.raises(ForgevmError) as ei:
        sandbox.read_file("/workspace/does-not-exist.txt")
    assert_not_sandbox_not_found(ei.value, "read of a missing file")


def test_stat_and_delete_missing_file_are_errors(sandbox):
    with pytest.raises(ForgevmError) as ei:
        sandbox.stat_file("/workspace/nope.txt")
    assert_not_sandbox_not_found(ei.value, "stat of a missing file")
    with pytest.raises(ForgevmError) as ei:
        sandbox.delete_file("/workspace/nope.txt")
    assert_not_sandbox_not_found(ei.value, "delete of a missing file")


# ======================================================================================
# destroyed sandboxes: everything is SandboxNotFound (Forge answers 404, unlike ForgeVM)
# ======================================================================================


def test_operations_on_destroyed_sandbox_raise_not_found(client, cleanup):
    sb = client.spawn(image=IMAGE, ttl=SANDBOX_TTL)
    cleanup.append(sb.id)
    sb.write_file("/workspace/x.txt", "x")
    sb.destroy()
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
        "refresh": lambda: sb.refresh(),
    }
    wrong = {}
    for name, call in calls.items():
        try:
            call()
            wrong[name] = "no exception"
        except SandboxNotFound:
            pass
        except Exception as e:  # noqa: BLE001
            wrong[name] = f"{type(e).__name__}: {e}"
    assert not wrong, f"on a destroyed sandbox these did not raise SandboxNotFound: {wrong}"


# ======================================================================================
# templates and providers (managers built from an httpx.Client, as 0.1.2 requires)
# ======================================================================================


def test_template_save_get_list(template_manager, template):
    assert isinstance(template, Template)
    assert template.image == IMAGE and template.memory_mb == 256, f"saved template {template!r}"
    got = template_manager.get(template.name)
    assert got.name == template.name and got.image == IMAGE, f"get returned {got!r}"
    names = [t.name for t in template_manager.list()]
    assert template.name in names, f"{template.name} missing from templates {names}"


def test_template_save_duplicate_conflicts(template_manager, template):
    with pytest.raises(ForgevmError) as ei:
        template_manager.save(Template(name=template.name, image=IMAGE))
    assert ei.value.code == "CONFLICT", f"duplicate template: {ei.value!r} (code {ei.value.code!r})"


def test_template_delete_then_get_raises(template_manager):
    name = unique("sdk-tpl")
    template_manager.save(Template(name=name, image=IMAGE))
    template_manager.delete(name)
    with pytest.raises(SandboxNotFound):  # the SDK maps every 404 to SandboxNotFound
        template_manager.get(name)


def test_spawn_template(client, template, cleanup):
    sb = client.spawn_template(template.name)
    cleanup.append(sb.id)
    assert isinstance(sb, Sandbox)
    assert SANDBOX_ID_RE.match(sb.id), f"template sandbox id {sb.id!r}"
    assert sb.state == "running" and sb.image == IMAGE, f"template sandbox {sb._info!r}"
    assert sb._info["memory_mb"] == 256, f"template memory_mb not applied: {sb._info!r}"
    assert sb._info.get("metadata") == {"template": template.name}, f"metadata {sb._info.get('metadata')!r}"
    assert sb.exec("echo from-template").stdout == "from-template\n"


def test_spawn_unknown_template_raises_not_found(client):
    with pytest.raises(SandboxNotFound):
        client.spawn_template(unique("no-such-template"))


def test_providers_list_and_test(sandbox):
    with httpx.Client(base_url=FORGE_URL, headers=auth_headers(), timeout=HTTP_TIMEOUT) as h:
        pm = ProviderManager(h)
        providers = pm.list()
        health = pm.test()
    assert isinstance(providers, list) and providers, f"providers list is empty: {providers!r}"
    for p in providers:
        assert isinstance(p.get("name"), str) and p["name"], f"provider without name: {p!r}"
        assert isinstance(p.get("healthy"), bool), f"provider 'healthy' not bool: {p!r}"
        assert isinstance(p.get("default"), bool), f"provider 'default' not bool: {p!r}"
    names = {p["name"] for p in providers}
    assert sum(p["default"] for p in providers) == 1, f"exactly one provider must be default: {providers!r}"
    assert sandbox.provider in names, f"sandbox provider {sandbox.provider!r} not in {names}"
    assert isinstance(health, dict) and set(health) == names, f"providers/test keys {health!r} vs {names}"
    assert all(isinstance(v, bool) for v in health.values()), f"providers/test values: {health!r}"


# ======================================================================================
# auth (only when the server has a key)
# ======================================================================================

needs_key = pytest.mark.skipif(not FORGE_API_KEY, reason="FORGE_API_KEY not set: server runs without auth")


@needs_key
def test_wrong_api_key_is_unauthorized():
    with forgevm.Client(FORGE_URL, api_key="wrong-" + uuid.uuid4().hex) as bad:
        with pytest.raises(ForgevmError) as ei:
            bad.health()
        assert ei.value.code == "UNAUTHORIZED", f"{ei.value!r}"
        assert not isinstance(ei.value, (SandboxNotFound, ProviderError))
        with pytest.raises(ForgevmError) as ei:
            bad.spawn(image=IMAGE)
        assert ei.value.code == "UNAUTHORIZED"


@needs_key
def test_missing_api_key_is_unauthorized():
    with forgevm.Client(FORGE_URL) as anon:
        with pytest.raises(ForgevmError) as ei:
            anon.list()
        assert ei.value.code == "UNAUTHORIZED", f"{ei.value!r}"


@needs_key
def test_raw_unauthorized_body():
    with httpx.Client(base_url=FORGE_URL, timeout=HTTP_TIMEOUT) as h:
        r = h.get("/api/v1/sandboxes", headers={"X-API-Key": "wrong"})
    assert r.status_code == 401, f"status {r.status_code}"
    assert r.json().get("code") == "UNAUTHORIZED", f"body {r.text!r}"


# ======================================================================================
# raw HTTP: the contract where the SDK does not show it
# ======================================================================================


def assert_error_body(resp: httpx.Response, status: int, code: str) -> dict:
    assert resp.status_code == status, f"expected {status}, got {resp.status_code}: {resp.text!r}"
    ctype = resp.headers.get("content-type", "")
    assert ctype.startswith("application/json"), f"error content-type {ctype!r}"
    body = resp.json()
    assert isinstance(body, dict), f"error body is not an object: {resp.text!r}"
    assert body.get("code") == code, f"error code {body.get('code')!r}, expected {code!r}: {body!r}"
    assert isinstance(body.get("message"), str) and body["message"], f"error message missing: {body!r}"
    return body


def test_raw_spawn_is_201_with_sandbox_body(http, cleanup):
    r = http.post("/api/v1/sandboxes", json={"image": IMAGE, "ttl": SANDBOX_TTL})
    assert r.status_code == 201, f"spawn answered {r.status_code}: {r.text!r}"
    assert r.headers.get("content-type", "").startswith("application/json")
    data = r.json()
    cleanup.append(data["id"])
    assert_sandbox_json(data)


def test_raw_list_collection_route_with_trailing_slash(http, sandbox):
    for path in ("/api/v1/sandboxes", "/api/v1/sandboxes/"):
        r = http.get(path)
        assert r.status_code == 200, f"GET {path}: {r.status_code}"
        items = r.json()
        assert any(i["id"] == sandbox.id for i in items), f"GET {path} lacks {sandbox.id}"
        for i in items:
            for key in ("id", "state", "provider", "image"):
                assert key in i, f"list item lacks {key!r}: {i!r}"


def test_raw_unknown_sandbox_is_404_not_found(http):
    body = assert_error_body(http.get(f"/api/v1/sandboxes/{NOT_A_SANDBOX}"), 404, "NOT_FOUND")
    assert set(body) == {"code", "message"}, f"error body must be exactly {{code, message}}: {body!r}"
    assert_error_body(http.post(f"/api/v1/sandboxes/{NOT_A_SANDBOX}/exec", json={"command": "true"}), 404, "NOT_FOUND")
    assert_error_body(http.post(f"/api/v1/sandboxes/{NOT_A_SANDBOX}/extend", json={"ttl": "5m"}), 404, "NOT_FOUND")
    assert_error_body(http.get(f"/api/v1/sandboxes/{NOT_A_SANDBOX}/files", params={"path": "/x"}), 404, "NOT_FOUND")


def test_raw_stream_exec_on_unknown_sandbox_is_404(http):
    r = http.post(f"/api/v1/sandboxes/{NOT_A_SANDBOX}/exec", json={"command": "true", "stream": True})
    assert_error_body(r, 404, "NOT_FOUND")


def test_raw_delete_unknown_sandbox_is_200(http):
    r = http.delete(f"/api/v1/sandboxes/{NOT_A_SANDBOX}")
    assert r.status_code == 200, f"DELETE of an unknown id must be 200 (idempotent), got {r.status_code}: {r.text!r}"
    assert r.json() == {"status": "destroyed"}, f"body {r.text!r}"


def test_raw_malformed_json_is_400_bad_request(http, sandbox):
    headers = {"Content-Type": "application/json"}
    assert_error_body(http.post("/api/v1/sandboxes", content=b'{"image": ', headers=headers), 400, "BAD_REQUEST")
    assert_error_body(
        http.post(f"/api/v1/sandboxes/{sandbox.id}/exec", content=b"not json", headers=headers), 400, "BAD_REQUEST"
    )
    assert_error_body(
        http.post(f"/api/v1/sandboxes/{sandbox.id}/files", content=b"[1,2", headers=headers), 400, "BAD_REQUEST"
    )


def test_raw_extend_validation(http, sandbox):
    url = f"/api/v1/sandboxes/{sandbox.id}/extend"
    for body in ({}, {"ttl": "-5m"}, {"ttl": "0s"}, {"ttl": "not-a-duration"}, {"ttl": "1d"}):
        assert_error_body(http.post(url, json=body), 400, "BAD_REQUEST")


def test_raw_extend_returns_sandbox(http, sandbox):
    before = parse_time(sandbox._info["expires_at"])
    r = http.post(f"/api/v1/sandboxes/{sandbox.id}/extend", json={"ttl": "1h"})
    assert r.status_code == 200, f"extend: {r.status_code} {r.text!r}"
    data = r.json()
    assert_sandbox_json(data)
    assert data["id"] == sandbox.id
    assert parse_time(data["expires_at"]) > before, "extend body does not carry the new expires_at"


def test_raw_missing_query_params_are_400(http, sandbox):
    base = f"/api/v1/sandboxes/{sandbox.id}/files"
    assert_error_body(http.get(base), 400, "BAD_REQUEST")
    assert_error_body(http.delete(base), 400, "BAD_REQUEST")
    assert_error_body(http.get(f"{base}/stat"), 400, "BAD_REQUEST")
    assert_error_body(http.get(f"{base}/glob"), 400, "BAD_REQUEST")


def test_raw_read_file_is_raw_bytes(http, sandbox):
    sandbox.write_file("/workspace/raw.txt", UNICODE_TEXT)
    r = http.get(f"/api/v1/sandboxes/{sandbox.id}/files", params={"path": "/workspace/raw.txt"})
    assert r.status_code == 200
    assert r.content == UNICODE_TEXT.encode("utf-8"), f"raw bytes {r.content!r}"
    ctype = r.headers.get("content-type", "")
    assert ctype.startswith("application/octet-stream") or "charset=utf-8" in ctype.lower(), (
        f"file content-type {ctype!r} would not decode as UTF-8 in httpx"
    )


def test_raw_request_id_echoed(http):
    rid = f"sdk-test-{uuid.uuid4()}"
    r = http.get("/api/v1/health", headers={"X-Request-ID": rid})
    assert r.headers.get("x-request-id") == rid, f"X-Request-ID not echoed: {r.headers.get('x-request-id')!r}"
    r = http.get(f"/api/v1/sandboxes/{NOT_A_SANDBOX}", headers={"X-Request-ID": rid})
    assert r.headers.get("x-request-id") == rid, "X-Request-ID not echoed on an error response"
    generated = http.get("/api/v1/health").headers.get("x-request-id")
    assert generated, "no X-Request-ID generated when the request had none"
    uuid.UUID(generated)  # the contract generates a UUIDv4


def test_raw_user_id_header_overrides_body_owner(http, cleanup):
    r = http.post(
        "/api/v1/sandboxes",
        json={"image": IMAGE, "ttl": SANDBOX_TTL, "owner_id": "alice"},
        headers={"X-User-ID": "bob"},
    )
    assert r.status_code == 201, r.text
    cleanup.append(r.json()["id"])
    assert r.json().get("owner_id") == "bob", f"X-User-ID must override the body owner_id: {r.json()!r}"


def test_raw_template_create_defaults(http):
    name = unique("raw-tpl")
    try:
        r = http.post("/api/v1/templates", json={"name": name, "image": IMAGE})
        assert r.status_code == 201, f"template create: {r.status_code} {r.text!r}"
        t = r.json()
        assert t["name"] == name and t["image"] == IMAGE
        assert (t.get("version"), t.get("memory_mb"), t.get("cpu_cores"), t.get("ttl_seconds")) == (1, 512, 1, 300), (
            f"template defaults not filled: {t!r}"
        )
    finally:
        http.delete(f"/api/v1/templates/{name}")


def _ndjson_lines(body: bytes) -> list[dict]:
    assert body.endswith(b"\n") or body == b"", f"NDJSON body must end with a newline: {body[-40:]!r}"
    out = []
    for raw in body.split(b"\n"):
        if not raw.strip():
            continue
        obj = json.loads(raw)  # no non-JSON lines, ever
        assert isinstance(obj, dict), f"NDJSON line is not an object: {raw!r}"
        out.append(obj)
    return out


def test_raw_ndjson_lines_are_stream_data_only(http, sandbox):
    body = {"command": "echo out; echo err >&2; printf 'no newline'; exit 5", "stream": True}
    with http.stream("POST", f"/api/v1/sandboxes/{sandbox.id}/exec", json=body) as resp:
        assert resp.status_code == 200, f"stream exec: {resp.status_code}"
        ctype = resp.headers.get("content-type", "")
        assert ctype.startswith("application/x-ndjson"), f"stream content-type {ctype!r}"
        raw = resp.read()
    lines = _ndjson_lines(raw)
    assert lines, "no NDJSON lines"
    for obj in lines:
        assert set(obj) == {"stream", "data"}, f"NDJSON line must be exactly {{stream, data}} by default: {obj!r}"
        assert obj["stream"] in ("stdout", "stderr"), f"bad stream {obj!r}"
        assert isinstance(obj["data"], str)
    out = "".join(o["data"] for o in lines if o["stream"] == "stdout")
    err = "".join(o["data"] for o in lines if o["stream"] == "stderr")
    assert (out, err) == ("out\nno newline", "err\n"), f"stream content: stdout {out!r}, stderr {err!r}"


def test_raw_ndjson_exit_event_opt_in(http, sandbox):
    body = {"command": "echo hi; exit 3", "stream": True, "exit_event": True}
    with http.stream("POST", f"/api/v1/sandboxes/{sandbox.id}/exec", json=body) as resp:
        assert resp.status_code == 200
        raw = resp.read()
    lines = _ndjson_lines(raw)
    assert lines, "no NDJSON lines"
    last = lines[-1]
    assert last.get("type") == "exit", f"with exit_event the last line must be the exit event, got {last!r}"
    assert last.get("exit_code") == 3, f"exit event exit_code {last.get('exit_code')!r}, expected 3: {last!r}"
    for obj in lines[:-1]:
        assert set(obj) == {"stream", "data"}, f"non-final line is not a chunk: {obj!r}"
    assert "".join(o["data"] for o in lines[:-1] if o["stream"] == "stdout") == "hi\n"
    assert sum(1 for o in lines if o.get("type") == "exit") == 1, "exactly one exit event expected"


def test_raw_ndjson_exit_event_success(http, sandbox):
    body = {"command": "true", "stream": True, "exit_event": True}
    with http.stream("POST", f"/api/v1/sandboxes/{sandbox.id}/exec", json=body) as resp:
        raw = resp.read()
    lines = _ndjson_lines(raw)
    assert lines and lines[-1].get("type") == "exit" and lines[-1].get("exit_code") == 0, f"lines {lines!r}"


def test_raw_sse_events_sandbox_created_has_id(client, cleanup):
    spawned: dict[str, str] = {}
    errors: list[BaseException] = []

    def spawn_concurrently():
        try:
            time.sleep(0.2)
            with forgevm.Client(FORGE_URL, api_key=FORGE_API_KEY, timeout=HTTP_TIMEOUT) as c:
                sb = c.spawn(image=IMAGE, ttl=SANDBOX_TTL)
            spawned["id"] = sb.id
            cleanup.append(sb.id)
        except BaseException as e:  # noqa: BLE001
            errors.append(e)

    created: list[dict] = []
    match = None
    with raw_client(timeout=httpx.Timeout(HTTP_TIMEOUT, read=5.0)) as sse:
        with sse.stream("GET", "/api/v1/events", headers={"Accept": "text/event-stream"}) as resp:
            assert resp.status_code == 200, f"events: {resp.status_code}"
            ctype = resp.headers.get("content-type", "")
            assert ctype.startswith("text/event-stream"), f"events content-type {ctype!r}"
            worker = threading.Thread(target=spawn_concurrently, daemon=True)
            worker.start()
            deadline = time.monotonic() + 15
            try:
                for ev in sse_events(resp.iter_lines()):
                    if ev["data"]:
                        payload = json.loads(ev["data"])
                        if payload.get("type") == "sandbox.created":
                            created.append({"sse_id": ev["id"], **payload})
                            worker.join(timeout=HTTP_TIMEOUT)
                            match = next((c for c in created if c.get("sandbox_id") == spawned.get("id")), None)
                            if match:
                                break
                    if time.monotonic() > deadline:
                        break
            except httpx.ReadTimeout:
                pass
    worker.join(timeout=HTTP_TIMEOUT)
    assert not errors, f"concurrent spawn failed: {errors!r}"
    assert "id" in spawned, "concurrent spawn did not finish"
    assert match, f"no sandbox.created event for {spawned['id']}; saw {created!r}"
    assert match["sse_id"], f"sandbox.created event has no non-empty SSE 'id:' field: {match!r}"
    parse_time(match["timestamp"])
