"""`kpemu setup --check`: every runtime kpemu would use, and whether what it needs is here.

`rows` is pure (facts in, rows out), so what is said for each combination is tested without the
machine; `facts` reads this machine. A part is needed when kpemu would use it here: the guest
runtime only where this kernel lacks what some scenario needs (or, unprobed without root, where
that cannot be known: then it is listed as needed).
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Facts:
    """What is on this machine, as far as the check needs it."""

    missing_packages: dict[str, tuple[str, ...]]  # part (kpemu.system.PARTS) -> its packages not installed
    guest_needed: bool | None  # None: not known (this kernel was not probed: no root)
    guest_why: str  # why the guest runtime is (or is not) needed
    virtme_ng: bool  # the Python package importable
    vng: bool  # its command on PATH
    qemu: bool
    guest_kernel: str | None  # the kernel a guest would boot, or None
    docker: str | None  # why docker members cannot run here, or None when they can
    asked: tuple[str, ...] = ("core",)  # the parts asked for (`--with`, `--all`): those must be here


@dataclass(frozen=True)
class Row:
    """One part of one runtime: present or not, needed or not, and the fix."""

    runtime: str
    part: str
    present: bool
    needed: bool
    detail: str
    fix: str = ""

    def line(self) -> str:
        mark = "ok     " if self.present else ("MISSING" if self.needed else "absent ")
        text = f"{mark} {self.runtime:<7} {self.part}: {self.detail}"
        return text + (f"\n          fix: {self.fix}" if self.fix and not self.present else "")


PART_USE = {"core": "namespaces, rules, captures", "drops": "drop reasons per packet",
            "guest": "the guest runtime", "wireshark": "tshark", "browser": "report.html in a browser (tests)",
            "docker": "container members"}


def _with(setup_hint: str, part: str) -> str:
    """The setup command for one part: `make setup` installs every part; `kpemu setup` takes --with."""
    if part == "core" or setup_hint.startswith("make "):
        return setup_hint
    return setup_hint.replace(" setup", f" setup --with {part}", 1)


def rows(f: Facts, setup_hint: str, python_hint: str) -> list[Row]:
    """Every part each runtime needs (host packages per part, guest, docker members), from the facts (pure).
    A part is needed when it was asked for; the guest also where this kernel needs it (or may: unprobed)."""
    out = []
    for part, missing in f.missing_packages.items():
        hint = _with(setup_hint, part)
        out.append(Row("host", f"{part} packages ({PART_USE.get(part, part)})", not missing, part in f.asked,
                       f"missing {' '.join(missing)}" if missing else "installed", hint))
    needed = f.guest_needed is not False or "guest" in f.asked
    why = f.guest_why
    out += [
        Row("guest", "virtme-ng (Python package)", f.virtme_ng, needed, why, python_hint),
        Row("guest", "vng command", f.vng, needed, why, python_hint),
        Row("guest", "qemu-system-x86_64", f.qemu, needed, why, setup_hint),
        Row("guest", "guest kernel", f.guest_kernel is not None, needed,
            f.guest_kernel or f"none in the cache or /boot; {why}", "kpemu vm setup (as root)"),
        Row("docker", "docker engine (container members)", f.docker is None, "docker" in f.asked,
            "usable" if f.docker is None else f.docker, _with(setup_hint, "docker")),
    ]
    return out


def exit_code(found: list[Row]) -> int:
    """3 when a part kpemu would use is missing, else 0 (pure)."""
    return 3 if any(r.needed and not r.present for r in found) else 0


def facts(asked: tuple[str, ...] = ("core",)) -> Facts:
    """This machine's facts (probes this kernel as root; without root the guest's need is unknown);
    `asked`: the parts that must be here."""
    from kpemu import system
    from kpemu.docker.engine import why_unavailable
    from kpemu.kernel.probe import GUEST_FEATURES
    from kpemu.runtimes import probe_here
    from kpemu.runtimes.kernels import find_kernel
    from kpemu.runtimes.qemu import find_tool

    caps = probe_here()
    lacking = caps.missing(GUEST_FEATURES) if caps.root else None
    if lacking is None:
        need, why = None, "needed where this kernel lacks IPVS, IPIP or dummy (not probed: run as root)"
    elif lacking:
        need, why = True, f"needed: this kernel lacks {', '.join(lacking)}"
    else:
        need, why = False, "not needed: this kernel has what every scenario needs"
    try:
        import virtme_ng  # noqa: F401

        have_virtme = True
    except ImportError:
        have_virtme = False
    kernel = find_kernel()
    missing = set(system.missing_packages())
    by_part = {part: tuple(p for p in system.packages(parts=(part,)) if p in missing) for part in system.PARTS}
    return Facts(by_part, need, why, have_virtme, find_tool("vng") is not None,
                 find_tool("qemu-system-x86_64") is not None,
                 None if kernel is None else f"{kernel.version} ({kernel.origin})", why_unavailable(), asked)
