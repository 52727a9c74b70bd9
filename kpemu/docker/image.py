"""The test image, built without a registry: `docker import` of a tiny root filesystem made from
Debian's busybox-static. Its /serve writes a page naming the container's hostname (kpemu sets
it to the member name) and runs busybox httpd; wget and nc act as clients."""

from __future__ import annotations

import hashlib
import io
import shutil
import tarfile
from pathlib import Path
from typing import TYPE_CHECKING

from kpemu.errors import EnvironmentProblem

if TYPE_CHECKING:
    import docker

LOCAL_IMAGE = "kpemu/busybox:local"
DIGEST_LABEL = "kpemu.rootfs"
BUSYBOX_FIX = "make setup (installs Debian's busybox-static)"
APPLETS = ("sh", "httpd", "wget", "nc", "hostname", "echo", "cat", "sleep", "ls", "ip", "mkdir", "ps", "true",
           "timeout")
SERVE = """#!/bin/sh
# The page names this container (its hostname is the kpemu member name).
mkdir -p /www
echo "kpemu pod $(hostname)" > /www/index.html
exec httpd -f -p "${PORT:-80}" -h /www
"""


def busybox_path() -> Path:
    """A statically linked busybox (Debian's busybox-static installs /bin/busybox)."""
    for p in ("/bin/busybox", "/usr/bin/busybox"):
        if Path(p).is_file():
            return Path(p)
    found = shutil.which("busybox")
    if found is None:
        raise EnvironmentProblem("the local test image needs a static busybox, and none is installed", BUSYBOX_FIX)
    return Path(found)


def rootfs_tar(busybox: Path | None = None) -> bytes:
    """The image's root filesystem as a tar: /bin/busybox, applet links, /serve, /tmp."""
    busybox = busybox or busybox_path()
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tar:
        for d in ("bin", "tmp", "www", "etc"):
            info = tarfile.TarInfo(d)
            info.type, info.mode = tarfile.DIRTYPE, 0o1777 if d == "tmp" else 0o755
            tar.addfile(info)
        tar.add(str(busybox), arcname="bin/busybox")
        for applet in APPLETS:
            info = tarfile.TarInfo(f"bin/{applet}")
            info.type, info.linkname = tarfile.SYMTYPE, "busybox"
            tar.addfile(info)
        for name, text, mode in (("serve", SERVE, 0o755), ("etc/passwd", "root:x:0:0:root:/:/bin/sh\n", 0o644)):
            data = text.encode()
            info = tarfile.TarInfo(name)
            info.size, info.mode = len(data), mode
            tar.addfile(info, io.BytesIO(data))
    return buf.getvalue()


def build_local_image(client: docker.DockerClient, tag: str = LOCAL_IMAGE) -> str:
    """`docker import` the busybox root filesystem as `tag` (CMD /serve), labelled with the digest of
    its content so a changed recipe (or busybox) rebuilds it; a no-op when it is current."""
    from docker.errors import ImageNotFound

    data = rootfs_tar()
    digest = hashlib.sha256(data).hexdigest()[:16]
    try:
        if (client.images.get(tag).labels or {}).get(DIGEST_LABEL) == digest:
            return tag
    except ImageNotFound:
        pass
    repo, _, version = tag.rpartition(":")
    client.api.import_image_from_data(data, repository=repo, tag=version,
                                      changes=['CMD ["/serve"]', f"LABEL {DIGEST_LABEL}={digest}"])
    return tag


def ensure_image(client: docker.DockerClient, image: str) -> None:
    """Make `image` present on the engine: the local test image is built, any other is pulled."""
    from docker.errors import DockerException, ImageNotFound

    if image == LOCAL_IMAGE:
        build_local_image(client)
        return
    try:
        client.images.get(image)
        return
    except ImageNotFound:
        pass
    try:
        client.images.pull(image)
    except DockerException as e:
        raise EnvironmentProblem(
            f"image {image} is not on the docker engine and cannot be pulled: {e}",
            f"docker pull {image} (or docker load it) first; where no registry is reachable use "
            f"image: {LOCAL_IMAGE}, which kpemu builds from busybox-static",
        ) from None
