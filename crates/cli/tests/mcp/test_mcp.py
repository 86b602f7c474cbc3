"""Forge's tool gateway through the official MCP client, over stdio and Streamable HTTP:
the tool list follows the session's policy, tools run in the session's sandbox, a denied call
is a tool error naming the rule, an unknown tool is a protocol error."""

from __future__ import annotations

import anyio
import httpx2
import pytest

from conftest import TIMEOUT, api_headers, api_url, http_client
from mcp import MCPError

# Every tool the gateway serves under its default policy (all but `shell`), as `/mcp` lists
# them.
DEFAULT_TOOLS = sorted(
    [
        "bracket_tracker",
        "capture_preview_metadata",
        "check_port",
        "checkout_ref",
        "clone_repo",
        "delete_path",
        "detect_stack",
        "edit_file",
        "export_artifact",
        "export_artifacts",
        "functions_mapping",
        "http_health_check",
        "install_node_deps",
        "install_package",
        "install_python_deps",
        "list_directory",
        "move_path",
        "read_file",
        "run_code",
        "run_command",
        "search_in_files",
        "session_reset",
        "start_process",
        "stop_process",
        "stream_logs",
        "validate_code",
        "write_env_file",
        "write_file",
    ]
)

# The stdio session's policy (policy.toml) offers four.
POLICY_TOOLS = ["list_directory", "read_file", "run_code", "write_file"]

INVALID_PARAMS = -32602


def run(connect, body):
    """Runs `body(client)` with a connected client, closing it (and its session) after."""

    async def main():
        async with connect() as client:
            return await body(client)

    return anyio.run(main)


def test_the_tool_list_follows_the_session_policy(connect, transport):
    async def body(client):
        listed = await client.list_tools()
        return sorted(tool.name for tool in listed.tools), client.server_info.name

    names, server = run(connect, body)
    assert server == "forge"
    # `shell` is never listed by default; `delete_path` is not in the stdio policy.
    assert names == (POLICY_TOOLS if transport == "stdio" else DEFAULT_TOOLS)


def test_run_code_runs_python_in_the_sandbox(connect):
    async def body(client):
        return await client.call_tool("run_code", {"language": "python", "code": "print(6 * 7)"})

    result = run(connect, body)
    reply = result.structured_content
    assert (result.is_error, reply["outcome"], reply["result"]["stdout"], reply["result"]["exit_code"]) == (
        False,
        "ok",
        "42\n",
        0,
    )
    assert '"stdout":"42\\n"' in result.content[0].text


def test_read_file_reads_what_write_file_wrote(connect):
    async def body(client):
        written = await client.call_tool("write_file", {"path": "notes/mcp.txt", "content": "hello from mcp\n"})
        read = await client.call_tool("read_file", {"path": "notes/mcp.txt"})
        return written, read

    written, read = run(connect, body)
    assert (written.is_error, written.structured_content["result"]) == (
        False,
        {"path": "/workspace/notes/mcp.txt", "bytes": 15},
    )
    assert (read.is_error, read.structured_content["result"]["content"]) == (False, "hello from mcp\n")


def test_a_call_repeated_with_its_idempotency_key_is_not_run_twice(connect):
    """The key rides in `_meta` (MCP has no field for it); the second call returns the first
    call's recorded reply, marked as replayed, instead of running the code again."""
    meta = {"forge/idempotencyKey": "append-once"}
    code = "open('/workspace/count.txt', 'a').write('x')\nprint(len(open('/workspace/count.txt').read()))"

    async def body(client):
        first = await client.call_tool("run_code", {"language": "python", "code": code}, meta=meta)
        again = await client.call_tool("run_code", {"language": "python", "code": code}, meta=meta)
        return first.structured_content, again.structured_content

    first, again = run(connect, body)
    assert (first["result"]["stdout"], first["replayed"]) == ("1\n", False)
    assert again == {**first, "replayed": True}


def test_a_denied_call_is_a_tool_error_naming_the_rule(connect):
    async def body(client):
        return await client.call_tool("write_file", {"path": "/etc/forge-mcp-test", "content": "x"})

    result = run(connect, body)
    reply = result.structured_content
    assert (result.is_error, result.content[0].text) == (
        True,
        "write_file: denied by rule `paths.writable`: write_file would write /etc/forge-mcp-test, "
        "outside the writable paths (/workspace, /tmp)",
    )
    assert (reply["outcome"], reply["decision"], reply["rule"]) == ("denied", "deny", "paths.writable")


def test_a_tool_outside_the_policy_is_denied(connect, transport):
    tool = "delete_path" if transport == "stdio" else "shell"

    async def body(client):
        return await client.call_tool(tool, {"path": "notes"} if tool == "delete_path" else {"command": "id"})

    result = run(connect, body)
    assert (result.is_error, result.structured_content["rule"]) == (True, "tools.allowlist")
    assert result.content[0].text.startswith(f"{tool}: denied by rule `tools.allowlist`"), result.content[0].text


def test_an_unknown_tool_is_a_protocol_error(connect):
    async def body(client):
        with pytest.raises(MCPError) as raised:
            await client.call_tool("no_such_tool", {})
        return raised.value.error

    error = run(connect, body)
    assert (error.code, error.message) == (INVALID_PARAMS, 'no tool named "no_such_tool"')


def test_an_http_client_attaches_to_a_session_opened_over_the_api():
    """A session opened with `POST /api/v1/sessions` and its own policy, used over MCP through
    `X-Forge-Session`: MCP lists that policy's tools, and the session (with what MCP wrote in
    its sandbox) outlives the MCP client, since it belongs to whoever opened it."""
    api = httpx2.Client(headers=api_headers(), timeout=TIMEOUT)
    opened = api.post(api_url("/sessions"), json={"policy": {"tools": ["read_file", "write_file"]}})
    assert opened.status_code == 201, opened.text
    session = opened.json()["id"]

    async def body(client):
        listed = await client.list_tools()
        written = await client.call_tool("write_file", {"path": "shared.txt", "content": "from mcp\n"})
        return sorted(tool.name for tool in listed.tools), written

    try:
        names, written = run(lambda: http_client(attach=session), body)
        assert (names, written.is_error, written.structured_content["session_id"]) == (
            ["read_file", "write_file"],
            False,
            session,
        )
        state = api.get(api_url(f"/sessions/{session}")).json()["state"]
        read = api.post(api_url("/tools/read_file"), json={"session_id": session, "arguments": {"path": "shared.txt"}})
        assert (state, read.status_code, read.json()["result"]["content"]) == ("open", 200, "from mcp\n")
    finally:
        api.delete(api_url(f"/sessions/{session}"))
        api.close()


def mcp_error(raised: BaseException) -> MCPError | None:
    """The MCP error in `raised`, which anyio's task groups may have wrapped in groups."""
    if isinstance(raised, MCPError):
        return raised
    for inner in getattr(raised, "exceptions", ()):
        if (found := mcp_error(inner)) is not None:
            return found
    return None


def test_attaching_to_an_unknown_session_fails_the_handshake():
    async def body(client):
        return None

    with pytest.raises(BaseException) as raised:
        run(lambda: http_client(attach="ses-000000000000"), body)
    error = mcp_error(raised.value)
    assert error is not None, repr(raised.value)
    assert (error.error.code, error.error.message) == (INVALID_PARAMS, "no gateway session ses-000000000000")
