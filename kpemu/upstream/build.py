"""Building upstream binaries into kpemu's cache: kube-proxy per release, and kube-apiserver and etcd
once, from the newest release (one API server serves every kube-proxy: kube-proxy may be older than
the API server, never newer).

A binary already built (kpemu/upstream/store.py) is reused; otherwise the release's wrapper module is
made (kpemu/upstream/gomod.py from the release's go.mod, then `go mod tidy`), the program is built
with the version stamped, and `PROGRAM --version` must name the release before the manifest is
written. One build at a time on this machine (a lock file in the cache).
"""

from __future__ import annotations

import contextlib
import datetime
import fcntl
import json
import subprocess
import time
from collections.abc import Callable, Iterator
from pathlib import Path

from kpemu.errors import EnvironmentProblem, InputError
from kpemu.upstream import gomod, gotool, store
from kpemu.upstream.releases import Release, check_buildable, parse_release, released

Progress = Callable[[str], None]
CONTROL_PLANE = ("kube-apiserver", "etcd")


def served() -> list[Release]:
    """The releases the module proxy serves (pre-releases left out), oldest first."""
    return released(gotool.list_versions(gomod.KUBERNETES))


@contextlib.contextmanager
def _locked(say: Progress) -> Iterator[None]:
    path = store.lock_path()
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("a+") as f:
        try:
            fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            say(f"waiting for another upstream build to finish ({path})")
            fcntl.flock(f, fcntl.LOCK_EX)
        yield


def wrapper_module(release: Release, program: str, say: Progress) -> Path:
    """The wrapper module that builds `program` of `release` (its go.mod made from the release's, its
    main package, tidied), made unless it already is; its directory. One module per program, so a
    program's build needs only the modules that program imports (an old release's kube-apiserver may
    need modules the proxy no longer serves while its kube-proxy builds)."""
    src = store.src_dir(release.tag) / program
    stamp = src / ".tidy-done"
    if stamp.exists():
        return src
    say(f"{release.tag}: reading the release's go.mod from the module proxy")
    info = gotool.download(gomod.KUBERNETES, release.tag)
    mod_file = Path(info["GoMod"])
    mod = gomod.parse(mod_file.read_text(), str(mod_file))
    src.mkdir(parents=True, exist_ok=True)
    (src / "go.mod").write_text(gomod.wrapper(release, mod))
    (src / "main.go").write_text(gomod.MAIN_GO[program])
    (src / "release.json").write_text(json.dumps({"release": release.tag, "time": _release_time(info),
                                                  "etcd": gomod.etcd_version(mod), "go": mod.go}) + "\n")
    say(f"{release.tag}: {program}'s wrapper module with {len(mod.staging)} staging replaces in {src}; "
        "resolving its modules (go mod tidy)")
    gotool.run(["mod", "tidy"], src, f"resolving the modules {program} of Kubernetes {release.tag} needs")
    stamp.write_text("")
    return src


def _release_time(info: dict) -> str:
    """The release's commit time (the proxy's .info), the build date stamped into its binaries."""
    try:
        when = json.loads(Path(info["Info"]).read_text())["Time"]
        return datetime.datetime.fromisoformat(when.replace("Z", "+00:00")).strftime("%Y-%m-%dT%H:%M:%SZ")
    except (KeyError, OSError, ValueError):
        return datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _stamped_version(binary: Path, program: str) -> str:
    """What the binary says it is (`--version`): `Kubernetes v1.36.3`, `etcd Version: 3.6.5`."""
    try:
        res = subprocess.run([str(binary), "--version"], capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.TimeoutExpired) as e:
        raise EnvironmentProblem(f"the {program} just built does not run: {e}") from None
    text = (res.stdout or res.stderr).strip()
    return text.splitlines()[0] if text else ""


def _expected_version(program: str, release: Release, meta: dict) -> str:
    if program == "etcd":
        return f"etcd Version: {meta['etcd'].removeprefix('v')}"
    return f"Kubernetes {release.tag}"


