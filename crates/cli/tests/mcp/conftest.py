"""Fixtures for the MCP acceptance suite.

The suite drives Forge's tool gateway through the official MCP Python SDK (`mcp` 2.3.0), the
way an agent's MCP client would: over stdio, where the client starts `forge mcp` itself, and
over Streamable HTTP, against `/mcp` on a live `forge serve`. Every test runs once per
transport, each with a session of its own.

Environment:
    FORGE_BIN           the forge binary the stdio client starts
    FORGE_MCP_DATA_DIR  its data directory (a short path: sandbox sockets live below it)
    FORGE_URL           base URL of a running `forge serve`
    FORGE_API_KEY       that server's API key

Run:
    pip install -r crates/cli/tests/mcp/requirements.txt
    FORGE_BIN=target/debug/forge FORGE_MCP_DATA_DIR=/tmp/forge-mcp \\
    FORGE_URL=http://127.0.0.1:7423 FORGE_API_KEY=… pytest crates/cli/tests/mcp
"""

from __future__ import annotations

import os
from pathlib import Path

import httpx2
import pytest

from mcp import Client, StdioServerParameters
from mcp.client.streamable_http import streamable_http_client

HERE = Path(__file__).parent
POLICY = HERE / "policy.toml"

# Seconds a tool call may take before the client gives up (a cold sandbox start included).
TIMEOUT = 60.0


def stdio_client() -> Client:
    """A client that starts `forge mcp` with the suite's policy."""
    params = StdioServerParameters(
        command=os.environ["FORGE_BIN"],
        args=["mcp", "--data-dir", os.environ["FORGE_MCP_DATA_DIR"], "--policy", str(POLICY)],
        # The child gets only what it needs; logs stay on its stderr.
        env={"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "FORGE_LOG": "warn"},
    )
    return Client(params, read_timeout_seconds=TIMEOUT)


def api_headers() -> dict[str, str]:
    return {"X-API-Key": os.environ["FORGE_API_KEY"]}


def api_url(path: str) -> str:
    return os.environ["FORGE_URL"].rstrip("/") + "/api/v1" + path


def http_client(attach: str | None = None) -> Client:
    """A client of `/mcp` on the running server, authenticated like any API client; with
    `attach`, bound to that existing gateway session instead of a new one."""
    url = os.environ["FORGE_URL"].rstrip("/") + "/mcp"
    headers = api_headers()
    if attach is not None:
        headers["X-Forge-Session"] = attach
    http = httpx2.AsyncClient(headers=headers, timeout=httpx2.Timeout(TIMEOUT))
    return Client(streamable_http_client(url, http_client=http), read_timeout_seconds=TIMEOUT)


@pytest.fixture(params=["stdio", "http"])
def transport(request: pytest.FixtureRequest) -> str:
    return request.param


@pytest.fixture
def connect(transport: str):
    """Makes a fresh client (and so a fresh gateway session) for the test's transport."""
    return stdio_client if transport == "stdio" else http_client
