"""The vm runtime: labs and runs in a guest kernel, through the warm guest when one is up, else one
cold boot for all of a run's requests.

A warm guest (`kpemu vm up`) boots once and keeps an agent (kpemu.jobs.agent) waiting on the
exchange directory /run/kpemu/vm; `run`, `deploy`, `exec`, `inspect` and `destroy` send it
requests. It stops on `kpemu vm down`, `kpemu destroy --all`, or after `idle` seconds without a
request; one that died is noticed (its QEMU is gone, or its heartbeat stopped) and forgotten, and
the next request boots a fresh guest. A cold boot queues the requests in a directory of the run,
boots a guest whose agent answers them and exits, and is killed with this process.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

import kpemu.runtimes.kernels as kernels
import kpemu.runtimes.qemu as qemu
from kpemu.docker.engine import blocker
from kpemu.errors import ApplyError, EnvironmentProblem, GuestHung, KpemuError
from kpemu.hang import Watch
from kpemu.jobs import exchange
from kpemu.jobs.schema import Reply
from kpemu.kernel import lab as kernel_lab
from kpemu.kernel import runowner
from kpemu.kernel.netfilter import resolve_random_fully
from kpemu.kernel.nfacct import with_nfacct
from kpemu.pace import scaled
from kpemu.runtimes.base import Executed, Gathered, Progress, Work, quiet

if TYPE_CHECKING:
    from kpemu.model.topology import Topology

WARM_DIR = Path(os.environ.get("KPEMU_VM_DIR", "/run/kpemu/vm"))
GUEST_FOLDER = "guest"  # a cold guest's own files, in the run's folder (or the runs folder, for several)
GUEST_FILE = "guest.json"
IDLE_SECONDS = 1800.0
STOP_WAIT = 20.0
WARM_OWNER = "warm-guest"  # the owner its processes carry: it outlives `kpemu vm up`, until vm down or idle

def agent_argv(root: Path, once: bool, idle: float = IDLE_SECONDS) -> list[str]:
    """The guest's command: the agent, on the standard library only (`-S`: no site-packages)."""
    src = str(Path(__file__).resolve().parents[2])
    code = f"import sys; sys.path.insert(0, {src!r}); from kpemu.jobs.agent import main; sys.exit(main())"
    mode = ["--once"] if once else ["--serve", "--idle", f"{idle:g}"]
    return [sys.executable, "-S", "-c", code, str(root), *mode]


# ---------------------------------------------------------------- the warm guest


