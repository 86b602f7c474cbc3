"""Images through ForgeVM's SDK: its default image (alpine:latest) pulled through a
registry mirror, snapshots, forks and a template whose setup runs once into a shared layer.

These need a server whose [images] config mirrors docker.io to a registry holding
library/alpine:latest (`cargo nextest run -p forge-cli sdk` sets that up and sets
FORGE_IMAGES_MIRROR); without it they are skipped.
"""

from __future__ import annotations

import os

import pytest

from conftest import SANDBOX_TTL, assert_sandbox_json, unique

pytestmark = pytest.mark.skipif(
    not os.environ.get("FORGE_IMAGES_MIRROR"),
    reason="needs a server with a docker.io mirror holding library/alpine:latest",
)


def test_the_sdks_default_image_is_pulled_and_runs(client, cleanup):
    sb = client.spawn(ttl=SANDBOX_TTL)  # the SDK sends image "alpine:latest"
    cleanup.append(sb.id)
    assert sb.image == "alpine:latest", f"image {sb.image!r}"
    result = sb.exec("cat /etc/alpine-release")
    assert (result.exit_code, result.stdout) == (0, "3.20.0\n"), f"{result!r}"
    # The image's own environment reaches commands; its root file system is writable.
    result = sb.exec("sh", args=["-c", "echo $FROM_IMAGE; echo hi > /etc/motd && cat /etc/motd"])
    assert (result.exit_code, result.stdout) == (0, "yes\nhi\n"), f"{result!r}"
    sb.write_file("/workspace/a.txt", "from the sdk")
    assert sb.read_file("/workspace/a.txt") == "from the sdk"


def test_a_snapshot_is_listed_and_spawnable(client, http, cleanup):
    sb = client.spawn(ttl=SANDBOX_TTL)
    cleanup.append(sb.id)
    sb.write_file("/workspace/state.txt", "saved")
    name = f"{unique('sdk-snap')}:1"
    resp = http.post(f"/api/v1/sandboxes/{sb.id}/snapshot", json={"name": name})
    assert resp.status_code == 201, resp.text
    image = resp.json()
    assert (image["name"], image["source"], image["parent"]) == (name, "snapshot", "alpine:latest")
    listed = http.get("/api/v1/snapshots").json()
    assert {"image": name, "provider": "jail"}.items() <= next(
        s for s in listed if s["image"] == name
    ).items(), f"{listed!r}"
    copy = client.spawn(image=name, ttl=SANDBOX_TTL)
    cleanup.append(copy.id)
    assert copy.read_file("/workspace/state.txt") == "saved"


def test_a_fork_shares_the_past_but_not_the_future(client, http, cleanup):
    sb = client.spawn(ttl=SANDBOX_TTL)
    cleanup.append(sb.id)
    sb.write_file("/workspace/shared.txt", "before")
    resp = http.post(f"/api/v1/sandboxes/{sb.id}/fork", json={})
    assert resp.status_code == 201, resp.text
    data = resp.json()
    assert_sandbox_json(data, image=data["image"])
    assert data["metadata"]["forked_from"] == sb.id
    cleanup.append(data["id"])
    fork = client.get(data["id"])
    assert fork.read_file("/workspace/shared.txt") == "before"
    fork.write_file("/workspace/shared.txt", "fork")
    sb.write_file("/workspace/original.txt", "original")
    assert sb.read_file("/workspace/shared.txt") == "before"
    assert fork.exec("test -e /workspace/original.txt").exit_code != 0


def test_a_templates_setup_runs_once_into_a_shared_layer(client, http, cleanup):
    name = unique("sdk-setup")
    resp = http.post(
        "/api/v1/templates",
        json={
            "name": name,
            "image": "alpine:latest",
            "setup": ["head -c 8 /dev/urandom | od -An -tx1 > /etc/built-once", "mkdir -p /opt/tool"],
        },
    )
    assert resp.status_code == 201, resp.text
    try:
        first = client.spawn_template(name)
        cleanup.append(first.id)
        second = client.spawn_template(name)
        cleanup.append(second.id)
        a = first.read_file("/etc/built-once")
        b = second.read_file("/etc/built-once")
        assert a and a == b, f"setup ran per sandbox: {a!r} != {b!r}"
        assert first.exec("test -d /opt/tool").exit_code == 0
        images = http.get("/api/v1/images").json()
        built = [i for i in images if i["source"] == "template" and i["origin"] == name]
        assert len(built) == 1 and first.image == built[0]["name"], f"{images!r}"
    finally:
        http.delete(f"/api/v1/templates/{name}")
