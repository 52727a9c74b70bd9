"""`doctor` and `vm setup|status|exec`: what this kernel can do, and the guest runtime."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from kpemu.cli.base import Parser, add_command, add_kernel, add_query, emit, human_console
from kpemu.errors import InputError

if TYPE_CHECKING:
    from kpemu.runtimes.doctor import Doctor
    from kpemu.runtimes.kernels import GuestKernel


def cmd_doctor(args: argparse.Namespace) -> int:
    from kpemu.runtimes.doctor import doctor

    found = doctor()
    emit(args, found.data, lambda d: _doctor_table(found, d))
    return 0


def _doctor_table(found: Doctor, data: dict) -> None:
    from rich.table import Table

    con = human_console()
    t = Table(title=f"kpemu doctor: kernel {found.kernel} (probed in {found.seconds:.2f}s)")
    for col in ("feature", "status", "how probed", "detail"):
        t.add_column(col, overflow="fold")
    colour = {"ok": "green", "missing": "red", "not probed": "yellow"}
    for name, f in data["features"].items():
        t.add_row(name, f"[{colour[f['status']]}]{f['status']}[/]", f["how"], f["detail"])
    con.print(t)
    r = Table(title="what can run where")
    for col in ("cni / kube-proxy mode", "runtime", "why"):
        r.add_column(col, overflow="fold")
    for k, run in data["runs"].items():
        if run["host"]:
            where, why = "host", "this kernel has everything"
        elif run["runtime"] == "unknown":
            where, why = "[yellow]unknown[/]", "not probed: " + ", ".join(run["not_probed"]) + " (run as root)"
        else:
            where = "vm" if data["vm_ready"] else "[red]vm (not installed)[/]"
            why = "host lacks " + ", ".join(run["missing"])
            if run["not_probed"]:
                why += "; not probed: " + ", ".join(run["not_probed"])
        r.add_row(k, where, why)
    docker = data["docker"]
    r.add_row("docker members (image:)", "host" if docker["ok"] else "[red]none[/]", docker["detail"])
    con.print(r)
    if not found.root:
        con.print("[yellow]not root: kernel features were not probed (run as root to probe them)[/]")


def _print_kernel(k: GuestKernel) -> None:
    print(f"  kernel  {k.version} ({k.origin})\n  image   {k.vmlinuz}\n  modules {k.moddir}")


def cmd_vm_setup(args: argparse.Namespace) -> int:
    from kpemu.runtimes import setup_guest_kernel

    res = setup_guest_kernel(if_needed=args.if_needed and args.kernel is None)
    if res.action == "not-needed":
        print(f"vm setup: not needed, {res.reason}")
    elif res.action == "reused":
        print(f"vm setup: guest kernel already present ({res.reason}):")
        _print_kernel(res.kernel)
    else:
        print(f"vm setup: downloaded {res.package} ({res.download_bytes / 1e6:.1f} MB, {res.reason}) "
              f"and unpacked it in {res.seconds:.1f}s into {res.kernel.root}:")  # type: ignore[union-attr]
        _print_kernel(res.kernel)
        print("  nothing was installed: /boot and the bootloader are untouched")
    return 0


def cmd_vm_up(args: argparse.Namespace) -> int:
    from kpemu.runtimes import guest

    con = human_console()
    st = guest.up(lambda m: con.print(f"vm: {m}"), idle=args.idle)
    print(f"warm guest up: pid {st['pid']}, kernel {st['kernel']}, stops after {st['idle']:g}s idle "
          f"(kpemu vm down stops it now)")
    return 0


def cmd_vm_down(args: argparse.Namespace) -> int:
    from kpemu.runtimes import guest

    print("warm guest stopped" if guest.down() else "no warm guest was up")
    return 0


def cmd_vm_status(args: argparse.Namespace) -> int:
    from kpemu.runtimes import guest_status

    emit(args, guest_status(), _status_text)
    return 0


def _status_text(st: dict) -> None:
    w = st["warm"]
    if w:
        beat = "never" if w["heartbeat_age"] is None else f"{w['heartbeat_age']:.1f}s ago"
        print(f"warm:   up {w['uptime']:.0f}s, pid {w['pid']}, kernel {w['kernel']}, idle limit {w['idle']:g}s, "
              f"agent heartbeat {beat}")
    else:
        print("warm:   no warm guest (kpemu vm up starts one)")
    k = st["kernel"]
    print(f"cache:  {st['cache']}")
    if k:
        print(f"kernel: {k['version']} from {k['origin']}\n  image   {k['vmlinuz']}\n  modules {k['modules']}")
    else:
        print("kernel: none (run `kpemu vm setup`)")
    for c in st["candidates"]:
        if c["lacks"]:
            print(f"  skipped {c['vmlinuz']}: lacks {', '.join(c['lacks'])}")
    print(f"qemu:   {st['qemu'] or 'missing'}\nvng:    {st['vng'] or 'missing'}")
    print(f"accel:  {'KVM' if st['kvm'] else 'software emulation (TCG)'} ({st['kvm_detail']})")


def cmd_vm_exec(args: argparse.Namespace) -> int:
    from kpemu.runtimes import qemu

    cmd = args.cmd
    if not cmd:
        raise InputError("kpemu vm exec: give a command after --, e.g. kpemu vm exec -- uname -r")
    err = human_console(stderr=True)
    with err.status("starting the guest") as status:
        res = qemu.boot(cmd, Path(args.out), args.timeout, echo=sys.stdout,
                      progress=lambda msg: status.update(msg))
    err.print(f"guest: boot-to-command {res.boot_seconds:.1f}s, total {res.total_seconds:.1f}s, "
              f"exit {res.rc}; console in {res.console_log}")
    return res.rc


def register(sub: argparse._SubParsersAction) -> None:
    """Add this module's subcommands."""
    add_query(sub, "doctor", "kernel and tool capabilities; what can run on the host, what needs the vm",
              ["sudo kpemu doctor", "sudo kpemu doctor -o json | jq .runs"], cmd_doctor)

    s = add_command(sub, "vm", "the guest-kernel runtime (virtme-ng)",
                    ["kpemu vm setup --if-needed", "kpemu vm status -o json", "sudo kpemu vm exec -- uname -r"])
    vsub = s.add_subparsers(dest="vm_command", required=True, parser_class=Parser)
    v = add_command(vsub, "setup", "provide a guest kernel (download Debian's into the cache)",
                    ["kpemu vm setup", "kpemu vm setup --if-needed", "kpemu vm setup --kernel 6.12"])
    v.add_argument("--if-needed", action="store_true", help="do nothing when this kernel has everything")
    add_kernel(v, runs_labs=False)
    v.set_defaults(func=cmd_vm_setup)
    v = add_query(vsub, "status", "which guest kernel would be used, QEMU, KVM",
                  ["kpemu vm status", "kpemu vm status -o json | jq .kvm", "kpemu vm status --kernel 6.12"],
                  cmd_vm_status)
    add_kernel(v, runs_labs=False)
    v = add_command(vsub, "up", "boot a warm guest that run/deploy/exec/inspect/destroy then use",
                    ["sudo kpemu vm up", "sudo kpemu vm up --idle 600"])
    v.add_argument("--idle", type=float, default=1800.0, help="stop after this many seconds without a request")
    add_kernel(v, runs_labs=False)
    v.set_defaults(func=cmd_vm_up)
    v = add_command(vsub, "down", "stop the warm guest", ["sudo kpemu vm down"])
    v.set_defaults(func=cmd_vm_down)
    v = add_command(vsub, "exec", "boot the guest once and run a command in it: kpemu vm exec -- CMD",
                    ["sudo kpemu vm exec -- uname -r", "sudo kpemu vm exec --timeout 600 -- ipvsadm -Ln"])
    v.add_argument("--out", default="runs/vm-exec", help="shared directory for the console and output logs")
    v.add_argument("--timeout", type=float, default=1800.0)
    add_kernel(v, runs_labs=False)
    v.set_defaults(func=cmd_vm_exec, takes_command="-- CMD to run in the guest")
