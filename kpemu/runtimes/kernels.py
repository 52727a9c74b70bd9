"""Guest kernels for the vm runtime: find one (the cache, then /boot), list them, or download one.

`find_kernel()` reuses a kernel from the cache or /boot that has every REQUIRED_MODULE; `setup()`
downloads Debian's kernel package with `apt-get download` and unpacks it with `dpkg-deb -x` into
`$KPEMU_CACHE` (default /var/cache/kpemu/kernels), then runs `depmod` on the copy (never installs
it: /boot and the bootloader are not touched). Nothing here prints; failures are
`EnvironmentProblem` (exit 3) with the reason and the fix.

A kernel series (`6.1`, `6.12`: Debian bookworm packages both) picks among them: the `series`
argument, else `$KPEMU_KERNEL` (what `--kernel SERIES` of `kpemu run`, `vm up` and `vm setup` sets),
else any. Its package is what the series' meta-package (`linux-image-6.12-amd64`) depends on, or the
distribution's default (`linux-image-amd64`) when that is of the series.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kpemu.errors import EnvironmentProblem, InputError
from kpemu.system import setup_hint

DEFAULT_CACHE = Path("/var/cache/kpemu/kernels")
DEFAULT_SERIES = "6.1"  # Debian bookworm's linux-image-amd64: the series a run uses unless asked for another
KERNEL_ENV = "KPEMU_KERNEL"  # the guest kernel series to use (kpemu run/vm up/vm setup --kernel SERIES)
# Modules a guest kernel must have (as .ko or built in) to be worth booting.
REQUIRED_MODULES = ("ip_vs", "ipip", "dummy", "vxlan", "br_netfilter")


@dataclass(frozen=True)
class GuestKernel:
    """A bootable kernel image plus the module tree that belongs to it."""

    version: str
    vmlinuz: Path
    moddir: Path
    origin: str  # "cache" or "boot"

    @property
    def root(self) -> Path:
        """The directory holding boot/ and lib/modules/ (what virtme-ng calls the rootfs)."""
        return self.vmlinuz.parent.parent


@dataclass(frozen=True)
class SetupResult:
    """What `setup()` did: `action` is not-needed, reused or downloaded."""

    action: str
    kernel: GuestKernel | None
    reason: str = ""
    package: str = ""
    download_bytes: int = 0
    seconds: float = 0.0


def series_of(version: str) -> str:
    """A kernel release's series: 6.1.0-57-amd64 -> 6.1, 6.12.115+deb12-amd64 -> 6.12."""
    m = re.match(r"(\d+)\.(\d+)", version)
    return f"{m[1]}.{m[2]}" if m else version


def wanted_series(series: str | None = None) -> str | None:
    """The series asked for: `series`, else $KPEMU_KERNEL, else None (any); InputError for one that is no
    MAJOR.MINOR."""
    series = series or os.environ.get(KERNEL_ENV) or None
    if series is not None and not re.fullmatch(r"\d{1,2}\.\d{1,3}", series):
        raise InputError(f"guest kernel series {series[:40]!r}: expected MAJOR.MINOR, such as 6.1 or 6.12"
                         + (f" (from ${KERNEL_ENV})" if series == os.environ.get(KERNEL_ENV) else ""))
    return series


def cache_dir() -> Path:
    """Where guest kernels are kept: $KPEMU_CACHE, else /var/cache/kpemu/kernels."""
    return Path(os.environ.get("KPEMU_CACHE") or DEFAULT_CACHE)


# ---------------------------------------------------------------- finding a kernel


def modules_in(moddir: Path) -> set[str]:
    """Module names available in a module tree: loadable (modules.dep or a walk) plus built in."""
    names: set[str] = set()
    dep = moddir / "modules.dep"
    if dep.exists():
        for line in dep.read_text(errors="replace").splitlines():
            names.add(_modname(line.split(":", 1)[0]))
    else:
        names.update(_modname(p.name) for p in (moddir / "kernel").rglob("*.ko*"))
    builtin = moddir / "modules.builtin"
    if builtin.exists():
        names.update(_modname(ln) for ln in builtin.read_text(errors="replace").split())
    return names


def _modname(path: str) -> str:
    base = path.rsplit("/", 1)[-1]
    return re.sub(r"\.ko(\.(xz|zst|gz))?$", "", base).replace("-", "_")


