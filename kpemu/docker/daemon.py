"""kpemu's own dockerd, for machines where no docker daemon is reachable (and for the tests).

It never touches the host's network: its own --data-root, --exec-root, pidfile and unix socket
under one state directory, no bridge (no docker0), no iptables/ip6tables rules, no ip_forward or
masquerade changes. Containers of kpemu get `network_mode: none`, so the daemon needs no network
of its own. It runs in its own session, so a killed `kpemu run` leaves it for `destroy` to stop.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import time
from pathlib import Path

from kpemu.errors import EnvironmentProblem
from kpemu.kernel import runowner

STATE_DIR = Path(os.environ.get("KPEMU_DOCKERD_DIR", "/run/kpemu/dockerd"))
OWNER = "dockerd"  # the owner token it carries: a service shared by labs, stopped by destroy --all, not a helper
# Flags that keep dockerd off the host's network configuration entirely.
HOST_UNTOUCHED = ["--bridge=none", "--iptables=false", "--ip6tables=false", "--ip-forward=false",
                  "--ip-masq=false"]
START_TIMEOUT = 30.0


class PrivateDockerd:
    """One dockerd whose every file lives under `root`."""

    def __init__(self, root: Path | None = None) -> None:
        self.root = root or STATE_DIR
        self.socket = self.root / "docker.sock"
        self.pidfile = self.root / "dockerd.pid"
        self.log = self.root / "dockerd.log"

    @property
    def url(self) -> str:
        return f"unix://{self.socket}"

    def argv(self) -> list[str]:
        """The dockerd command line."""
        return ["dockerd", "--data-root", str(self.root / "data"), "--exec-root", str(self.root / "exec"),
                "--pidfile", str(self.pidfile), "--host", self.url, *HOST_UNTOUCHED]

    def pid(self) -> int | None:
        """The daemon's pid while it runs, else None."""
        try:
            pid = int(self.pidfile.read_text().strip())
            os.kill(pid, 0)
        except (OSError, ValueError):
            return None
        return pid

    def running(self) -> bool:
        return self.pid() is not None and self.socket.exists()

    def start(self, timeout: float = START_TIMEOUT) -> None:
        """Start it (no-op when it runs) and wait until its API answers."""
        if self.running():
            return
        if os.geteuid() != 0:
            raise EnvironmentProblem("starting kpemu's own dockerd needs root", "run as root, e.g. sudo kpemu ...")
        if shutil.which("dockerd") is None:
            raise EnvironmentProblem("docker members need a docker engine: none is reachable and dockerd is not "
                                     "installed", "make setup (installs Debian's docker.io), or start docker")
        self.root.mkdir(parents=True, exist_ok=True)
        with open(self.log, "ab") as log:
            proc = subprocess.Popen(self.argv(), stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                    start_new_session=True, env={**os.environ, runowner.ENV: OWNER})
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if proc.poll() is not None:
                raise EnvironmentProblem(f"kpemu's dockerd exited ({proc.returncode}) while starting: "
                                         f"{_tail(self.log)}", f"see {self.log}")
            if self.socket.exists() and pings(self.url):
                return
            time.sleep(0.1)
        self.stop()
        raise EnvironmentProblem(f"kpemu's dockerd did not answer within {timeout:.0f}s", f"see {self.log}")

    def stop(self, timeout: float = 20.0) -> bool:
        """SIGTERM the daemon (its managed containerd goes with it); SIGKILL after `timeout`. False if
        it was not running."""
        pid = self.pid()
        if pid is None:
            return False
        for sig, wait in ((signal.SIGTERM, timeout), (signal.SIGKILL, 5.0)):
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, sig)
            deadline = time.monotonic() + wait
            while time.monotonic() < deadline and Path(f"/proc/{pid}").exists() and not _zombie(pid):
                time.sleep(0.05)
            if not Path(f"/proc/{pid}").exists() or _zombie(pid):
                break
        with contextlib.suppress(ChildProcessError):  # reap it when this process started it
            os.waitpid(pid, os.WNOHANG)
        self.pidfile.unlink(missing_ok=True)
        self.socket.unlink(missing_ok=True)
        return True


def _zombie(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] == "Z"
    except (OSError, IndexError):
        return True


def _tail(path: Path, n: int = 3) -> str:
    try:
        return " | ".join(path.read_text(errors="replace").strip().splitlines()[-n:])
    except OSError:
        return ""


def pings(url: str | None) -> bool:
    """Whether a docker API answers at `url` (None: the environment's default, DOCKER_HOST or the socket)."""
    try:
        import docker
    except ImportError:
        return False
    try:
        c = docker.DockerClient(base_url=url, timeout=3) if url else docker.from_env(timeout=3)
        try:
            return bool(c.ping())
        finally:
            c.close()
    except Exception:  # any failure to reach it means "not reachable"
        return False
