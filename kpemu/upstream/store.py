"""Where upstream binaries live in kpemu's cache, and what each one is (its manifest).

    $KPEMU_CACHE/upstream/            (KPEMU_CACHE unset: /var/cache/kpemu/upstream, beside kernels/)
        go/mod/                       GOMODCACHE: the module proxy's downloads, reused by every build
        go/build/                     GOCACHE: compiled packages, so a rebuild takes seconds
        src/v1.36.3/kube-proxy/       the generated wrapper module of that release's program (go.mod, go.sum, main.go)
        bin/v1.36.3/kube-proxy        a binary, and beside it kube-proxy.json: its manifest
        build.lock                    held while a build runs (one build at a time on this machine)

A binary counts as built when its manifest exists and names the binary's size: a build killed half
way leaves a temporary file and no manifest, and is redone.
"""

from __future__ import annotations

import json
import os
from dataclasses import asdict, dataclass
from pathlib import Path

DEFAULT_ROOT = Path("/var/cache/kpemu/upstream")


def root() -> Path:
    """The upstream cache: $KPEMU_CACHE/upstream, else /var/cache/kpemu/upstream."""
    base = os.environ.get("KPEMU_CACHE")
    return Path(base) / "upstream" if base else DEFAULT_ROOT


def gomodcache() -> Path:
    return root() / "go" / "mod"


def gocache() -> Path:
    return root() / "go" / "build"


def src_dir(tag: str) -> Path:
    """The wrapper modules of release `tag` (v1.36.3), one directory per program."""
    return root() / "src" / tag


def bin_path(tag: str, program: str) -> Path:
    """Where `program` built from release `tag` lives."""
    return root() / "bin" / tag / program


def lock_path() -> Path:
    return root() / "build.lock"


@dataclass(frozen=True)
class Built:
    """One binary in the cache, as its manifest records it."""

    program: str  # kube-proxy, kube-apiserver or etcd
    release: str  # the Kubernetes release whose wrapper built it: v1.36.3
    version: str  # what the binary says it is: `Kubernetes v1.36.3`, `etcd Version: 3.6.5`
    path: str
    size: int  # bytes
    go: str  # the Go toolchain that built it
    seconds: float  # how long its `go build` took
    built_at: str  # UTC, ISO 8601
    cold: bool  # whether GOCACHE was empty when its build began (a cold build's time is the one to quote)


def manifest_path(binary: Path) -> Path:
    return binary.with_name(binary.name + ".json")


def write_manifest(built: Built) -> None:
    """Record a finished binary (after it is in place): from now on it counts as built."""
    path = manifest_path(Path(built.path))
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps(asdict(built), indent=2) + "\n")
    tmp.replace(path)


def read_built(binary: Path) -> Built | None:
    """The binary's manifest, or None when it is not built (no manifest, no binary, or a size that
    differs from the recorded one, or a manifest kpemu cannot read)."""
    try:
        data = json.loads(manifest_path(binary).read_text())
        built = Built(**data)
        if binary.stat().st_size != built.size:
            return None
    except (OSError, ValueError, TypeError):
        return None
    return built


def all_built() -> list[Built]:
    """Every binary in the cache, by release (in number order) then program."""
    bins = root() / "bin"
    if not bins.is_dir():
        return []
    found = []
    for manifest in sorted(bins.glob("*/*.json")):
        built = read_built(manifest.with_suffix(""))
        if built is not None:
            found.append(built)
    return sorted(found, key=lambda b: (_number(b.release), b.program))


def _number(tag: str) -> tuple[int, ...]:
    return tuple(int(p) if p.isdigit() else -1 for p in tag.lstrip("v").split("."))
