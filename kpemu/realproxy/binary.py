"""Which real kube-proxy a run uses: a release from kpemu's cache (built from source first when it is
not there, saying so), or a binary built elsewhere, as the topology's kubeProxy.upstream names it.

    implementation: upstream                the newest patch of kubeProxy.version's minor in the cache,
                                            else the newest the module proxy serves (built now)
    upstream: 1.36.3                        that release (built now when it is not in the cache)
    upstream: /path/to/kube-proxy           a developer's own build, as it is
"""

from __future__ import annotations

import os
import re
import subprocess
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from kpemu.errors import EnvironmentProblem, InputError
from kpemu.model.topology import Topology
from kpemu.upstream import build, store
from kpemu.upstream.releases import Release, check_buildable, parse_release


@dataclass(frozen=True)
class Binary:
    """A kube-proxy to run: its path, what its --version says, and its build manifest ({} when not kpemu's)."""

    path: str
    version: str
    build: dict[str, Any]


def minor_of(version: str) -> int | None:
    """The minor of what kube-proxy --version says (`Kubernetes v1.37.2` -> 37), None when it is no release."""
    m = re.match(r"Kubernetes v1\.(\d{1,4})\.", version)
    return int(m[1]) if m else None


def is_path(text: str) -> bool:
    """Whether kubeProxy.upstream names a binary rather than a release."""
    return "/" in text or text.startswith(".")


def resolve(topo: Topology, say: Callable[[str], None]) -> Binary:
    """The kube-proxy binary of the topology's kubeProxy.upstream (see the module's table)."""
    want = topo.kubeProxy.upstream
    if want is not None and is_path(want):
        return own_build(Path(want))
    if want is not None:
        return of_release(parse_release(want, "kubeProxy.upstream"), say)
    candidates = _newest_of_minor(topo, say)
    for i, release in enumerate(candidates):
        try:
            return of_release(release, say)
        except EnvironmentProblem as e:  # a patch whose modules the proxy does not fully serve (1.33.6)
            if i + 1 == min(len(candidates), PATCH_TRIES):
                raise
            say(f"kube-proxy {release} does not build here ({str(e).splitlines()[0][:160]}); trying "
                f"{candidates[i + 1]}")
    raise AssertionError("unreachable: _newest_of_minor returns at least one release")


def of_release(release: Release, say: Callable[[str], None]) -> Binary:
    """kube-proxy of `release` from the cache, built from source first when it is not there (saying so)."""
    check_buildable(release)
    built, now = build.build_program(release, "kube-proxy", say) if _cached(release) else _built_now(release, say)
    if now:
        say(f"kube-proxy {release.tag}: built for this run")
    return Binary(built.path, built.version, asdict(built))


def _cached(release: Release) -> bool:
    return store.read_built(store.bin_path(release.tag, "kube-proxy")) is not None


def _built_now(release: Release, say: Callable[[str], None]) -> tuple[store.Built, bool]:
    build.check_served(release, build.served())
    say(f"kube-proxy {release.tag} is not in the cache: building it from source (minutes on a cold cache)")
    return build.build_program(release, "kube-proxy", say)


PATCH_TRIES = 3  # patches of a minor tried, newest first, when one does not build


def _newest_of_minor(topo: Topology, say: Callable[[str], None]) -> list[Release]:
    """The releases to try for kubeProxy.version: the newest patch in the cache, else the patches the
    module proxy serves, newest first."""
    minor = topo.kubeProxy.minor
    cached = [parse_release(b.release) for b in store.all_built() if b.program == "kube-proxy"]
    mine = sorted(r for r in cached if r.minor == minor)
    if mine:
        return [mine[-1]]
    say(f"no kube-proxy 1.{minor} in the cache: asking the module proxy for its newest patch")
    served = sorted((r for r in build.served() if r.minor == minor), reverse=True)
    if not served:
        raise InputError(f"{topo.name}: kubeProxy.version 1.{minor}: the module proxy serves no release of it; give "
                         "kubeProxy.upstream a release (`kpemu upstream list`)")
    return served


def own_build(path: Path) -> Binary:
    """A kube-proxy built outside kpemu: an executable file that says `Kubernetes vX.Y.Z` to --version."""
    if not path.is_file() or not os.access(path, os.X_OK):
        raise InputError(f"kubeProxy.upstream {path}: no executable file there; give the path of a kube-proxy "
                         "binary (`go build ./cmd/kube-proxy` in a kubernetes checkout) or a release such as 1.37.2")
    try:
        res = subprocess.run([str(path), "--version"], capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.TimeoutExpired) as e:
        raise EnvironmentProblem(f"kubeProxy.upstream {path} does not run: {e}") from None
    said = (res.stdout or res.stderr).strip().splitlines()
    if res.returncode != 0 or not said or not said[0].startswith("Kubernetes v"):
        raise InputError(f"kubeProxy.upstream {path}: `--version` said {(said or ['nothing'])[0][:80]!r}, not "
                         "`Kubernetes vX.Y.Z`: not a kube-proxy")
    return Binary(str(path.resolve()), said[0], {})
