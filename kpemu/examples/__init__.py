"""The example topologies and scenarios shipped with kpemu, and `example:NAME` references to them.

In a checkout these are the repository's topologies/ and scenarios/ (linked here); a wheel carries
them as package data, so an installed kpemu runs `kpemu run example:nodeport-ipvs` anywhere.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from kpemu.errors import InputError

ROOT = Path(__file__).resolve().parent
PREFIX = "example:"


@dataclass(frozen=True)
class Example:
    """One shipped file: its name, kind (scenario | topology), path and first comment line."""

    name: str
    kind: str
    path: Path
    summary: str


def _summary(path: Path) -> str:
    for line in path.read_text().splitlines():
        s = line.strip()
        if s.startswith("#") and "yaml-language-server" not in s and s.lstrip("# "):
            return s.lstrip("# ").strip()
        if s and not s.startswith("#"):
            break
    return ""


def examples() -> list[Example]:
    """Every shipped scenario, then every shipped topology, by name."""
    out = []
    for kind, sub in (("scenario", "scenarios"), ("topology", "topologies")):
        for p in sorted((ROOT / sub).glob("*.yaml")):
            out.append(Example(p.stem, kind, p, _summary(p)))
    return out


def resolve(ref: str | Path) -> Path:
    """A file path as given, or the shipped file an `example:NAME` names (a scenario before a topology)."""
    ref = str(ref)
    if not ref.startswith(PREFIX):
        return Path(ref)
    name = ref[len(PREFIX):]
    for ex in examples():
        if ex.name == name:
            return ex.path
    names = ", ".join(sorted({e.name for e in examples()}))
    raise InputError(f"{ref}: no example of that name (see kpemu examples; there are: {names})")


def inside_package(path: str | Path) -> bool:
    """Whether `path` (links followed) lies inside the installed kpemu package: in a checkout the
    examples are links to the repository's own scenarios/ and topologies/, which do not."""
    package = ROOT.parent
    return Path(path).resolve().is_relative_to(package)


def refuse_writes_inside_package(paths: list[str], what: str) -> None:
    """InputError (exit 2) when one of `paths` lies inside the installed package, which `what` would
    rewrite; the fix copies the examples somewhere writable first."""
    inside = [p for p in paths if inside_package(p)]
    if inside:
        first = Path(inside[0])
        raise InputError(f"{what} would rewrite files inside the installed kpemu package ({first.resolve()}); "
                         f"copy the examples first: cp -rL {ROOT} ./kpemu-examples, then run "
                         f"./kpemu-examples/{first.parent.name}/{first.name} with {what}")