def build_program(release: Release, program: str, say: Progress) -> tuple[store.Built, bool]:
    """`program` of `release` in the cache, built unless it already is; (its manifest, whether it was built now)."""
    target = store.bin_path(release.tag, program)
    if (have := store.read_built(target)) is not None:
        return have, False
    with _locked(say):
        if (have := store.read_built(target)) is not None:  # another build made it while this one waited
            return have, False
        cold = not store.gocache().is_dir() or not any(store.gocache().glob("??/*"))  # before any go command
        src = wrapper_module(release, program, say)
        meta = json.loads((src / "release.json").read_text())
        total = gotool.package_count(src, ".")
        label = f"{program} {release.tag}" + (f" (etcd {meta['etcd']})" if program == "etcd" else "")
        say(f"{label}: compiling up to {total} packages (nice, one at a time; GOCACHE {store.gocache()})")
        last = [time.monotonic()]

        def heard(n: int) -> None:
            if time.monotonic() - last[0] >= 10:
                last[0] = time.monotonic()
                say(f"{label}: {n}/{total} packages compiled")

        target.parent.mkdir(parents=True, exist_ok=True)
        tmp = target.with_name(f".{program}.partial")
        seconds = gotool.build(src, ".", tmp, gomod.ldflags(release, meta["time"]), heard)
        version = _stamped_version(tmp, program)
        if version != _expected_version(program, release, meta):
            raise EnvironmentProblem(f"the {program} built from {release.tag} says {version!r} to --version, not "
                                     f"{_expected_version(program, release, meta)!r}: not kept")
        tmp.replace(target)
        built = store.Built(program, release.tag, version, str(target), target.stat().st_size, gotool.version(),
                            round(seconds, 1), datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
                            cold)
        store.write_manifest(built)
        say(f"{label}: built in {seconds:.0f}s, {built.size / 1e6:.0f} MB, {target}")
        return built, True


def check_served(release: Release, releases: list[Release]) -> None:
    """Refuse (InputError, exit 2) a release the module proxy does not serve, naming the nearest ones."""
    if release in releases:
        return
    same = [str(r) for r in releases if r.minor == release.minor] or [str(r) for r in releases[-5:]]
    raise InputError(f"release {release}: the module proxy does not serve k8s.io/kubernetes {release.tag}; "
                     f"it serves {', '.join(same)} (`kpemu upstream list` lists them all)")


def build(release: Release, say: Progress, control_plane: bool = True) -> list[tuple[store.Built, bool]]:
    """kube-proxy of `release` and (with `control_plane`) kube-apiserver and etcd of the newest release,
    each built unless it already is."""
    check_buildable(release)
    need_proxy = store.read_built(store.bin_path(release.tag, "kube-proxy")) is None
    releases = served() if need_proxy or (control_plane and built_control_plane() is None) else []
    if need_proxy:
        check_served(release, releases)
    out = [build_program(release, "kube-proxy", say)]
    if control_plane:
        out += control_plane_build(say, releases)
    return out


def built_control_plane() -> dict[str, store.Built] | None:
    """kube-apiserver and etcd of the newest release that has both in the cache, or None."""
    by_release: dict[str, dict[str, store.Built]] = {}
    for b in store.all_built():
        if b.program in CONTROL_PLANE:
            by_release.setdefault(b.release, {})[b.program] = b
    whole = [(parse_release(tag), found) for tag, found in by_release.items() if len(found) == len(CONTROL_PLANE)]
    return max(whole, key=lambda pair: pair[0])[1] if whole else None


def control_plane_build(say: Progress, releases: list[Release] | None = None) -> list[tuple[store.Built, bool]]:
    """kube-apiserver and etcd: the ones in the cache, else built from the newest release served (saying so)."""
    have = built_control_plane()
    if have is not None:
        return [(have[p], False) for p in CONTROL_PLANE]
    top = (releases or served() or [None])[-1]
    if top is None:
        raise EnvironmentProblem(f"the module proxy lists no release of {gomod.KUBERNETES}")
    return [build_program(top, program, say) for program in CONTROL_PLANE]


def control_plane_binaries(say: Progress) -> dict[str, Path]:
    """kube-apiserver's and etcd's paths, built first when the cache has none (saying so)."""
    return {b.program: Path(b.path) for b, _ in control_plane_build(say)}
