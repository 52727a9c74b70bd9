"""Kubernetes releases as kpemu builds them: parsing a release name, ordering, and the oldest one that
builds (pure: no I/O).

`1.36.3`, `v1.36.3` and `upstream:1.36.3` all name release v1.36.3. Pre-releases (`v1.38.0-beta.0`)
are listed by the module proxy but never built: kpemu builds what was released.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass

from kpemu.errors import InputError

_RELEASE = re.compile(r"^v?(0|[1-9]\d{0,3})\.(0|[1-9]\d{0,3})\.(0|[1-9]\d{0,3})$")
_TAG = re.compile(r"^v(0|[1-9]\d*)\.(0|[1-9]\d*)\.(0|[1-9]\d*)(-[0-9A-Za-z.-]+)?$")


@dataclass(frozen=True, order=True)
class Release:
    """One Kubernetes release, e.g. Release(1, 36, 3) for v1.36.3."""

    major: int
    minor: int
    patch: int

    @property
    def tag(self) -> str:
        """The git tag and module version: `v1.36.3`."""
        return f"v{self.major}.{self.minor}.{self.patch}"

    @property
    def staging(self) -> str:
        """The version of the release's published staging modules (k8s.io/api ...): `v0.36.3`."""
        return f"v0.{self.minor}.{self.patch}"

    def __str__(self) -> str:
        return f"{self.major}.{self.minor}.{self.patch}"


# The oldest minor whose kube-proxy kpemu has built here and run (`kube-proxy --version` said
# `Kubernetes v1.29.6`): 1.29.6 is the oldest release but one the module proxy serves; the other,
# v1.13.0, had no go.mod (the proxy's holds only its module line), so no staging module to replace
# and nothing to build from. Releases of an older minor are refused.
OLDEST_BUILDABLE = Release(1, 29, 0)


def parse_release(text: str, what: str = "release") -> Release:
    """`1.36.3` / `v1.36.3` as a Release; anything else is an InputError naming the form expected."""
    m = _RELEASE.match(text.strip())
    if not m:
        raise InputError(f"{what} {text!r}: not a Kubernetes release; give MAJOR.MINOR.PATCH, e.g. 1.36.3 "
                         "(`kpemu upstream list` lists the releases that can be built)")
    return Release(int(m[1]), int(m[2]), int(m[3]))


def check_buildable(release: Release) -> None:
    """Refuse (InputError, exit 2) a release older than the oldest minor kpemu builds, naming it."""
    if (release.major, release.minor) < (OLDEST_BUILDABLE.major, OLDEST_BUILDABLE.minor):
        raise InputError(f"release {release}: older than {OLDEST_BUILDABLE.major}.{OLDEST_BUILDABLE.minor}, the "
                         f"oldest minor kpemu builds; pick {OLDEST_BUILDABLE.major}.{OLDEST_BUILDABLE.minor}.x or "
                         "newer (`kpemu upstream list`), or use kpemu's model of that release (no --kube-proxy)")


def released(tags: Iterable[str]) -> list[Release]:
    """The releases among module versions (`go list -m -versions` words), oldest first: pre-releases
    and words that are no version are left out."""
    out = set()
    for tag in tags:
        m = _TAG.match(tag)
        if m and not m[4]:
            out.add(Release(int(m[1]), int(m[2]), int(m[3])))
    return sorted(out)


def buildable(releases: Iterable[Release]) -> list[Release]:
    """The releases that are not older than the oldest buildable minor, oldest first."""
    floor = (OLDEST_BUILDABLE.major, OLDEST_BUILDABLE.minor)
    return sorted(r for r in releases if (r.major, r.minor) >= floor)
