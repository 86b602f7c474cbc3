"""Fixtures for the ForgeVM SDK acceptance suite.

The suite drives a live `forge serve` through ForgeVM's published Python SDK
(`forgevm` 0.1.2) and, where the SDK does not expose something, through raw httpx.

Environment:
    FORGE_URL      base URL of the server (default http://127.0.0.1:7423)
    FORGE_API_KEY  API key sent as X-API-Key (optional; enables the auth tests)

Run:
    pip install -r crates/cli/tests/sdk/requirements.txt
    FORGE_URL=http://127.0.0.1:7423 pytest crates/cli/tests/sdk

Most tests spawn on image "host" (the base Forge assembles from the host, which needs no
download); test_forgevm_images.py uses the SDK's own default, alpine:latest, through a
registry mirror.
"""

from __future__ import annotations

import os
import re
import uuid
from datetime import datetime, timezone

import httpx
import pytest
import pytest_asyncio

import forgevm
from forgevm.models import Template
from forgevm.templates import TemplateManager

FORGE_URL = os.environ.get("FORGE_URL", "http://127.0.0.1:7423").rstrip("/")
FORGE_API_KEY = os.environ.get("FORGE_API_KEY") or None

IMAGE = "host"
# Long enough that nothing expires during a run, short enough that a crashed run cleans up.
SANDBOX_TTL = "10m"
# Per-request timeout of the SDK clients and raw httpx clients (seconds).
HTTP_TIMEOUT = 30.0

SANDBOX_ID_RE = re.compile(r"^sb-[0-9a-f]{8}$")
GO_DURATION_RE = re.compile(r"^-?(?:0|(?:\d+(?:\.\d+)?(?:ns|us|µs|μs|ms|s|m|h))+)$")


# --------------------------------------------------------------------------------------
# helpers (imported by the test modules: `from conftest import ...`)
# --------------------------------------------------------------------------------------


def auth_headers() -> dict[str, str]:
    """Headers the SDK itself would send: X-API-Key when a key is configured."""
    return {"X-API-Key": FORGE_API_KEY} if FORGE_API_KEY else {}


def raw_client(**kwargs) -> httpx.Client:
    """A plain httpx client on the server, with the API key if one is configured."""
    headers = auth_headers()
    headers.update(kwargs.pop("headers", {}))
    kwargs.setdefault("timeout", HTTP_TIMEOUT)
    return httpx.Client(base_url=FORGE_URL, headers=headers, **kwargs)


def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:10]}"


def parse_time(value: str) -> datetime:
    """Parse an RFC 3339 timestamp with up to nanosecond precision (Go's RFC3339Nano)."""
    assert isinstance(value, str) and value, f"expected a non-empty RFC 3339 timestamp, got {value!r}"
    m = re.match(
        r"^(\d{4}-\d{2}-\d{2})[Tt ](\d{2}:\d{2}:\d{2})(?:\.(\d+))?([Zz]|[+-]\d{2}:\d{2})$", value
    )
    assert m, f"not an RFC 3339 timestamp: {value!r}"
    date, time_, frac, tz = m.groups()
    frac = (frac or "0")[:6].ljust(6, "0")
    tz = "+00:00" if tz in ("Z", "z") else tz
    return datetime.fromisoformat(f"{date}T{time_}.{frac}{tz}").astimezone(timezone.utc)


def permission_bits(mode) -> int:
    """Permission bits of a FileInfo `mode`, whatever notation the server chose.

    Accepts Go `%o` of a FileMode ("755", "20000000755"), a zero-padded octal string
    ("0755", "100755"), a symbolic string ("-rwxr-xr-x", "drwxr-xr-x") or an int.
    """
    if isinstance(mode, int):
        return mode & 0o777
    assert isinstance(mode, str) and mode, f"expected a non-empty mode, got {mode!r}"
    if re.fullmatch(r"[0-7]+", mode):
        return int(mode, 8) & 0o777
    sym = mode[-9:]
    assert re.fullmatch(r"[r-][w-][xsS-][r-][w-][xsS-][r-][w-][xtT-]", sym), (
        f"mode {mode!r} is neither octal nor symbolic"
    )
    bits = 0
    for i, ch in enumerate(sym):
        if ch not in "-ST":
            bits |= 1 << (8 - i)
    return bits


def basename(path: str) -> str:
    return path.rstrip("/").rsplit("/", 1)[-1]


