"""`deploy`, `destroy`, `inspect`, `exec`: the lab lifecycle."""

from __future__ import annotations

import argparse
import json
import sys

from kpemu.cli.base import human_console
from kpemu.errors import InputError


def cmd_deploy(args: argparse.Namespace) -> int:
    import subprocess

    from kpemu import lab
    from kpemu.model import load_topology
    from kpemu.runtime import choose_runtime

    topo = load_topology(args.file)
    runtime, reason = choose_runtime(args.runtime, [(topo.cni, topo.kubeProxy.mode)])
    console = human_console()
    if runtime == "vm":
        from kpemu import guest

        console.print(f"runtime: vm ({reason})")
        res = guest.deploy_lab(topo, args.file, lambda m: console.print(f"vm: {m}"))
        print(f"lab {topo.name} deployed in the guest: {len(res['namespaces'])} namespaces in {res['seconds']:.2f}s; "
              f"kpemu exec/inspect/destroy {topo.name} reach it there")
    else:
        state = lab.deploy(topo, source=args.file)
        print(f"lab {state.lab} deployed: {len(state.namespaces)} namespaces in {state.deploy_seconds:.2f}s")
    if args.cmd:  # run on this machine; `kpemu exec` in it reaches the lab wherever it lives
        return subprocess.run(args.cmd, check=False).returncode
    return 0


def cmd_destroy(args: argparse.Namespace) -> int:
    from kpemu import guest, lab

    if args.all:
        removed = lab.destroy_all()
        stopped = guest.stop_all()
        if stopped:
            print(f"stopped the guest (pids {' '.join(map(str, stopped))})")
    elif args.name:
        if lab.load_state(args.name) is None and (res := guest.lab_request("destroy", lab=args.name)) is not None \
                and res.get("removed"):
            removed = res["removed"]
        else:
            removed = lab.destroy(args.name)
    else:
        raise InputError("kpemu destroy: give a lab NAME or --all")
    print(f"removed {len(removed)} namespaces" + (": " + " ".join(removed) if removed else ""))
    return 0


def cmd_inspect(args: argparse.Namespace) -> int:
    from kpemu import guest, lab
    from kpemu.errors import KpemuError
    from kpemu.report.inspect import render_inspect

    in_guest = guest.lab_request("inspect", lab=None) or {}
    guest_labs = (in_guest.get("data") or {}).get("labs", [])
    for entry in guest_labs:
        entry["runtime"] = "vm"
    if args.name and args.name in {e["lab"] for e in guest_labs}:
        data = {"labs": [e for e in guest_labs if e["lab"] == args.name], "orphans": []}
    else:
        try:
            data = lab.inspect(args.name)
        except KpemuError:
            if args.name or not guest_labs:
                raise
            data = {"labs": [], "orphans": []}
        if not args.name:
            data["labs"] += guest_labs
    print(json.dumps(data, indent=2) if args.json else render_inspect(data), end="\n" if args.json else "")
    return 0


def cmd_exec(args: argparse.Namespace) -> int:
    from kpemu import guest, lab

    cmd = args.cmd
    if not cmd:
        raise InputError("kpemu exec: give a command after --, e.g. kpemu exec LAB node1 -- ip route")
    if lab.load_state(args.name) is None:
        res = guest.lab_request("exec", lab=args.name, member=args.member, argv=cmd)
        if res is not None:
            sys.stdout.write(res.get("stdout", ""))
            sys.stderr.write(res.get("stderr", "") + (res.get("error", "") + "\n" if res.get("error") else ""))
            return int(res["rc"])
    return lab.exec_in(args.name, args.member, cmd)


def register(sub: argparse._SubParsersAction) -> None:
    """Add this module's subcommands."""
    s = sub.add_parser("deploy", help="build a lab from a topology (root)")
    s.add_argument("file")
    s.add_argument("--runtime", choices=["auto", "host", "vm"], default=None,
                   help="where to build it (default auto: this kernel when it can, else a guest kernel)")
    s.set_defaults(func=cmd_deploy,
                   takes_command="-- CMD runs here once the lab is up (kpemu exec in it reaches the lab)")

    s = sub.add_parser("destroy", help="remove a lab, or every kpemu lab with --all (root)")
    s.add_argument("name", nargs="?")
    s.add_argument("--all", action="store_true")
    s.set_defaults(func=cmd_destroy)

    s = sub.add_parser("inspect", help="namespaces, interfaces, addresses and routes of labs")
    s.add_argument("name", nargs="?")
    s.add_argument("--json", action="store_true")
    s.set_defaults(func=cmd_inspect)

    s = sub.add_parser("exec", help="run a command in a lab member's namespace")
    s.add_argument("name")
    s.add_argument("member")
    s.set_defaults(func=cmd_exec, takes_command="-- CMD to run")