def _alive(pid: int) -> bool:
    """Whether process `pid` runs (a zombie, killed but not yet reaped by its parent, does not)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rpartition(")")[2].split()[0] != "Z"


def _forget(root: Path = WARM_DIR) -> None:
    for name in (GUEST_FILE, exchange.AGENT, exchange.HEARTBEAT):
        (root / name).unlink(missing_ok=True)
    for leftover in root.glob("virtme_ret*"):  # vng's temporary files (TMPDIR is the guest's folder)
        leftover.unlink(missing_ok=True)
    for sub in (exchange.REQUESTS, exchange.RUNNING, exchange.RESULTS, exchange.WORK):
        shutil.rmtree(root / sub, ignore_errors=True)


def warm_status() -> dict[str, Any] | None:
    """The warm guest (pid, kernel, uptime, idle limit, heartbeat age), or None when none is up.

    A recorded guest whose QEMU is gone is forgotten here: that is how a dead guest is noticed.
    """
    try:
        info = json.loads((WARM_DIR / GUEST_FILE).read_text())
    except (FileNotFoundError, json.JSONDecodeError):
        return None
    if not _alive(info["pid"]):
        _forget()
        return None
    with contextlib.suppress(FileNotFoundError, json.JSONDecodeError):
        info["agent"] = json.loads((WARM_DIR / exchange.AGENT).read_text())
    info["uptime"] = time.time() - info["started"]
    info["heartbeat_age"] = exchange.heartbeat_age(WARM_DIR)
    info["dir"] = str(WARM_DIR)
    return info


def up(progress: Progress = quiet, idle: float = IDLE_SECONDS) -> dict[str, Any]:
    """Boot the warm guest (or return the one that is up) once its agent answers."""
    st = warm_status()
    if st is not None:
        if why := _other_kernel(st):
            raise EnvironmentProblem(f"{why}, and one guest runs at a time", "kpemu vm down, then kpemu vm up "
                                     f"--kernel {kernels.wanted_series()}")
        return st
    fd = qemu.lock_guest(progress)
    try:
        _forget()
        exchange.prepare(WARM_DIR)
        g = qemu.start(agent_argv(WARM_DIR, once=False, idle=idle), WARM_DIR, progress=progress, lock_fd=fd,
                     owner=WARM_OWNER)
    finally:
        os.close(fd)
    exchange.write_json(WARM_DIR / GUEST_FILE, {"pid": g.proc.pid, "started": time.time(), "idle": idle,
                                               "kernel": g.kernel.version, "kvm": g.kvm})
    limit = float(os.environ.get("KPEMU_BOOT_TIMEOUT") or qemu.BOOT_TIMEOUT)
    while not (WARM_DIR / exchange.AGENT).exists():
        if g.proc.poll() is not None or time.monotonic() - g.t0 > limit:
            _kill_group(g.proc.pid)
            _forget()
            raise EnvironmentProblem("the warm guest did not start its agent; console ends:\n"
                                     + qemu.console_tail(g.console), f"see {g.console} and {g.output}")
        time.sleep(0.1)
    progress(f"warm guest up in {time.monotonic() - g.t0:.1f}s (stops after {idle:g}s idle; kpemu vm down)")
    return warm_status() or {}


def _kill_group(pid: int) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.killpg(pid, signal.SIGKILL)


def down(progress: Progress = quiet) -> bool:
    """Stop the warm guest (asks its agent, then kills its QEMU); False when none was up."""
    st = warm_status()
    if st is None:
        _forget()
        return False
    exchange.submit(WARM_DIR, "stop")
    deadline = time.monotonic() + scaled(STOP_WAIT) / 5
    while _alive(st["pid"]) and time.monotonic() < deadline:
        time.sleep(0.1)
    if _alive(st["pid"]):
        _kill_group(st["pid"])
        while _alive(st["pid"]) and time.monotonic() < deadline + 5:
            time.sleep(0.05)
    _forget()
    progress("warm guest stopped")
    return True


def request(kind: str, progress: Progress = quiet, timeout: float = 1800.0, **fields: Any) -> tuple[Path, Reply]:
    """Send one request to the warm guest (`fields`: kpemu.jobs.schema.Request's) and wait for its reply;
    (work directory, reply).

    EnvironmentProblem (exit 3) when no guest is up, or it dies or hangs meanwhile.
    """
    st = warm_status()
    if st is None:
        raise EnvironmentProblem("no warm guest is up", "kpemu vm up")
    rid = exchange.submit(WARM_DIR, kind, **fields)
    work = WARM_DIR / exchange.WORK / rid
    t0, pos, silence = time.monotonic(), 0, Watch(WARM_DIR)
    while True:
        res = exchange.result(WARM_DIR, rid)
        pos = _echo_log(work / "log", pos, progress)
        if res is not None:
            return work, res
        died, hung = None, silence()
        if not _alive(st["pid"]):
            died = "its QEMU exited"
        elif time.monotonic() - t0 > timeout:
            died = f"the request took more than {timeout:.0f}s"
        if died or hung:
            _kill_group(st["pid"])
            kept = _keep_console()
            _forget()
            error = GuestHung if hung else EnvironmentProblem
            raise error(f"the warm guest {'hung' if hung else 'died'} during {kind} ({died or hung}); its console "
                        f"({kept}):\n{qemu.crash_report(kept)}", "run again: the next run boots a fresh guest")
        time.sleep(0.05)


def _keep_console() -> Path:
    """A copy of the dead warm guest's console beside WARM_DIR, which the next boot rewrites."""
    kept = WARM_DIR.with_name(WARM_DIR.name + "-last-died-console.log")
    with contextlib.suppress(OSError):
        shutil.copyfile(WARM_DIR / "guest-console.log", kept)
    return kept


def _echo_log(path: Path, pos: int, progress: Progress) -> int:
    try:
        with open(path) as fh:
            fh.seek(pos)
            text = fh.read()
    except FileNotFoundError:
        return pos
    for line in text.splitlines():
        progress(line)
    return pos + len(text.encode())


# ---------------------------------------------------------------- cold boots


def cold(requests: list[tuple[str, dict[str, Any]]], root: Path, progress: Progress = quiet,
         timeout: float = 1800.0) -> list[tuple[Path, Reply]]:
    """Queue the requests in `root`, boot one guest whose agent answers them, and return
    (work directory, result) per request, in order."""
    shutil.rmtree(root, ignore_errors=True)
    exchange.prepare(root)
    rids = [exchange.submit(root, kind, **fields) for kind, fields in requests]
    positions = dict.fromkeys(rids, 0)

    def poll() -> None:
        for rid in rids:
            positions[rid] = _echo_log(root / exchange.WORK / rid / "log", positions[rid], progress)

    try:
        run = qemu.boot(agent_argv(root, once=True), root, timeout, progress=progress, on_poll=poll,
                      hung=Watch(root))
    except GuestHung as e:
        poll()
        for rid in rids:  # the agent answers in order: the ones before the first unanswered
            if (res := exchange.result(root, rid)) is None:
                break
            e.answered.append((root / exchange.WORK / rid, res))
        raise
    poll()
    out = []
    for rid in rids:
        res = exchange.result(root, rid)
        if res is None:
            raise EnvironmentProblem(f"the guest answered no {rid} (agent exit {run.rc}); output ends:\n"
                                     + qemu.console_tail(run.output_log, 12),
                                     f"see {run.output_log} and {run.console_log}")
        out.append((root / exchange.WORK / rid, res))
    return out


def _other_kernel(st: dict[str, Any]) -> str | None:
    """Why the warm guest `st` does not serve this process: it runs another kernel series than the one asked
    for (`kernels.wanted_series`), else None."""
    series = kernels.wanted_series()
    if series is None or kernels.series_of(str(st["kernel"])) == series:
        return None
    return f"the warm guest runs kernel {st['kernel']}, and kernel {series} is asked for"


def current(progress: Progress = quiet) -> dict[str, Any] | None:
    """The warm guest, restarted first when its agent runs other kpemu code than this; None when none is up.
    One guest runs at a time (the guest lock): a warm guest of another kernel series than the one asked for
    is an EnvironmentProblem naming both, not a cold boot that would wait for it."""
    st = warm_status()
    if st is not None and (why := _other_kernel(st)):
        raise EnvironmentProblem(f"{why}, and one guest runs at a time", "kpemu vm down (or run without --kernel "
                                 f"{kernels.wanted_series()})")
    if st is not None and st.get("agent", {}).get("code") not in (None, exchange.code_fingerprint()):
        progress("the warm guest runs other kpemu code than this checkout: restarting it")
        down()
        st = up(progress, st["idle"])
    return st


def send(requests: list[tuple[str, dict[str, Any]]], cold_root: Path, progress: Progress = quiet,
         notice: Progress = quiet) -> tuple[str, list[tuple[Path, Reply]]]:
    """Requests to the warm guest if one is up, else to one cold boot; (how, results).

    A guest that hangs (its agent stops beating) is killed, and the requests it had not answered are
    sent once more, to a fresh cold guest: the emulated machine, not the lab, failed. `notice` is told
    (to be shown for good, not as progress). A second hang fails the run (exit 3)."""
    how = "warm" if current(progress) is not None else "cold"
    answers: list[tuple[Path, Reply]] = []
    try:
        if how == "warm":
            for kind, fields in requests:
                answers.append(request(kind, progress, **fields))
        else:
            answers = cold(requests, cold_root, progress)
    except GuestHung as e:
        answers += e.answered
        rest = requests[len(answers):]
        notice(f"kpemu: {e.reason}\nkpemu: the {len(rest)} request(s) it had not answered go to a fresh guest, "
               "once")
        answers += cold(rest, cold_root.with_name(f"{cold_root.name}-again"), progress)
        how += " guest hung; ran again in a fresh cold"
    return how, answers


def nfacct_supported() -> bool:
    """Whether the guest kernel can create kube-proxy's nfacct counters (it has nfnetlink_acct and xt_nfacct)."""
    k = kernels.find_kernel()
    return k is not None and {"nfnetlink_acct", "xt_nfacct"} <= kernels.modules_in(k.moddir)


def kernel_release() -> str:
    """The release the guest runs (the warm guest's, else the kernel a cold boot would use)."""
    st = warm_status()
    if st is not None and _other_kernel(st) is None:
        return str(st["kernel"])
    return kernels.require_kernel().version


# ---------------------------------------------------------------- the runtime


@dataclass(frozen=True)
class GuestRuntime:
    """The vm runtime (kpemu.runtimes.base.Runtime): labs in the guest kernel. A run's jobs go to the warm
    guest, else to one cold boot for all of them; labs that stay up live in the warm guest."""

    name: str = "vm"
    batched: bool = True
    streams: bool = False
    keeps_labs: bool = False

    def refuses(self, topo: Topology) -> tuple[str, str] | None:
        """Container members need the host's kernel (kpemu.docker.engine.blocker)."""
        return blocker(bool(topo.containers()), guest_kernel=True)

    def resolve(self, topo: Topology) -> Topology:
        """randomFully from the iptables version, nfacct from what the guest kernel's modules can create."""
        return with_nfacct(resolve_random_fully(topo), nfacct_supported)

    def kernel_release(self) -> str:
        """The guest's release (`kernel_release`)."""
        return kernel_release()

    def collect(self, jobs: Sequence[Work], work_root: Path, progress: Progress = quiet,
                notice: Progress = quiet) -> list[Gathered | KpemuError]:
        """The jobs in the guest (`send`: warm, cold, or again after a hang, told to `notice`; a cold guest's
        files in `work_root`/guest/, a second one's in guest-again/), then each
        one's files moved into its output folder and its captures rendered as text here (tcpdump starts
        far faster on the host). A job the guest failed is that job's error."""
        from kpemu.capture.tcpdump import render_pcaps
        from kpemu.jobs.execute import prepare_out

        reqs = [("collect", {"job": replace(w.job, render=False, in_guest=True)}) for w in jobs]
        how, answers = send(reqs, work_root / GUEST_FOLDER, progress, notice)
        out: list[Gathered | KpemuError] = []
        for w, (work, res) in zip(jobs, answers, strict=True):
            if res.rc != 0:
                out.append(EnvironmentProblem(f"{w.name}: in the guest: {res.error}", f"see {work}"))
                continue
            prepare_out(w.out)
            for item in work.iterdir():
                dest = w.out / ("guest-progress.log" if item.name == "log" else item.name)
                shutil.rmtree(dest, ignore_errors=True)
                shutil.move(str(item), dest)
            render_pcaps(sorted((w.out / "pcaps").glob("*.pcap")), w.out / "capture")
            out.append(Gathered(f"{how} guest", f"see {w.out / 'guest'} for the guest's logs"))
        return out

    def could_not_run(self, what: str, reason: str, error: KpemuError) -> str:
        """`<what> needs the guest kernel (<reason>), and the guest could not run: <error>`."""
        return f"{what} needs the guest kernel ({reason}), and the guest could not run: {error}"

    def deploy(self, topo: Topology, source: str, reason: str, say: Progress, serve: bool = False) -> str:
        """Build a lab in the warm guest (booting one when none is up); it stays until destroyed.

        The rules the guest's kernel read back are checked here against kube-proxy's text; on a
        difference the lab is removed again and ApplyError names the first differing line.
        """
        from kpemu.jobs.build import deploy_job, release_tuple
        from kpemu.jobs.verify import check_saved_rules
        from kpemu.labplan import lab_plan

        say(f"runtime: vm ({reason})")

        def progress(msg: str) -> None:
            say(f"vm: {msg}")

        if current(progress) is None:
            progress("no warm guest is up: starting one (it stays up for further commands; kpemu vm down stops it)")
            up(progress)
        topo = self.resolve(topo)
        job = deploy_job(lab_plan(topo, release_tuple(kernel_release())), source, serve)
        work, res = request("deploy", progress, job=job)
        if res.rc != 0:
            raise EnvironmentProblem(f"deploy in the guest failed: {res.error}", f"see {work}")
        try:
            check_saved_rules(job.readback, work / "rules")
        except ApplyError:
            request("destroy", lab=topo.name)
            raise
        return (f"lab {topo.name} deployed in the guest: {len(res.namespaces)} namespaces in {res.seconds or 0:.2f}s; "
                f"kpemu exec/inspect/destroy {topo.name} reach it there")

    def destroy(self, lab: str) -> str:
        """Remove the lab from the warm guest; when the guest has none of it, what this kernel has marked
        as the lab's (a lab whose state file is gone) is removed here instead."""
        kernel_lab.require_root()
        res = lab_request("destroy", lab=lab)
        if res is not None and res.removed:
            return f"in the guest: {res.summary}"
        return kernel_lab.destroy(lab).summary()

    def exec(self, lab: str, member: str, argv: list[str]) -> Executed:
        """Run `argv` in a member of a lab in the warm guest; its output comes back with the exit code."""
        res = request("exec", lab=lab, member=member, argv=tuple(argv))[1]
        return Executed(res.rc, res.stdout, res.stderr + (res.error + "\n" if res.error else ""))

    def inspect(self, lab: str | None) -> dict[str, Any]:
        """The warm guest's labs (each marked runtime vm); none when no warm guest is up."""
        res = lab_request("inspect", lab=lab)
        data = (res.data if res is not None else None) or {"labs": [], "orphans": []}
        for entry in data.get("labs", []):
            entry["runtime"] = "vm"
        return data


def lab_request(kind: str, **fields: Any) -> Reply | None:
    """A lab request (destroy, exec, inspect) to the warm guest; None when no warm guest is up."""
    if warm_status() is None:
        return None
    return request(kind, **fields)[1]


def stray_guests() -> list[int]:
    """QEMU (or vng) processes that hold the guest lock: every kpemu guest, warm or cold."""
    found = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            fds = os.listdir(f"/proc/{pid}/fd")
        except OSError:
            continue
        for fd in fds:
            with contextlib.suppress(OSError):
                if os.readlink(f"/proc/{pid}/fd/{fd}") == str(qemu.LOCK_FILE):
                    found.append(int(pid))
                    break
    return [p for p in found if p != os.getpid()]


def _guest_owner(pid: int) -> str | None:
    """The owner token a guest's process carries (None: unreadable, or a guest of an older kpemu)."""
    try:
        return runowner.owner_in_environ(Path(f"/proc/{pid}/environ").read_bytes())
    except OSError:
        return None


def stop_all() -> tuple[list[int], list[str]]:
    """For `destroy --all`: stop the warm guest unless a live kpemu process waits on one of its requests,
    and kill every other guest whose kpemu process is gone; (pids killed, guests left alone and why)."""
    left = []
    users = [t for t in exchange.waiting(WARM_DIR) if runowner.alive(t)] if warm_status() is not None else []
    if users:
        left.append(f"the warm guest: kpemu pid {', '.join(str(runowner.parse_token(t)) for t in users)} "
                    "waits on it (kpemu vm down stops it)")
    else:
        down()
    killed = []
    for pid in stray_guests():
        owner = _guest_owner(pid)
        if owner == WARM_OWNER and users:
            continue
        if owner is not None and runowner.alive(owner):
            left.append(f"a cold guest (pid {pid}) of the running kpemu pid {runowner.parse_token(owner)}")
            continue
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
            killed.append(pid)
    return killed, sorted(set(left))
