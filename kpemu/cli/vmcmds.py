"""`doctor` and `vm setup|status|exec`: what this kernel can do, and the guest runtime."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from kpemu.cli.base import Parser, human_console
from kpemu.errors import InputError


def cmd_doctor(args: argparse.Namespace) -> int:
    from rich.table import Table

    from kpemu.docker.engine import status as docker_status
    from kpemu.kernel.probe import CNIS, PROXY_MODES, can_run, probe

    caps = probe()
    docker_ok, docker_detail = docker_status()
    combos = {f"{c}/{m}": can_run(caps, c, m) for c in CNIS for m in PROXY_MODES}
    vm_ready = caps.has("tool:qemu-system-x86_64") and caps.has("tool:vng")
    if args.json:
        data = caps.to_json()
        data["runs"] = {k: {"host": ok, "missing": missing, "runtime": "host" if ok else "vm"}
                        for k, (ok, missing) in combos.items()}
        data["docker"] = {"ok": docker_ok, "detail": docker_detail}
        print(json.dumps(data, indent=2))
        return 0
    con = human_console()
    t = Table(title=f"kpemu doctor: kernel {caps.kernel} (probed in {caps.seconds:.2f}s)")
    for col in ("feature", "status", "how probed", "detail"):
        t.add_column(col, overflow="fold")
    for f in caps.features.values():
        t.add_row(f.name, "[green]ok[/]" if f.ok else "[red]missing[/]", f.how, f.detail)
    con.print(t)
    r = Table(title="what can run where")
    for col in ("cni / kube-proxy mode", "runtime", "why"):
        r.add_column(col, overflow="fold")
    for k, (ok, missing) in combos.items():
        where = "host" if ok else ("vm" if vm_ready else "[red]vm (not installed)[/]")
        r.add_row(k, where, "this kernel has everything" if ok else "host lacks " + ", ".join(missing))
    r.add_row("docker members (image:)", "host" if docker_ok else "[red]none[/]", docker_detail)
    con.print(r)
    if not caps.root:
        con.print("[yellow]not root: kernel features were not probed (run as root)[/]")
    return 0


def _print_kernel(k: object) -> None:
    print(f"  kernel  {k.version} ({k.origin})\n  image   {k.vmlinuz}\n  modules {k.moddir}")


def cmd_vm_setup(args: argparse.Namespace) -> int:
    from kpemu import vm

    res = vm.setup(if_needed=args.if_needed)
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


def cmd_vm_status(args: argparse.Namespace) -> int:
    from kpemu import vm

    st = vm.status()
    if args.json:
        print(json.dumps(st, indent=2))
        return 0
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
    return 0


def cmd_vm_exec(args: argparse.Namespace) -> int:

    from kpemu import vm

    cmd = args.cmd
    if not cmd:
        raise InputError("kpemu vm exec: give a command after --, e.g. kpemu vm exec -- uname -r")
    err = human_console(stderr=True)
    with err.status("starting the guest") as status:
        res = vm.boot(cmd, Path(args.out), args.timeout, echo=sys.stdout,
                      progress=lambda msg: status.update(msg))
    err.print(f"guest: boot-to-command {res.boot_seconds:.1f}s, total {res.total_seconds:.1f}s, "
              f"exit {res.rc}; console in {res.console_log}")
    return res.rc


def register(sub: argparse._SubParsersAction) -> None:
    """Add this module's subcommands."""
    s = sub.add_parser("doctor", help="kernel and tool capabilities; what can run on the host, what needs the vm")
    s.add_argument("--json", action="store_true")
    s.set_defaults(func=cmd_doctor)

    s = sub.add_parser("vm", help="the guest-kernel runtime (virtme-ng)")
    vsub = s.add_subparsers(dest="vm_command", required=True, parser_class=Parser)
    v = vsub.add_parser("setup", help="provide a guest kernel (download Debian's into the cache)")
    v.add_argument("--if-needed", action="store_true", help="do nothing when this kernel has everything")
    v.set_defaults(func=cmd_vm_setup)
    v = vsub.add_parser("status", help="which guest kernel would be used, QEMU, KVM")
    v.add_argument("--json", action="store_true")
    v.set_defaults(func=cmd_vm_status)
    v = vsub.add_parser("exec", help="boot the guest once and run a command in it")
    v.add_argument("--out", default="runs/vm-exec", help="shared directory for the console and output logs")
    v.add_argument("--timeout", type=float, default=1800.0)
    v.set_defaults(func=cmd_vm_exec, takes_command="-- CMD to run in the guest")
