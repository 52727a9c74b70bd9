"""Booting the vm runtime's guest: a virtme-ng guest (QEMU) that runs one command, and the tools it needs.

The guest shares the host's filesystem (read-only, plus a few read-write directories), so the very
same code runs inside: kpemu's agent (kpemu.jobs.agent) on the standard library. `boot()` waits for
the command; `start()` returns at once (the warm guest of kpemu.runtimes.guest). The guest lock is
held for as long as a guest runs, and a watchdog kills the guest when the kpemu process that booted
it is gone. The guest's script sets KPEMU_IN_GUEST=1, which kpemu.runtimes.in_guest reads there.

Nothing here prints: progress goes through a callback, the guest command's output to an optional
stream, failures are `EnvironmentProblem` (exit 3) with the reason and the fix.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import os
import re
import shlex
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TextIO

from kpemu.errors import EnvironmentProblem, GuestHung
from kpemu.kernel import runowner
from kpemu.runtimes.kernels import REQUIRED_MODULES, GuestKernel, require_kernel
from kpemu.system import python_hint, setup_hint

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
KVM_CACHE_DIR = Path("/run/kpemu")


@dataclass(frozen=True)
class GuestRun:
    """The outcome of one guest boot: the command's exit code and where the time went."""

    rc: int
    boot_seconds: float
    total_seconds: float
    console_log: Path
    output_log: Path
    kvm: bool


def find_tool(name: str) -> str | None:
    """`name` on PATH, else next to this Python (the venv's bin, where `vng` lives), else None."""
    found = shutil.which(name)
    if found:
        return found
    beside = Path(sys.executable).parent / name
    return str(beside) if beside.is_file() and os.access(beside, os.X_OK) else None


def kvm_usable(qemu: str = "qemu-system-x86_64", kernel: Path | None = None,
               wait: float = 4.0) -> tuple[bool, str]:
    """Whether QEMU really runs a guest with KVM here.

    `/dev/kvm` existing proves little: on some hosts QEMU starts with accel=kvm and then the guest
    never leaves its real-mode setup code. With `kernel`, boot it with KVM and wait up to `wait`
    seconds for its first console line ("Linux version", printed from long mode; under working KVM
    it appears in well under a second). Without a kernel only QEMU's start is checked. The answer
    is cached per boot of this machine in /run/kpemu (a probe costs `wait` seconds when KVM hangs).
    """
    exe = shutil.which(qemu)
    if exe is None:
        return False, f"{qemu} not found"
    if not os.access("/dev/kvm", os.R_OK | os.W_OK):
        return False, "/dev/kvm not accessible"
    if kernel is None:
        return _kvm_starts(exe)
    cache = KVM_CACHE_DIR / f"kvm-{hashlib.sha1(f'{exe}:{kernel}'.encode()).hexdigest()[:12]}.json"
    with contextlib.suppress(OSError, ValueError, KeyError):
        got = json.loads(cache.read_text())
        return bool(got["ok"]), str(got["how"])
    ok, how = _kvm_boots(exe, kernel, wait)
    with contextlib.suppress(OSError):
        cache.parent.mkdir(parents=True, exist_ok=True)
        cache.write_text(json.dumps({"ok": ok, "how": how}))
    return ok, how


def _kvm_starts(exe: str, wait: float = 1.5) -> tuple[bool, str]:
    argv = [exe, "-machine", "accel=kvm", "-cpu", "host", "-smp", "2", "-m", "64", "-nodefaults",
            "-display", "none", "-serial", "none", "-monitor", "none", "-no-reboot"]
    proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE, text=True)
    try:
        _, err = proc.communicate(timeout=wait)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.communicate()
        return True, f"qemu -machine accel=kvm -cpu host ran {wait:g}s"
    lines = [ln for ln in err.strip().splitlines() if ln]
    return False, lines[-1] if lines else f"qemu exited {proc.returncode}"


def _kvm_boots(exe: str, kernel: Path, wait: float) -> tuple[bool, str]:
    argv = [exe, "-machine", "accel=kvm", "-cpu", "host", "-m", "256", "-nodefaults", "-display", "none",
            "-monitor", "none", "-no-reboot", "-serial", "stdio", "-kernel", str(kernel),
            "-append", "console=ttyS0 panic=-1"]
    proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    assert proc.stdout is not None
    os.set_blocking(proc.stdout.fileno(), False)
    seen, t0 = b"", time.monotonic()
    try:
        while time.monotonic() - t0 < wait and proc.poll() is None:
            seen += proc.stdout.read() or b""
            if b"Linux version" in seen:
                return True, f"{kernel.name} printed its first line {time.monotonic() - t0:.2f}s after start"
            time.sleep(0.05)
    finally:
        proc.kill()
        proc.wait()
    tail = seen.decode(errors="replace").strip().splitlines()[-1:] or ["nothing"]
    return False, f"with accel=kvm the guest printed no kernel line in {wait:g}s (last: {tail[0][:80]})"


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


def console_tail(path: Path, lines: int = 25) -> str:
    """The last `lines` lines of a guest's log (its console, its output), for an error message."""
    try:
        text = path.read_text(errors="replace").splitlines()
    except FileNotFoundError:
        return "(no console output)"
    return "\n".join(text[-lines:])


# The first line of a kernel oops or panic report (the lines after it name the fault, RIP and call trace).
_OOPS = re.compile(r"\] (BUG: |Oops: |general protection fault|kernel BUG at |WARNING: CPU: |Kernel panic - )")


def crash_report(path: Path, lines: int = 24) -> str:
    """A dead guest's console for an error message: from the first oops or panic line (what failed, where,
    the call trace's start) when there is one, else its last lines."""
    try:
        text = path.read_text(errors="replace").splitlines()
    except FileNotFoundError:
        return "(no console output)"
    start = next((i for i, line in enumerate(text) if _OOPS.search(line)), None)
    if start is None:
        return "\n".join(text[-lines:])
    report = text[start:start + lines]
    return "\n".join(report + (["...", *text[-2:]] if start + lines < len(text) - 2 else text[start + lines:]))


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
    kernel = require_kernel()
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
                    + console_tail(g.console), "check the console log; raise KPEMU_BOOT_TIMEOUT on a slow machine")
            if hung is not None and (why := hung()) is not None:
                _kill(proc)
                raise GuestHung(f"the guest hung ({why}); console ({g.console}) ends:\n" + console_tail(g.console, 8),
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
            + console_tail(g.console), f"see {g.console}")
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


def tools_status(kernel: GuestKernel | None) -> dict[str, Any]:
    """QEMU, vng, and whether QEMU runs `kernel` with KVM here (for `kpemu vm status`)."""
    qemu = find_tool("qemu-system-x86_64")
    kvm_ok, kvm_how = kvm_usable(qemu, kernel.vmlinuz if kernel else None) if qemu else (False, "no qemu")
    return {"qemu": qemu, "vng": find_tool("vng"), "kvm": kvm_ok, "kvm_detail": kvm_how}
