"""Containers as lab members: start one with no docker network, bind its network namespace to
/run/netns/kp-<lab>-<member> (so the rest of kpemu sees a named namespace, as for a bare member),
and remove a lab's containers by label (so a killed run leaves nothing `destroy --all` cannot find).
"""

from __future__ import annotations

import ctypes
import os
import time
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING

from kpemu.docker.image import ensure_image
from kpemu.errors import ApplyError, EnvironmentProblem
from kpemu.kernel.netns import RUN_DIR
from kpemu.model.names import netns_name

if TYPE_CHECKING:
    import docker

    from kpemu.model.topology import Container

LABEL_LAB = "kpemu.lab"
LABEL_MEMBER = "kpemu.member"
MS_BIND = 4096
START_TIMEOUT = 20.0
PARALLEL = 4  # containers started at once


def start_members(lab: str, specs: dict[str, dict]) -> None:
    """Start the lab's container members ({member: {ns, image, command, env}}) and bind each one's
    network namespace under its lab name (the "containers" step of a lab's job)."""
    from types import SimpleNamespace

    from kpemu.docker.engine import connect

    client = connect(start=True)
    assert client is not None
    starter = ContainerStarter(client, lab, {m: SimpleNamespace(**spec) for m, spec in specs.items()})  # type: ignore[misc]
    for member, spec in specs.items():
        starter.bind(member, spec["ns"])


class ContainerStarter:
    """Starts every container member of a lab together (on the first request, in parallel: each
    `docker run` mostly waits on the engine) and binds each one's namespace when deploy reaches it,
    so namespaces still appear in plan order. A failure raises from the first request; deploy's
    rollback then removes the lab's containers by label."""

    def __init__(self, client: docker.DockerClient, lab: str, containers: dict[str, Container]) -> None:
        self.client, self.lab, self.containers = client, lab, containers
        self._pids: dict[str, int] | None = None

    def bind(self, member: str, netns: str) -> None:
        """Bind the member's container namespace as `netns` (starting every container first)."""
        if self._pids is None:
            self._pids = self._start_all()
        bind_netns(self._pids[member], netns)

    def _start_all(self) -> dict[str, int]:
        for image in sorted({spec.image for spec in self.containers.values() if spec.image}):
            ensure_image(self.client, image)
        with ThreadPoolExecutor(max_workers=PARALLEL) as pool:
            futures = {m: pool.submit(run_container, self.client, self.lab, m, spec)
                       for m, spec in self.containers.items()}
        return {m: f.result() for m, f in futures.items()}


def run_container(client: docker.DockerClient, lab: str, member: str, spec: Container) -> int:
    """Run the member's container (named like its namespace, no docker network); its init's pid."""
    from docker.errors import DockerException

    assert spec.image is not None
    name = netns_name(lab, member)
    try:
        c = client.containers.run(
            spec.image, command=spec.command, environment=dict(spec.env), name=name, hostname=member,
            labels={LABEL_LAB: lab, LABEL_MEMBER: member}, network_mode="none", detach=True,
        )
        return _wait_pid(c)
    except DockerException as e:
        raise ApplyError(f"{name}: container from {spec.image} did not start: {e}") from None


def _wait_pid(c: docker.models.containers.Container) -> int:
    deadline = time.monotonic() + START_TIMEOUT
    while True:
        c.reload()
        state = c.attrs["State"]
        if state.get("Running") and state.get("Pid"):
            return int(state["Pid"])
        if state.get("Status") in ("exited", "dead") or time.monotonic() > deadline:
            logs = c.logs(tail=5).decode(errors="replace").strip()
            raise ApplyError(f"{c.name}: the container is {state.get('Status')} (exit {state.get('ExitCode')})"
                             + (f": {logs}" if logs else "") + "; a member's container must keep running: give "
                             "it a command: that does, e.g. [sleep, \"3600\"] for a client")
        time.sleep(0.02)


def bind_netns(pid: int, name: str) -> None:
    """Bind-mount /proc/PID/ns/net on /run/netns/NAME, as `ip netns attach` does."""
    RUN_DIR.mkdir(parents=True, exist_ok=True)
    target = RUN_DIR / name
    if target.exists():
        raise FileExistsError(f"network namespace {name} already exists")
    target.touch(mode=0o444)
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.mount(f"/proc/{pid}/ns/net".encode(), str(target).encode(), None, MS_BIND, None) != 0:
        err = ctypes.get_errno()
        target.unlink(missing_ok=True)
        raise ApplyError(f"{name}: cannot bind the container's network namespace: {os.strerror(err)}")


def remove_containers(lab: str | None = None) -> list[str]:
    """Remove (force) every container labelled `kpemu.lab` (= `lab` when given) on the engine kpemu
    uses; then stop kpemu's own dockerd when it holds no container any more. Returns the names."""
    from kpemu.docker.daemon import PrivateDockerd
    from kpemu.docker.engine import connect

    try:
        client = connect(start=False)
    except EnvironmentProblem:  # no SDK: kpemu cannot have created containers
        return []
    if client is None:
        return []
    from docker.errors import DockerException, NotFound

    removed: list[str] = []
    try:
        label = f"{LABEL_LAB}={lab}" if lab else LABEL_LAB
        for c in client.containers.list(all=True, filters={"label": label}):
            try:
                c.remove(force=True)
                removed.append(c.name)
            except NotFound:
                pass
        own = PrivateDockerd()
        if own.running() and not client.containers.list(all=True):
            client.close()
            own.stop()
    except DockerException as e:
        raise EnvironmentProblem(f"cannot remove kpemu's containers: {e}", "check the docker engine") from None
    return removed


def exec_argv(netns: str, cmd: list[str], tty: bool) -> list[str]:
    """`docker exec` of `cmd` in the member's container, on the engine kpemu uses."""
    from kpemu.docker.engine import cli_prefix

    return [*cli_prefix(), "exec", *(["-it"] if tty else ["-i"]), netns, *cmd]