def _candidates() -> Iterator[GuestKernel]:
    cache = cache_dir()
    if cache.is_dir():
        for root in sorted(cache.iterdir(), reverse=True):
            if root.name.startswith(".") or not root.is_dir():
                continue
            for img in sorted((root / "boot").glob("vmlinuz-*"), reverse=True):
                ver = img.name.removeprefix("vmlinuz-")
                for mods in (root / "lib/modules" / ver, root / "usr/lib/modules" / ver):
                    if mods.is_dir():
                        yield GuestKernel(ver, img, mods, "cache")
                        break
    for img in sorted(Path("/boot").glob("vmlinuz-*"), reverse=True):
        ver = img.name.removeprefix("vmlinuz-")
        mods = Path("/lib/modules") / ver
        if mods.is_dir() and os.access(img, os.R_OK):
            yield GuestKernel(ver, img, mods, "boot")


def find_kernel(series: str | None = None) -> GuestKernel | None:
    """The first suitable guest kernel (cache first, then /boot) of the series (`wanted_series`; none asked:
    of DEFAULT_SERIES when there is one): it has every REQUIRED_MODULE."""
    series = wanted_series(series)
    suitable = [k for k in _candidates() if (series is None or series_of(k.version) == series)
                and not set(REQUIRED_MODULES) - modules_in(k.moddir)]
    # no series asked: the distribution's default series first, so a second one in the cache changes nothing
    return next((k for k in suitable if series is not None or series_of(k.version) == DEFAULT_SERIES),
                suitable[0] if suitable else None)


def list_kernels() -> list[tuple[GuestKernel, list[str]]]:
    """Every kernel found, with the required modules it lacks (empty list: suitable)."""
    return [(k, sorted(set(REQUIRED_MODULES) - modules_in(k.moddir))) for k in _candidates()]


# ---------------------------------------------------------------- getting a kernel


def _apt_kernel_package(series: str | None = None) -> str:
    """The versioned Debian kernel image package (linux-image-<abi>-<arch>) apt would install: of the
    series' meta-package, else of the default one when that is of the series."""
    if os.environ.get("KPEMU_KERNEL_PACKAGE"):
        return os.environ["KPEMU_KERNEL_PACKAGE"]
    if not shutil.which("apt-cache") or not shutil.which("apt-get"):
        raise EnvironmentProblem("no guest kernel, and this is not a Debian/Ubuntu system (no apt)",
                                 f"unpack a kernel package with its modules into {cache_dir()}/NAME/")
    arch = subprocess.run(["dpkg", "--print-architecture"], capture_output=True, text=True,
                          check=False).stdout.strip() or "amd64"
    metas = [f"linux-image-{arch}"] if series is None else [f"linux-image-{series}-{arch}", f"linux-image-{arch}"]
    for attempt in range(2):
        for meta in metas:
            out = subprocess.run(["apt-cache", "depends", meta], capture_output=True, text=True,
                                 check=False).stdout
            m = re.search(r"Depends: (linux-image-[0-9]\S*)", out)
            if m and (series is None or series_of(m[1].removeprefix("linux-image-")) == series):
                return m.group(1)
        if attempt == 0:  # empty package lists (fresh container): refresh once
            subprocess.run(["apt-get", "update", "-qq"], capture_output=True, check=False)
    what = f"kernel {series} package" if series else f"{metas[0]} package"
    raise EnvironmentProblem(
        f"no guest kernel, and apt knows no {what} on this system (looked for {', '.join(metas)})",
        f"set KPEMU_KERNEL_PACKAGE to a kernel image package with modules, or unpack one into "
        f"{cache_dir()}/NAME/ (boot/vmlinuz-VER and lib/modules/VER)")


def _download(pkg: str, dest: Path) -> Path:
    """`apt-get download pkg` into dest (after one `apt-get update` if the lists are stale); the .deb."""
    r = subprocess.run(["apt-get", "download", "-q", pkg], cwd=dest, capture_output=True, text=True,
                       check=False)
    if r.returncode != 0:
        subprocess.run(["apt-get", "update", "-qq"], capture_output=True, check=False)
        r = subprocess.run(["apt-get", "download", "-q", pkg], cwd=dest, capture_output=True, text=True,
                           check=False)
    debs = list(dest.glob("*.deb"))
    if r.returncode != 0 or not debs:
        raise EnvironmentProblem(f"apt-get download {pkg} failed: {r.stderr.strip()[-300:]}",
                                 "check the network and `apt-get update`, then run `kpemu vm setup`")
    return debs[0]


