#!/usr/bin/env python3
"""Splits a root file system tarball into a three-layer OCI image layout, for
`forge bench image`: layer 1 holds /usr, layer 2 /etc and /var, layer 3 the rest.

    mmdebstrap --variant=essential bookworm rootfs.tar
    scripts/layered-image.py rootfs.tar layout/ bench
    skopeo copy --dest-tls-verify=false oci:layout:bench docker://127.0.0.1:5000/bench/debian:3layers
    forge image pull 127.0.0.1:5000/bench/debian:3layers
    forge bench image --image 127.0.0.1:5000/bench/debian:3layers
"""

import gzip
import hashlib
import io
import json
import os
import sys
import tarfile


def layer_of(name: str) -> int:
    top = name.lstrip("./").split("/", 1)[0]
    if top == "usr":
        return 0
    if top in ("etc", "var"):
        return 1
    return 2


def main(rootfs: str, out: str, tag: str) -> None:
    buffers = [io.BytesIO() for _ in range(3)]
    writers = [tarfile.open(fileobj=b, mode="w", format=tarfile.PAX_FORMAT) for b in buffers]
    with tarfile.open(rootfs) as source:
        for member in source:
            if member.isdev():
                continue
            data = source.extractfile(member) if member.isfile() else None
            writers[layer_of(member.name)].addfile(member, data)
    for w in writers:
        w.close()
    blobs = os.path.join(out, "blobs", "sha256")
    os.makedirs(blobs, exist_ok=True)

    def put(data: bytes) -> str:
        digest = hashlib.sha256(data).hexdigest()
        with open(os.path.join(blobs, digest), "wb") as f:
            f.write(data)
        return "sha256:" + digest

    layers, diff_ids = [], []
    for b in buffers:
        raw = b.getvalue()
        diff_ids.append("sha256:" + hashlib.sha256(raw).hexdigest())
        gz = gzip.compress(raw, compresslevel=1)
        layers.append({"mediaType": "application/vnd.oci.image.layer.v1.tar+gzip", "digest": put(gz), "size": len(gz)})
    config = json.dumps({
        "architecture": "amd64", "os": "linux",
        "config": {"Env": ["PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"], "Cmd": ["/bin/sh"]},
        "rootfs": {"type": "layers", "diff_ids": diff_ids},
    }).encode()
    manifest = json.dumps({
        "schemaVersion": 2, "mediaType": "application/vnd.oci.image.manifest.v1+json",
        "config": {"mediaType": "application/vnd.oci.image.config.v1+json", "digest": put(config), "size": len(config)},
        "layers": layers,
    }).encode()
    index = {"schemaVersion": 2, "manifests": [{
        "mediaType": "application/vnd.oci.image.manifest.v1+json", "digest": put(manifest), "size": len(manifest),
        "annotations": {"org.opencontainers.image.ref.name": tag},
    }]}
    with open(os.path.join(out, "index.json"), "w") as f:
        json.dump(index, f)
    with open(os.path.join(out, "oci-layout"), "w") as f:
        f.write('{"imageLayoutVersion":"1.0.0"}')


if __name__ == "__main__":
    main(*sys.argv[1:4])
