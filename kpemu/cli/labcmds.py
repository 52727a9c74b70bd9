"""`deploy`, `destroy`, `inspect`, `exec`: the lab lifecycle."""

from __future__ import annotations

import argparse
import sys

from kpemu.cli.base import add_command, add_output, emit, human_console
from kpemu.errors import InputError


def cmd_deploy(args: argparse.Namespace) -> int:
    import subprocess

    from kpemu import lab
    from kpemu.examples import resolve
    from kpemu.inputs.topology import load_topology
    from kpemu.runtime import choose_runtime

    topo = load_topology(resolve(args.file), args.name)
    lab.require_root()
    runtime, reason = choose_runtime(args.runtime, [(topo.cni, topo.kubeProxy.mode)])
    if topo.containers():
        from kpemu.docker.engine import blocker
        from kpemu.errors import EnvironmentProblem

        if why := blocker(True, runtime):
            raise EnvironmentProblem(f"lab {topo.name}: {why[0]}", why[1])
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

    if not args.all and not args.name:
        raise InputError("kpemu destroy: give a lab NAME or --all")
    lab.require_root()
    if args.all:
        print(lab.destroy_all().summary())
        stopped, left = guest.stop_all()
        if stopped:
            print(f"stopped the guest (pids {' '.join(map(str, stopped))})")
        for why in left:
            print(f"left alone, in use: {why}")
        return 0
    if lab.load_state(args.name) is None:
        res = guest.lab_request("destroy", lab=args.name)
        if res is not None and res.get("removed"):
            print(f"in the guest: {res['summary']}")
            return 0
    print(lab.destroy(args.name).summary())
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
    emit(args, data, render_inspect)
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
    s = add_command(sub, "deploy", "build a lab from a topology (root)",
                    ["sudo kpemu deploy topologies/flannel-vxlan.yaml",
                     "sudo kpemu deploy example:calico-ipip && sudo kpemu exec calico node1 -- ipvsadm -Ln"],
                    description="build a lab from a topology (root). On the host the lab stays up (kpemu exec, "
                                "kpemu destroy); with --runtime vm it lives while the guest runs -- CMD.")
    s.add_argument("file", metavar="TOPOLOGY", help="a YAML file, or example:NAME (see kpemu examples)")
    s.add_argument("--runtime", choices=["auto", "host", "vm"], default=None,
                   help="where to build it (default auto: this kernel when it can, else a guest kernel)")
    s.add_argument("--name", default=None, metavar="LAB",
                   help="the lab's name (namespaces kp-LAB-*) instead of the file's: deploy two copies")
    s.set_defaults(func=cmd_deploy,
                   takes_command="-- CMD runs here once the lab is up (kpemu exec in it reaches the lab)")

    s = add_command(sub, "destroy", "remove a lab, or every kpemu lab with --all (root)",
                    ["sudo kpemu destroy flannel", "sudo kpemu destroy --all"])
    s.add_argument("name", nargs="?")
    s.add_argument("--all", action="store_true")
    s.set_defaults(func=cmd_destroy)

    s = add_command(sub, "inspect", "namespaces, interfaces, addresses and routes of labs",
                    ["kpemu inspect", "kpemu inspect flannel -o json | jq '.labs[0].members[].member'"])
    s.add_argument("name", nargs="?")
    add_output(s)
    s.set_defaults(func=cmd_inspect)

    s = add_command(sub, "exec", "run a command in a lab member's namespace: kpemu exec LAB MEMBER -- CMD",
                    ["sudo kpemu exec flannel node1 -- iptables-save -t nat",
                     "sudo kpemu exec calico client -- curl -s 10.246.198.17:30080"])
    s.add_argument("name", metavar="LAB")
    s.add_argument("member", metavar="MEMBER")
    s.set_defaults(func=cmd_exec, takes_command="-- CMD to run")
