"""The vm runtime: a virtme-ng guest booted from a distribution kernel that has what this one lacks.

The guest shares the host's filesystem (read-only, plus a few read-write directories), so the very
same code runs inside: kpemu's agent (kpemu.jobs.agent) on the standard library. Three jobs live here:

- getting a guest kernel: `find_kernel()` reuses one from the cache or /boot, `setup()` downloads
  Debian's kernel package with `apt-get download` and unpacks it with `dpkg-deb -x` into
  `$KPEMU_CACHE` (default /var/cache/kpemu/kernels), then runs `depmod` on the copy;
- booting a guest that runs a command: `boot()` (wait for it) and `start()` (return at once; the warm
  guest of kpemu.guest);
- knowing whether we already are the guest: `in_guest()`.

Nothing here prints: progress goes through a callback, the guest command's output to an optional
stream, failures are `EnvironmentProblem` (exit 3) with the reason and the fix.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import re
import shlex
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TextIO

from kpemu.errors import EnvironmentProblem, GuestHung
from kpemu.kernel import runowner
from kpemu.kernel.probe import GUEST_FEATURES, find_tool, kvm_usable, probe
from kpemu.system import python_hint, setup_hint

DEFAULT_CACHE = Path("/var/cache/kpemu/kernels")
# Modules a guest kernel must have (as .ko or built in) to be worth booting.
REQUIRED_MODULES = ("ip_vs", "ipip", "dummy", "vxlan", "br_netfilter")
# Loaded in the guest before the command runs (modprobe -a, one process). The rest (xt_*, ip_set_*,
# nft_*) the guest kernel loads on demand from the same tree, as iptables and ipset ask for it.
GUEST_MODULES = (*REQUIRED_MODULES, "ip_vs_rr", "ip_vs_wrr", "ip_vs_sh", "nf_conntrack")
# What iptables, ipset, tracing and conntrack will ask for: loaded by one modprobe in the background
# while the guest's command starts, instead of one modprobe the kernel spawns per module on demand.
PRELOAD_MODULES = (
    "nf_tables", "nft_compat", "nft_chain_nat", "nf_nat", "nft_ct", "nft_masq", "nft_nat", "nft_reject",
    "nft_reject_inet", "nft_numgen", "nft_fib_ipv4", "x_tables", "xt_comment", "xt_mark", "xt_MASQUERADE",
    "xt_addrtype", "xt_conntrack", "xt_statistic", "xt_recent", "xt_nat", "xt_tcpudp", "xt_multiport", "xt_set",
    "xt_TRACE", "xt_physdev", "ip_set", "ip_set_hash_ip", "ip_set_hash_ipport", "ip_set_hash_ipportip",
    "ip_set_hash_ipportnet", "ip_set_hash_net", "ip_set_bitmap_port", "nf_conntrack_netlink", "nfnetlink_log",
    "veth", "bridge", "iptable_nat", "iptable_filter", "iptable_raw", "iptable_mangle")
BOOT_TIMEOUT = 120.0  # seconds until the guest runs our script; about 10 s in TCG on 2 cores
LOCK_FILE = Path("/run/kpemu/guest.lock")
_MARK = ".kpemu-guest"  # prefix of the marker files in the output directory


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


@dataclass(frozen=True)
class GuestRun:
    """The outcome of one guest boot: the command's exit code and where the time went."""

    rc: int
    boot_seconds: float
    total_seconds: float
    console_log: Path
    output_log: Path
    kvm: bool


def in_guest() -> bool:
    """True inside a kpemu guest (the wrapper script sets KPEMU_IN_GUEST=1)."""
    return os.environ.get("KPEMU_IN_GUEST") == "1"


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


def find_kernel() -> GuestKernel | None:
    """The first suitable guest kernel (cache first, then /boot): it has every REQUIRED_MODULE."""
    for k in _candidates():
        if not set(REQUIRED_MODULES) - modules_in(k.moddir):
            return k
    return None


