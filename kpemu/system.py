"""The system parts kpemu needs (Debian packages, a guest kernel) and how to get them, worded for how
kpemu was installed (a checkout with `make setup`, pip in a virtualenv, pipx, or system-wide).

Standard library only: scripts/setup.sh runs `python3 kpemu/system.py` for the package list before
any virtualenv exists, so this list is the only one.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

# The Debian packages of each part kpemu can use. `kpemu setup` installs the core, and the other parts
# when asked (--with PART, --all); `make setup` installs every part, which the test suite uses.
PARTS: dict[str, tuple[str, ...]] = {
    "core": ("iproute2", "iptables", "ipset", "ipvsadm", "tcpdump", "conntrack", "ethtool", "nftables", "nfacct",
             "kmod", "procps", "util-linux", "python3-venv", "file",
             "curl", "iputils-ping", "netcat-openbsd"),  # what a deployed lab is poked with (kpemu exec)
    "drops": ("bpftrace",),  # the kernel's drop reasons per packet (kernel/drops.py; tracefs does without)
    "guest": ("qemu-system-x86", "busybox-static"),  # the guest runtime (and `kpemu vm setup`'s kernel)
    "wireshark": ("tshark",),  # the run's pcapng read back in the tests, tshark in the reports' commands
    "browser": (),  # report.html rendered in a real browser (the tests): see BROWSER_DEBS
    "docker": (),  # container members: docker.io where no engine is installed (see `packages`)
}
OPTIONAL = tuple(p for p in PARTS if p != "core")
# The browser: Debian packages Chromium; on Ubuntu `chromium` is a snap stub apt cannot install, and
# GitHub's Ubuntu runners ship Google Chrome instead.
BROWSER_DEBS = {"debian": ("chromium",), "ubuntu": ()}


def distribution(os_release: str | None = None) -> str:
    """ID of /etc/os-release (ubuntu, debian, ...); derivatives map to what they derive from."""
    if os_release is None:
        try:
            os_release = Path("/etc/os-release").read_text()
        except OSError:
            return "debian"
    fields = dict(line.split("=", 1) for line in os_release.splitlines() if "=" in line)
    ids = [fields.get("ID", "").strip('"'), *fields.get("ID_LIKE", "").strip('"').split()]
    return next((i for i in ids if i in BROWSER_DEBS), "debian")


def packages(distro: str | None = None, parts: tuple[str, ...] = tuple(PARTS)) -> tuple[str, ...]:
    """The packages of `parts` (default: every part, as `make setup` installs) on this distribution (or
    on `distro`); docker.io (a dockerd for container members) only where no docker engine is installed
    already (docker-ce, moby)."""
    extra = {"browser": BROWSER_DEBS[distro or distribution()],
             "docker": () if shutil.which("dockerd") else ("docker.io",)}
    return tuple(p for part in parts for p in PARTS[part] + extra.get(part, ()))


def parts_asked(with_: str | None, everything: bool) -> tuple[str, ...]:
    """The parts `kpemu setup --with A,B` (or `--all`) means: the core and those; ValueError naming an
    unknown one."""
    if everything:
        return tuple(PARTS)
    asked = [p.strip() for p in (with_ or "").split(",") if p.strip()]
    unknown = [p for p in asked if p not in OPTIONAL]
    if unknown:
        raise ValueError(f"no part {unknown[0]!r}; the parts are {', '.join(OPTIONAL)}")
    return ("core", *dict.fromkeys(asked))
# wireshark-common asks whether non-root users may capture: no (kpemu captures with tcpdump, as root)
DEBCONF = "wireshark-common wireshark-common/install-setuid boolean false"


def checkout() -> Path | None:
    """The source checkout kpemu runs from (it has a Makefile and scripts/setup.sh), or None."""
    root = Path(__file__).resolve().parent.parent
    return root if (root / "Makefile").is_file() and (root / "scripts" / "setup.sh").is_file() else None


def how_installed() -> str:
    """checkout | pipx | venv | system."""
    if checkout() is not None:
        return "checkout"
    if "pipx" in Path(sys.prefix).parts:
        return "pipx"
    return "venv" if sys.prefix != sys.base_prefix else "system"


def kpemu_command() -> str:
    """How to call this kpemu as root: sudo's PATH often lacks a virtualenv's bin directory."""
    exe = shutil.which("kpemu")
    if exe and Path(exe).resolve().parent == Path(sys.executable).resolve().parent:
        return exe if how_installed() in ("venv", "pipx") else "kpemu"
    return f"{sys.executable} -m kpemu.cli"


def setup_hint(what: str = "") -> str:
    """The command that installs the system parts, for this installation."""
    if how_installed() == "checkout":
        return f"make setup{f' ({what})' if what else ''}"
    return f"sudo {kpemu_command()} setup{f' ({what})' if what else ''}"


def python_hint(package: str) -> str:
    """How to add a Python package kpemu can use, for this installation."""
    return {"checkout": "make setup", "pipx": f"pipx inject kpemu {package}",
            "venv": f"{Path(sys.executable).parent / 'pip'} install '{package}'",
            "system": f"pip install '{package}'"}[how_installed()]


def missing_packages(parts: tuple[str, ...] = tuple(PARTS)) -> list[str]:
    """The packages of `parts` that are not installed (all of them when dpkg is absent)."""
    missing = []
    for p in packages(parts=parts):
        res = subprocess.run(["dpkg-query", "-W", "-f=${Status}", p], capture_output=True, text=True, check=False) \
            if shutil.which("dpkg-query") else None
        if res is None or "install ok installed" not in res.stdout:
            missing.append(p)
    return missing


def have_apt() -> bool:
    """Whether this system installs packages with apt-get (Debian, Ubuntu)."""
    return shutil.which("apt-get") is not None and shutil.which("dpkg-query") is not None


def install_packages(packages: list[str]) -> None:
    """apt-get install them, non-interactively (root)."""
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    subprocess.run(["debconf-set-selections"], input=DEBCONF + "\n", text=True, check=True, env=env)
    subprocess.run(["apt-get", "update", "-qq"], check=True, env=env)
    subprocess.run(["apt-get", "install", "-y", "-qq", "--no-install-recommends", *packages], check=True, env=env)


if __name__ == "__main__":  # scripts/setup.sh: every part's packages one a line, or the debconf answer
    print(DEBCONF if sys.argv[1:] == ["debconf"] else "\n".join(packages(*sys.argv[1:2])))
