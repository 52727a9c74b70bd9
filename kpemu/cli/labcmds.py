"""`deploy`, `destroy`, `inspect`, `exec`: the lab lifecycle."""

from __future__ import annotations

import argparse
import sys

from kpemu.cli.base import (
    add_command,
    add_kernel,
    add_lab,
    add_output,
    add_topology,
    emit,
    guest_runtime,
    human_console,
)
from kpemu.cli.complete import attach, member_names
from kpemu.errors import InputError


def cmd_deploy(args: argparse.Namespace) -> int:
    import subprocess

    from kpemu import runtimes
    from kpemu.examples import resolve
    from kpemu.inputs.topology import load_topology

    topo = load_topology(resolve(args.file), args.name)
    runtime, reason = runtimes.for_deploy(guest_runtime(args.runtime, args.kernel, "deploy"), topo)
    console = human_console()
    print(runtime.deploy(topo, args.file, reason, console.print, serve=args.serve))
    if args.cmd:  # run on this machine; `kpemu exec` in it reaches the lab wherever it lives
        return subprocess.run(args.cmd, check=False).returncode
    return 0


def cmd_destroy(args: argparse.Namespace) -> int:
    from kpemu import runtimes

    if not args.all and not args.name:
        raise InputError("kpemu destroy: give a lab NAME or --all")
    if args.all:
        for line in runtimes.destroy_all():
            print(line)
        return 0
    print(runtimes.for_lab(args.name).destroy(args.name))
    return 0


def cmd_inspect(args: argparse.Namespace) -> int:
    from kpemu import runtimes
    from kpemu.report.inspect import render_inspect

    if args.all and args.name:
        raise InputError(f"kpemu inspect: --all shows every lab; give it without a lab name ({args.name})")
    emit(args, runtimes.inspect(args.name), render_inspect)
    return 0


def cmd_exec(args: argparse.Namespace) -> int:
    from kpemu import runtimes

    cmd = args.cmd
    if not cmd:
        raise InputError("kpemu exec: give a command after --, e.g. kpemu exec LAB node1 -- ip route")
    res = runtimes.for_lab(args.name).exec(args.name, args.member, cmd)
    sys.stdout.write(res.stdout)
    sys.stderr.write(res.stderr)
    return res.rc


def cmd_capture(args: argparse.Namespace) -> int:
    from kpemu import runtimes

    if args.write is None and sys.stdout.isatty():
        raise InputError("kpemu capture: a pcap stream is binary; pipe it into Wireshark (kpemu capture LAB MEMBER "
                         "IFACE | wireshark -k -i -) or tcpdump -r -, or write a file with -w FILE")
    runtime = runtimes.for_lab(args.name)
    if not runtime.streams:
        raise InputError(f"kpemu capture: lab {args.name} lives in the guest, whose kpemu exec returns output at "
                         f"the end, not as a pcap stream: kpemu exec {args.name} {args.member} -- tcpdump -nn -c 20 "
                         f"-i {args.iface}")
    argv = ["tcpdump", "-U", "-n", "-s", str(args.snaplen), "-i", args.iface, "-w", args.write or "-"]
    argv += ["-c", str(args.count)] if args.count else []
    return runtime.exec(args.name, args.member, [*argv, *args.cmd]).rc


def register(sub: argparse._SubParsersAction) -> None:
    """Add this module's subcommands."""
    s = add_command(sub, "deploy", "build a lab from a topology (root)",
                    ["sudo kpemu deploy topologies/flannel-vxlan.yaml --serve",
                     "sudo kpemu deploy example:calico-ipip && sudo kpemu exec calico node1 -- ipvsadm -Ln"],
                    description="build a lab from a topology (root). On the host the lab stays up (kpemu exec, "
                                "kpemu destroy); with --runtime vm it lives while the guest runs -- CMD.")
    add_topology(s)
    s.add_argument("--runtime", choices=["auto", "host", "vm"], default=None,
                   help="where to build it (default auto: this kernel when it can, else a guest kernel)")
    add_kernel(s)
    s.add_argument("--name", default=None, metavar="LAB",
                   help="the lab's name (namespaces kp-LAB-*) instead of the file's: deploy two copies")
    s.add_argument("--serve", action="store_true",
                   help="keep every pod's server answering (TCP, UDP, HTTP) until kpemu destroy, so kpemu exec "
                        "... curl or nc reaches it")
    s.set_defaults(func=cmd_deploy,
                   takes_command="-- CMD runs here once the lab is up (kpemu exec in it reaches the lab)")

    s = add_command(sub, "destroy", "remove a lab, or every kpemu lab with --all (root)",
                    ["sudo kpemu destroy flannel", "sudo kpemu destroy --all"])
    add_lab(s, optional=True)
    s.add_argument("--all", action="store_true", help="every kpemu lab, and what a killed run left")
    s.set_defaults(func=cmd_destroy)

    s = add_command(sub, "inspect", "namespaces, interfaces, addresses and routes of labs",
                    ["kpemu inspect --all", "kpemu inspect flannel -o json | jq '.labs[0].members[].member'"])
    add_lab(s, optional=True, help="one lab (default: every lab)")
    s.add_argument("--all", action="store_true", help="every lab (the default without LAB), as containerlab says")
    add_output(s)
    s.set_defaults(func=cmd_inspect)

    s = add_command(sub, "capture", "stream a lab member's interface as pcap (into Wireshark) while you poke it",
                    ["sudo kpemu capture flannel node1 cni0 | wireshark -k -i -",
                     "sudo kpemu capture flannel node1 eth0 -c 20 -w node1.pcap -- udp port 8472",
                     "sudo kpemu capture calico client eth0 | tcpdump -nn -r -"])
    add_lab(s)
    attach(s.add_argument("member", metavar="MEMBER", help="a node, pod, external or the underlay"), member_names)
    s.add_argument("iface", metavar="IFACE", nargs="?", default="any", help="the interface (default any)")
    s.add_argument("-w", "--write", metavar="FILE", default=None, help="write the pcap here instead of stdout")
    s.add_argument("-c", "--count", type=int, default=0, help="stop after this many packets")
    s.add_argument("-s", "--snaplen", type=int, default=262144, help="bytes kept of each frame (default all)")
    s.set_defaults(func=cmd_capture, takes_command="-- FILTER: a tcpdump filter, e.g. -- tcp port 80")

    s = add_command(sub, "exec", "run a command in a lab member's namespace: kpemu exec LAB MEMBER -- CMD",
                    ["sudo kpemu exec flannel node1 -- iptables-save -t nat",
                     "sudo kpemu exec flannel client -- curl -s 192.168.1.100:30080   # a lab deployed with --serve"])
    add_lab(s)
    attach(s.add_argument("member", metavar="MEMBER", help="a node, pod, external or the underlay"), member_names)
    s.set_defaults(func=cmd_exec, takes_command="-- CMD to run")