def _unpack(deb: Path, root: Path) -> GuestKernel:
    """dpkg-deb -x the kernel package into root and build its modules.dep."""
    subprocess.run(["dpkg-deb", "-x", str(deb), str(root)], check=True, capture_output=True)
    if not (root / "lib").exists() and (root / "usr/lib/modules").is_dir():
        (root / "lib").symlink_to("usr/lib")  # merged-/usr packages: depmod -b and virtme look in lib/
    imgs = sorted((root / "boot").glob("vmlinuz-*"))
    if not imgs:
        raise EnvironmentProblem(f"{deb.name} holds no boot/vmlinuz-*", "pick a linux-image package")
    ver = imgs[-1].name.removeprefix("vmlinuz-")
    if shutil.which("depmod") or Path("/sbin/depmod").exists():
        subprocess.run([shutil.which("depmod") or "/sbin/depmod", "-a", "-b", str(root), ver],
                       check=False, capture_output=True)
    return GuestKernel(ver, imgs[-1], root / "lib/modules" / ver, "cache")


def setup(series: str | None = None) -> SetupResult:
    """Provide a guest kernel of the series (`wanted_series`): reuse a suitable one from the cache or
    /boot, or download the distribution's kernel image package into the cache (never installed: /boot
    and the bootloader are not touched)."""
    t0 = time.monotonic()
    series = wanted_series(series)
    found = find_kernel(series)
    if found:
        return SetupResult("reused", found, f"found in {found.origin}", seconds=time.monotonic() - t0)
    pkg = _apt_kernel_package(series)
    cache = cache_dir()
    cache.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=cache, prefix=".download-") as tmp:
        os.chmod(tmp, 0o755)  # apt's _apt user may write here
        deb = _download(pkg, Path(tmp))
        size = deb.stat().st_size
        staging = Path(tmp) / "root"
        kernel = _unpack(deb, staging)
        final = cache / pkg
        if final.exists():
            shutil.rmtree(final)
        staging.rename(final)
    kernel = GuestKernel(kernel.version, final / "boot" / kernel.vmlinuz.name,
                         final / kernel.moddir.relative_to(staging), "cache")
    missing = sorted(set(REQUIRED_MODULES) - modules_in(kernel.moddir))
    if missing:
        raise EnvironmentProblem(f"{pkg} lacks modules {', '.join(missing)}",
                                 "set KPEMU_KERNEL_PACKAGE to a kernel package that has them")
    return SetupResult("downloaded", kernel, f"apt-get download {pkg}", pkg, size, time.monotonic() - t0)


def require_kernel(series: str | None = None) -> GuestKernel:
    """The guest kernel to boot (`find_kernel`); EnvironmentProblem naming the fix when there is none."""
    series = wanted_series(series)
    k = find_kernel(series)
    if k is None:
        if series is not None:
            raise EnvironmentProblem(
                f"no guest kernel {series} with {', '.join(REQUIRED_MODULES)} (looked in {cache_dir()} and /boot)",
                f"run `kpemu vm setup --kernel {series}` (it downloads Debian's kernel {series} package)")
        raise EnvironmentProblem(
            f"no guest kernel with {', '.join(REQUIRED_MODULES)} (looked in {cache_dir()} and /boot)",
            "run " + setup_hint("downloads Debian's kernel package"))
    return k


def status() -> dict[str, Any]:
    """Which guest kernel the vm runtime would boot, the cache, and every candidate with what it lacks."""
    k = find_kernel()
    return {
        "cache": str(cache_dir()),
        "series": wanted_series(),
        "kernel": None if k is None else {"version": k.version, "vmlinuz": str(k.vmlinuz),
                                          "modules": str(k.moddir), "origin": k.origin},
        "candidates": [{"version": c.version, "vmlinuz": str(c.vmlinuz), "lacks": lacks}
                       for c, lacks in list_kernels()],
    }