def sse_events(lines):
    """Group SSE lines into events: yields dicts with 'id', 'event', 'data' (joined)."""
    event: dict[str, list[str] | str | None] = {"id": None, "event": None, "data": []}
    for line in lines:
        if line == "":
            if event["data"] or event["id"] is not None or event["event"] is not None:
                yield {"id": event["id"], "event": event["event"], "data": "\n".join(event["data"])}
            event = {"id": None, "event": None, "data": []}
            continue
        if line.startswith(":"):
            continue  # comment / keep-alive
        field, _, value = line.partition(":")
        if value.startswith(" "):
            value = value[1:]
        if field == "data":
            event["data"].append(value)
        elif field in ("id", "event"):
            event[field] = value


def assert_sandbox_json(data: dict, *, image: str = IMAGE) -> None:
    """The Sandbox object of the contract (§2): exact key names and types."""
    assert isinstance(data, dict), f"sandbox body is not an object: {data!r}"
    for key in ("id", "state", "provider", "image", "memory_mb", "vcpus", "created_at", "expires_at"):
        assert key in data, f"sandbox JSON lacks {key!r}: {data!r}"
    assert SANDBOX_ID_RE.match(data["id"]), f"sandbox id {data['id']!r} is not 'sb-' + 8 lowercase hex"
    assert data["state"] == "running", f"sandbox state is {data['state']!r}, expected 'running'"
    assert isinstance(data["provider"], str) and data["provider"], f"empty provider in {data!r}"
    assert data["image"] == image, f"image is {data['image']!r}, expected {image!r}"
    assert isinstance(data["memory_mb"], int) and data["memory_mb"] > 0, f"bad memory_mb in {data!r}"
    assert isinstance(data["vcpus"], int) and data["vcpus"] > 0, f"bad vcpus in {data!r}"
    created = parse_time(data["created_at"])
    expires = parse_time(data["expires_at"])
    assert expires > created, f"expires_at {data['expires_at']} is not after created_at {data['created_at']}"
    if "metadata" in data:
        assert isinstance(data["metadata"], dict), f"metadata is not an object: {data!r}"


# --------------------------------------------------------------------------------------
# fixtures
# --------------------------------------------------------------------------------------


@pytest.fixture(scope="session", autouse=True)
def _server_reachable():
    """Fail the whole run at once, with one clear message, when no server answers."""
    try:
        with raw_client(timeout=5.0) as http:
            resp = http.get("/api/v1/health")
    except httpx.HTTPError as e:
        pytest.exit(f"no Forge server reachable at FORGE_URL={FORGE_URL}: {e!r}", returncode=2)
    if resp.status_code == 401:
        pytest.exit(
            f"server at {FORGE_URL} requires an API key: set FORGE_API_KEY (got 401 {resp.text!r})",
            returncode=2,
        )


@pytest.fixture
def http():
    """Raw httpx client (API key included when configured)."""
    with raw_client() as c:
        yield c


@pytest.fixture
def cleanup():
    """Collects sandbox ids; every one is destroyed (idempotent DELETE) at teardown."""
    ids: list[str] = []
    yield ids
    with raw_client() as c:
        for sid in ids:
            try:
                c.delete(f"/api/v1/sandboxes/{sid}")
            except httpx.HTTPError:
                pass


@pytest.fixture
def client():
    c = forgevm.Client(FORGE_URL, api_key=FORGE_API_KEY, timeout=HTTP_TIMEOUT)
    yield c
    c.close()


@pytest_asyncio.fixture
async def async_client():
    c = forgevm.AsyncClient(FORGE_URL, api_key=FORGE_API_KEY, timeout=HTTP_TIMEOUT)
    yield c
    await c.close()


@pytest.fixture
def sandbox(client, cleanup):
    """A running sandbox on image "host", destroyed at teardown."""
    sb = client.spawn(image=IMAGE, ttl=SANDBOX_TTL)
    cleanup.append(sb.id)
    yield sb
    try:
        sb.destroy()
    except Exception:
        pass


@pytest_asyncio.fixture
async def async_sandbox(async_client, cleanup):
    """A running sandbox spawned through AsyncClient, destroyed at teardown."""
    sb = await async_client.spawn(image=IMAGE, ttl=SANDBOX_TTL)
    cleanup.append(sb.id)
    yield sb
    try:
        await sb.destroy()
    except Exception:
        pass


@pytest.fixture
def template_manager():
    """The SDK's TemplateManager, built by hand as 0.1.2 requires (no client attribute)."""
    http_client = httpx.Client(base_url=FORGE_URL, headers=auth_headers(), timeout=HTTP_TIMEOUT)
    yield TemplateManager(http_client)
    http_client.close()


@pytest.fixture
def template(template_manager):
    """A template on image "host", created through TemplateManager.save; deleted at teardown."""
    name = unique("sdk-tpl")
    saved = template_manager.save(Template(name=name, image=IMAGE, memory_mb=256))
    yield saved
    try:
        template_manager.delete(name)
    except forgevm.ForgevmError:
        pass
