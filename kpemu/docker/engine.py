"""Which docker engine kpemu talks to, through the docker SDK for Python.

kpemu's own dockerd when it runs (started by an earlier deploy); else the environment's engine
(DOCKER_HOST or the default socket) when it answers; else, only when asked to, kpemu starts its own.
The same order on every call, so deploy, traffic, exec and destroy all reach the same engine.
"""

from __future__ import annotations

import os
import shutil
from types import ModuleType
from typing import TYPE_CHECKING

from kpemu.docker.daemon import PrivateDockerd, pings
from kpemu.errors import EnvironmentProblem

if TYPE_CHECKING:
    import docker

SDK_FIX = "make setup (installs the docker SDK for Python), or pip install 'kpemu[docker]'"


def sdk() -> ModuleType:
    """The `docker` module, or EnvironmentProblem naming the fix."""
    try:
        import docker
    except ImportError:
        raise EnvironmentProblem("docker members need the docker SDK for Python, which is not installed",
                                 SDK_FIX) from None
    return docker


def engine_url(start: bool = False) -> str | None:
    """The base URL of the engine to use: kpemu's dockerd (its unix socket) or "" for the
    environment's default; None when none answers and `start` is False."""
    own = PrivateDockerd()
    if own.running():
        return own.url
    if pings(None):
        return ""
    if not start:
        return None
    own.start()
    return own.url


def connect(start: bool = False) -> docker.DockerClient | None:
    """An SDK client for `engine_url(start)`, or None when there is no engine (and start is False)."""
    docker = sdk()
    url = engine_url(start)
    if url is None:
        return None
    return docker.DockerClient(base_url=url, timeout=60) if url else docker.from_env(timeout=60)


def cli_prefix() -> list[str]:
    """`docker` with the same engine as `connect` (for `kpemu exec`'s interactive docker exec)."""
    url = engine_url()
    return ["docker", "-H", url] if url else ["docker"]


def why_unavailable() -> str | None:
    """None when docker members can run here, else the reason (for `kpemu doctor` and runs)."""
    try:
        sdk()
    except EnvironmentProblem as e:
        return e.reason
    if engine_url() is not None:
        return None
    if shutil.which("dockerd") is None:
        return "no docker engine answers and dockerd is not installed"
    if os.geteuid() != 0:
        return "no docker engine answers, and starting kpemu's own dockerd needs root"
    return None


HOST_ONLY = "docker members need the host runtime"
HOST_ONLY_FIX = "run the IPVS half natively (a kernel with IPVS) or drop `image:`"


def blocker(has_containers: bool, guest_kernel: bool) -> tuple[str, str] | None:
    """Why a lab with container members cannot run where its runtime puts it (`guest_kernel`: in kpemu's
    guest, as the runtime says), with the fix; None if it can."""
    if not has_containers:
        return None
    if guest_kernel:
        return f"{HOST_ONLY}, and this one needs the guest kernel", HOST_ONLY_FIX
    why = why_unavailable()
    if why:
        return f"docker members cannot run here: {why}", "make setup (docker.io and the docker SDK), run as root"
    return None


def status() -> tuple[bool, str]:
    """(usable, detail) for `kpemu doctor`: which engine docker members would use, or why none."""
    why = why_unavailable()
    if why:
        return False, why
    url = engine_url()
    if url is None:
        where = "none runs: kpemu starts its own dockerd (no bridge, no iptables) while a lab needs it"
    else:
        where = f"kpemu's own dockerd at {url}" if url else "the running docker engine (DOCKER_HOST or its socket)"
    return True, f"{where}; {HOST_ONLY} (not the guest kernel)"