def list_kernels() -> list[tuple[GuestKernel, list[str]]]:
    """Every kernel found, with the required modules it lacks (empty list: suitable)."""
    return [(k, sorted(set(REQUIRED_MODULES) - modules_in(k.moddir))) for k in _candidates()]


# ---------------------------------------------------------------- getting a kernel


def _apt_kernel_package() -> str:
    """The versioned Debian kernel image package (linux-image-<abi>-<arch>) apt would install."""
    if os.environ.get("KPEMU_KERNEL_PACKAGE"):
        return os.environ["KPEMU_KERNEL_PACKAGE"]
    if not shutil.which("apt-cache") or not shutil.which("apt-get"):
        raise EnvironmentProblem("no guest kernel, and this is not a Debian/Ubuntu system (no apt)",
                                 f"unpack a kernel package with its modules into {cache_dir()}/NAME/")
    arch = subprocess.run(["dpkg", "--print-architecture"], capture_output=True, text=True,
                          check=False).stdout.strip() or "amd64"
    meta = f"linux-image-{arch}"
    for attempt in range(2):
        out = subprocess.run(["apt-cache", "depends", meta], capture_output=True, text=True,
                             check=False).stdout
        m = re.search(r"Depends: (linux-image-[0-9]\S*)", out)
        if m:
            return m.group(1)
        if attempt == 0:  # empty package lists (fresh container): refresh once
            subprocess.run(["apt-get", "update", "-qq"], capture_output=True, check=False)
    raise EnvironmentProblem(
        f"no guest kernel, and apt knows no {meta} package on this system",
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


def setup(if_needed: bool = False) -> SetupResult:
    """Provide a guest kernel. With `if_needed`, do nothing when this kernel already has everything.

    Reuses a suitable kernel from the cache or /boot; otherwise downloads the distribution's
    kernel image package into the cache (never installs it: /boot and the bootloader are not touched).
    """
    t0 = time.monotonic()
    if if_needed and not in_guest():
        caps = probe(kvm=False)
        if caps.root and not caps.missing(GUEST_FEATURES):
            return SetupResult("not-needed", find_kernel(),
                               f"this kernel has {', '.join(GUEST_FEATURES)}", seconds=time.monotonic() - t0)
    found = find_kernel()
    if found:
        return SetupResult("reused", found, f"found in {found.origin}", seconds=time.monotonic() - t0)
    pkg = _apt_kernel_package()
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


# ---------------------------------------------------------------- running in the guest


def _require_kernel() -> GuestKernel:
    k = find_kernel()
    if k is None:
        raise EnvironmentProblem(
            f"no guest kernel with {', '.join(REQUIRED_MODULES)} (looked in {cache_dir()} and /boot)",
            "run " + setup_hint("downloads Debian's kernel package"))
    return k


def _tools() -> tuple[str, str]:
    qemu = os.environ.get("KPEMU_QEMU") or find_tool("qemu-system-x86_64")
    if not qemu or not Path(qemu).exists():
        raise EnvironmentProblem("QEMU (qemu-system-x86_64) is not installed; the vm runtime needs it",
                                 setup_hint("installs qemu-system-x86"))
    vng = find_tool("vng")
    if not vng:
        raise EnvironmentProblem("virtme-ng (vng) is not installed",
                                 python_hint("virtme-ng>=1.30,<2"))
    return qemu, vng


def _script(argv: Sequence[str], out: Path, cwd: Path, modules: Sequence[str], env: dict[str, str]) -> str:
    exports = " ".join(f"{k}={shlex.quote(v)}" for k, v in sorted(env.items()))
    req = " ".join(REQUIRED_MODULES)
    return f"""#!/bin/sh
# Written by kpemu: runs inside the guest. Output goes to the host through {out}.
out={shlex.quote(str(out))}
exec >"$out/guest-output.log" 2>&1
: >"$out/{_MARK}-ready"
export {exports}
modprobe -a -q {" ".join(modules)} 2>/dev/null
modprobe -a -q {" ".join(PRELOAD_MODULES)} 2>/dev/null &
lacking=""
for m in {req}; do [ -d "/sys/module/$m" ] || modprobe -q "$m" 2>/dev/null || lacking="$lacking $m"; done
if [ -n "$lacking" ]; then echo "$lacking" >"$out/{_MARK}-lacking"; exit 0; fi
cd {shlex.quote(str(cwd))} || exit 0
: >"$out/{_MARK}-started"
# A session of its own, no terminal: nothing typed or sent on the guest's console can signal it.
setsid -w {shlex.join(argv)} </dev/null
echo $? >"$out/{_MARK}-rc"
"""


def _guest_env(kvm: bool) -> dict[str, str]:
    venv_bin = str(Path(sys.executable).parent)
    path = os.environ.get("PATH", "/usr/sbin:/usr/bin:/sbin:/bin")
    # not the host's owner token: no process in the guest is a host process's helper
    env = {k: v for k, v in os.environ.items() if k.startswith("KPEMU_") and k not in ("KPEMU_RUNTIME", runowner.ENV)}
    env.update({"PATH": f"{venv_bin}:{path}:/usr/sbin:/sbin", "HOME": "/root", "KPEMU_IN_GUEST": "1",
                "KPEMU_RUNTIME": "host", "PYTHONDONTWRITEBYTECODE": "1", "LANG": "C.UTF-8",
                # software emulation runs every process ~10x slower: stretch kpemu's readiness timeouts
                "KPEMU_SLOWDOWN": os.environ.get("KPEMU_SLOWDOWN") or ("1" if kvm else "10")})
    for k in ("TERM", "COLUMNS", "NO_COLOR", "FORCE_COLOR"):
        if k in os.environ:
            env[k] = os.environ[k]
    return env


def lock_guest(progress: Callable[[str], None] | None = None, wait: bool = True) -> int | None:
    """An open, exclusively locked descriptor of the guest lock (None when busy and not `wait`).

    The descriptor is handed to the guest's QEMU (inherited through vng), so the lock is held for as
    long as a guest runs, even when the kpemu process that started it is gone.
    """
    LOCK_FILE.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(LOCK_FILE, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        if not wait:
            os.close(fd)
            return None
        if progress:
            progress("waiting for another kpemu guest to finish")
        fcntl.flock(fd, fcntl.LOCK_EX)
    return fd


def guest_running() -> bool:
    """Whether some guest holds the lock now."""
    fd = lock_guest(wait=False)
    if fd is None:
        return True
    os.close(fd)
    return False


def vng_command(kernel: GuestKernel, script: Path, rw_dirs: Sequence[Path], kvm: bool,
                qemu: str, vng: str, cpus: int = 2, memory: str = "2G") -> list[str]:
    """The vng command line: no network device (vng adds `-net none` when --network is absent)."""
    cmd = [vng, "--run", str(kernel.vmlinuz), "--force-9p", "--cpus", str(cpus), "--memory", memory,
           "--qemu", qemu, "--verbose", "--name", "kpemu-guest"]
    if not kvm:
        cmd.append("--disable-kvm")
    if kernel.origin == "cache":
        # The guest mounts a tmpfs over /var/cache; export the kernel's tree again, read-only.
        cmd += ["--rodir", str(kernel.root)]
    for d in rw_dirs:
        cmd += ["--rwdir", str(d)]
    cmd += ["--exec", f"sh {shlex.quote(str(script))}"]
    return cmd


def _tail(path: Path, lines: int = 25) -> str:
    try:
        text = path.read_text(errors="replace").splitlines()
    except FileNotFoundError:
        return "(no console output)"
    return "\n".join(text[-lines:])


def _kill(proc: subprocess.Popen) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGKILL)  # vng and its qemu: the session we started
    proc.wait()


def _watchdog(pgid: int) -> tuple[subprocess.Popen, int]:
    """A process that kills the guest's process group once this process is gone (however it died).

    It blocks reading a pipe whose only writer is this process: the kernel closes the write end
    when this process exits, SIGKILL included, and the read returns.
    """
    r, w = os.pipe()
    dog = subprocess.Popen(["sh", "-c", f"read _; kill -KILL -{pgid} 2>/dev/null"], stdin=r,
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    os.close(r)
    return dog, w


def _stop_watchdog(dog: subprocess.Popen, w: int) -> None:
    dog.kill()
    dog.wait()
    os.close(w)


@dataclass
class Started:
    """A guest that was started: its vng process (leader of its own session) and its files."""

    proc: subprocess.Popen
    out: Path
    console: Path
    output: Path
    kvm: bool
    kernel: GuestKernel
    t0: float
    wall0: float


def start(argv: Sequence[str], out_dir: Path, *, rw_dirs: Sequence[Path] = (),
          modules: Sequence[str] = GUEST_MODULES, progress: Callable[[str], None] | None = None,
          cwd: Path | None = None, lock_fd: int, owner: str | None = None) -> Started:
    """Boot the guest running `argv` (from `cwd`) and return at once; the caller holds `lock_fd`, which
    the guest inherits. `out_dir` (created, shared read-write) receives guest-console.log and
    guest-output.log, and vng's temporary files; `rw_dirs` are further directories the guest may
    write. No network device. `owner` replaces the owner token the guest's processes carry (the
    warm guest outlives the command that starts it)."""
    qemu, vng = _tools()
    kernel = _require_kernel()
    out = Path(out_dir).resolve()
    out.mkdir(parents=True, exist_ok=True)
    cwd = (cwd or Path.cwd()).resolve()
    console, output = out / "guest-console.log", out / "guest-output.log"
    script = out / f"{_MARK}.sh"
    rws = [out] + [Path(d).resolve() for d in rw_dirs if Path(d).resolve() != out]
    for f in out.glob(f"{_MARK}*"):
        f.unlink()
    output.write_text("")
    kvm = kvm_usable(qemu, kernel.vmlinuz)[0]
    script.write_text(_script(argv, out, cwd, modules, _guest_env(kvm)))
    for d in rws:
        d.mkdir(parents=True, exist_ok=True)
    cmd = vng_command(kernel, script, rws, kvm, qemu, vng)
    env = dict(os.environ, PATH=f"{Path(vng).parent}:{os.environ.get('PATH', '/usr/bin:/bin')}",
               TMPDIR=str(out))  # vng's virtme_ret* files go with the run's folder, however vng ends
    if owner is not None:
        env[runowner.ENV] = owner
    if progress:
        progress(f"booting {kernel.version} ({'KVM' if kvm else 'software emulation'})")
    t0, wall0 = time.monotonic(), time.time()
    with open(console, "wb") as log:
        log.write(("$ " + shlex.join(cmd) + "\n").encode())
        log.flush()
        proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=log, stderr=log, env=env, cwd=cwd,
                                start_new_session=True, pass_fds=(lock_fd,))
    return Started(proc, out, console, output, kvm, kernel, t0, wall0)


def boot(argv: Sequence[str], out_dir: Path, timeout: float = 1800.0, *,
         rw_dirs: Sequence[Path] = (), modules: Sequence[str] = GUEST_MODULES,
         progress: Callable[[str], None] | None = None, echo: TextIO | None = None,
         boot_timeout: float | None = None, cwd: Path | None = None,
         on_poll: Callable[[], None] | None = None, hung: Callable[[], str | None] | None = None) -> GuestRun:
    """Boot the guest once, run `argv` in it (from `cwd`, default the current directory), return.

    `out_dir` (created) is shared read-write and receives guest-console.log (kernel console) and
    guest-output.log (the command's stdout and stderr, also copied live to `echo`). `rw_dirs` are
    further host directories the command writes to. The guest gets no network device, holds the
    guest lock while it runs, and is killed with this process (`_watchdog`). `on_poll` is called
    about ten times a second while the guest runs (to show progress); `hung`, as often, says why the
    guest counts as hung (None while it does not): it is killed and GuestHung raised.
    """
    boot_timeout = boot_timeout or float(os.environ.get("KPEMU_BOOT_TIMEOUT") or BOOT_TIMEOUT)
    fd = lock_guest(progress)
    try:
        g = start(argv, out_dir, rw_dirs=rw_dirs, modules=modules, progress=progress, cwd=cwd, lock_fd=fd)
    finally:
        os.close(fd)  # the guest holds it now (or nobody does)
    dog, w = _watchdog(g.proc.pid)
    out, proc = g.out, g.proc
    booted: float | None = None
    pos = 0
    try:
        while True:
            done = proc.poll() is not None
            if booted is None and (out / f"{_MARK}-started").exists():
                booted = time.monotonic() - g.t0
                if progress:
                    progress(f"guest up in {booted:.1f}s; running {shlex.join(argv)}")
            if echo is not None:
                pos = _copy_new(g.output, pos, echo)
            if on_poll is not None:
                on_poll()
            if done:
                break
            now = time.monotonic() - g.t0
            if not (out / f"{_MARK}-ready").exists() and now > boot_timeout:
                _kill(proc)
                raise EnvironmentProblem(
                    f"the guest did not boot within {boot_timeout:.0f}s; console ({g.console}) ends:\n"
                    + _tail(g.console), "check the console log; raise KPEMU_BOOT_TIMEOUT on a slow machine")
            if hung is not None and (why := hung()) is not None:
                _kill(proc)
                raise GuestHung(f"the guest hung ({why}); console ({g.console}) ends:\n" + _tail(g.console, 8),
                                "run again: the next run boots a fresh guest")
            if now > timeout:
                _kill(proc)
                raise EnvironmentProblem(f"the guest command did not finish within {timeout:.0f}s",
                                         f"see {g.output} and {g.console}")
            time.sleep(0.1)
    except BaseException:
        if proc.poll() is None:
            _kill(proc)
        raise
    finally:
        _stop_watchdog(dog, w)
    total = time.monotonic() - g.t0
    lacking = out / f"{_MARK}-lacking"
    if lacking.exists():
        raise EnvironmentProblem(f"guest kernel {g.kernel.version} lacks module(s){lacking.read_text().rstrip()}",
                                 "use another guest kernel: KPEMU_KERNEL_PACKAGE=... kpemu vm setup")
    rc_file, started = out / f"{_MARK}-rc", out / f"{_MARK}-started"
    if booted is None and started.exists():  # the command ended between two polls
        booted = max(0.0, started.stat().st_mtime - g.wall0)
    if booted is None or not rc_file.exists():
        raise EnvironmentProblem(
            f"the guest stopped (vng exit {proc.returncode}) before the command finished; console ends:\n"
            + _tail(g.console), f"see {g.console}")
    return GuestRun(int(rc_file.read_text().strip() or 1), booted, total, g.console, g.output, g.kvm)


def _copy_new(path: Path, pos: int, echo: TextIO) -> int:
    try:
        with open(path, "rb") as fh:
            fh.seek(pos)
            data = fh.read()
    except FileNotFoundError:
        return pos
    if data:
        echo.write(data.decode(errors="replace"))
        echo.flush()
    return pos + len(data)


def status() -> dict:
    """Which kernel the vm runtime would boot, the cache, QEMU, vng and KVM (for `kpemu vm status`)."""
    k = find_kernel()
    qemu = find_tool("qemu-system-x86_64")
    kvm_ok, kvm_how = kvm_usable(qemu, k.vmlinuz if k else None) if qemu else (False, "no qemu")
    return {
        "cache": str(cache_dir()),
        "kernel": None if k is None else {"version": k.version, "vmlinuz": str(k.vmlinuz),
                                          "modules": str(k.moddir), "origin": k.origin},
        "candidates": [{"version": c.version, "vmlinuz": str(c.vmlinuz), "lacks": lacks}
                       for c, lacks in list_kernels()],
        "qemu": qemu, "vng": find_tool("vng"), "kvm": kvm_ok, "kvm_detail": kvm_how,
        "in_guest": in_guest(),
    }
