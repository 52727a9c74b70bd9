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
    """Every shipped scenario (the fault scenarios as `faults/NAME`), then every shipped topology, by name."""
    out = []
    for kind, sub, prefix in (("scenario", "scenarios", ""), ("scenario", "scenarios/faults", "faults/"),
                              ("topology", "topologies", "")):
        for p in sorted((ROOT / sub).glob("*.yaml")):
            out.append(Example(prefix + p.stem, kind, p, _summary(p)))
    return out


# What `examples copy` writes: the shipped directories, laid out as in the repository so that a
# scenario's `topology: ../topologies/x.yaml` and its golden/ folder resolve from the copy.
SHIPPED = ("scenarios", "topologies", "schemas")


def copy_examples(dest: Path) -> list[Path]:
    """Copy the shipped scenarios (with their goldens), topologies and schemas into `dest` (created; an
    existing file is never overwritten: InputError naming it); the files written."""
    import shutil

    pairs = [(p, dest / sub / p.relative_to(ROOT / sub)) for sub in SHIPPED
             for p in sorted((ROOT / sub).rglob("*")) if p.is_file() and "__pycache__" not in p.parts]
    clash = next((d for _, d in pairs if d.exists()), None)
    if clash is not None:
        raise InputError(f"kpemu examples copy: {clash} exists; copy into a new or empty directory")
    for src, dst in pairs:
        dst.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(src, dst)
    return [d for _, d in pairs]


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
        rel = first.resolve().relative_to(ROOT.resolve()) if first.resolve().is_relative_to(ROOT.resolve()) \
            else Path(first.parent.name) / first.name
        raise InputError(f"{what} would rewrite files inside the installed kpemu package ({first.resolve()}); "
                         f"copy the examples first: kpemu examples copy ./kpemu-examples, then run "
                         f"./kpemu-examples/{rel} with {what}")
