"""The scenario matrix: every shipped scenario x kube-proxy mode x kernel x release, as `kpemu matrix` lists
it and the GitHub workflow takes its jobs from it (`fromJSON`), so the matrix spreads over runners.

A scenario runs in the mode it is written in, and the ones of `NFTABLES_TOO` in nftables mode as well (the
release its loader gives that mode). Kernels: `host` (the runner's own, its modules loaded) and each guest
kernel series of `GUEST_SERIES` (Debian's packages, booted by the vm runtime) for the scenarios the guest
can run (not container members: the vm runtime's `refuses`). `grouped` puts the entries of one kernel
and mode variant in one job.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path

from kpemu.errors import InputError
from kpemu.inputs.scenario import load_scenario

# the scenarios whose story holds in nftables mode too (`make scenarios-nftables` runs them)
NFTABLES_TOO = ("internal-traffic-local", "terminating-fallback", "topology-hints", "lb-ipmode-proxy",
                "lb-no-nodeports", "service-proxy-name", "detect-local-nodecidr", "detect-local-bridge",
                "faults/no-masquerade", "faults/no-br-netfilter", "faults/stale-rules", "faults/rp-filter",
                "faults/mtu-mismatch")
GUEST_SERIES = ("6.1", "6.12")  # Debian bookworm's kernels (linux-image-amd64, linux-image-6.12-amd64)
KERNELS = ("host", *GUEST_SERIES)
VARIANTS = ("as-written", "nftables")


@dataclass(frozen=True)
class Entry:
    """One run: the scenario (its name under scenarios/, e.g. faults/rp-filter), its file, the mode variant
    and the mode and release it gives, the kernel (host or a guest series)."""

    scenario: str
    file: str
    variant: str  # as-written | nftables
    mode: str
    release: str
    kernel: str

    @property
    def id(self) -> str:
        return f"{self.scenario.replace('/', '-')}-{self.variant}-{self.kernel}"


def shipped(root: Path) -> list[Path]:
    """The shipped scenario files: scenarios/*.yaml, then scenarios/faults/*.yaml."""
    return sorted((root / "scenarios").glob("*.yaml")) + sorted((root / "scenarios" / "faults").glob("*.yaml"))


def kernels_of(text: str | None) -> tuple[str, ...]:
    """`host,6.12` -> ("host", "6.12"); None: every kernel. InputError naming one it does not know."""
    if text is None:
        return KERNELS
    asked = tuple(k.strip() for k in text.split(",") if k.strip())
    wrong = [k for k in asked if k not in KERNELS]
    if wrong or not asked:
        raise InputError(f"--kernels {text}: expected a comma-separated list of {', '.join(KERNELS)}")
    return asked


def entries(root: Path, files: Sequence[Path], kernels: Iterable[str] = KERNELS) -> list[Entry]:
    """Every (scenario, variant, kernel) of `files` (scenario files under root/scenarios)."""
    from kpemu.runtimes.guest import GuestRuntime

    kernels = tuple(kernels)
    out: list[Entry] = []
    for f in files:
        name = f.resolve().relative_to((root / "scenarios").resolve()).with_suffix("").as_posix()
        rel = f.resolve().relative_to(root.resolve()).as_posix()
        variants = [("as-written", None), *([("nftables", "nftables")] if name in NFTABLES_TOO else [])]
        for variant, mode in variants:
            sc = load_scenario(str(f), mode)
            kp = sc.topology.kubeProxy
            guest_ok = GuestRuntime().refuses(sc.topology) is None
            out += [Entry(name, rel, variant, kp.mode, kp.version, k) for k in kernels if k == "host" or guest_ok]
    return out


def include(found: Sequence[Entry]) -> dict[str, list[dict[str, str]]]:
    """A GitHub Actions matrix (`strategy.matrix: ${{ fromJSON(...) }}`): one include per entry."""
    return {"include": [{"id": e.id, **asdict(e)} for e in found]}


def grouped(found: Sequence[Entry]) -> dict[str, list[dict[str, str]]]:
    """A GitHub Actions matrix with one job per kernel and mode variant: its scenario files (space-separated,
    what `kpemu run` takes), how many, and their modes and releases."""
    jobs: dict[tuple[str, str], list[Entry]] = {}
    for e in found:
        jobs.setdefault((e.kernel, e.variant), []).append(e)
    return {"include": [{"id": f"{variant}-{kernel}", "kernel": kernel, "variant": variant,
                         "files": " ".join(e.file for e in es), "scenarios": str(len(es)),
                         "modes": " ".join(sorted({e.mode for e in es})),
                         "releases": " ".join(sorted({e.release for e in es}, key=_release_key))}
                        for (kernel, variant), es in jobs.items()]}


def _release_key(release: str) -> tuple[int, ...]:
    return tuple(int(p) if p.isdigit() else 0 for p in release.split("."))
