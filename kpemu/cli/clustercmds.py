"""`import`, `check-node`, `trace`: real clusters in (Kubernetes objects, a node's dumps); no root."""

from __future__ import annotations

import argparse
import json
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from kpemu.cli.base import add_command, add_node, add_topology
from kpemu.errors import InputError

if TYPE_CHECKING:
    from kpemu.dumps.drift import Drift
    from kpemu.dumps.files import DumpFiles
    from kpemu.model.topology import Topology


def _topology(path: str | None) -> Topology | None:
    from kpemu.inputs.topology import load_topology

    return load_topology(path) if path else None


def _nft_alone(args: argparse.Namespace) -> None:
    """--nft is a whole nftables-mode node; the iptables and IPVS dumps belong to other modes."""
    if args.nft and (args.iptables_save or args.ipvs or args.ipset):
        raise InputError(f"kpemu {args.command}: --nft (nft list ruleset) is the dump of an nftables-mode node; "
                         "give it alone, without --iptables-save, --ipvs or --ipset")


def _dump_files(args: argparse.Namespace) -> DumpFiles:
    from kpemu.dumps.files import DumpFiles

    return DumpFiles(args.iptables_save, args.ipvs, args.ipset, args.nft, args.table)


def cmd_trace(args: argparse.Namespace) -> int:
    from kpemu.dumps.registry import dumps_for
    from kpemu.dumps.trace import packet, parse_endpoint

    _nft_alone(args)
    src = parse_endpoint(args.src, "--src", need_port=False)
    dst = parse_endpoint(args.dst, "--dst", need_port=True)
    node_ips = [parse_endpoint(ip, "--node-ip", need_port=False)[0] for ip in args.node_ip]
    topo = _topology(args.topology)
    if topo is not None:
        topo.require_node(args.node)
    pod_cidr = topo.node(args.node).podCIDR if topo is not None else None
    files = _dump_files(args)
    dumps = dumps_for(files, topo)  # the kind of the dumps given, else the topology's
    walked = dumps.walked(topo, args.node, node_ips, files)
    pkt, origin = packet(walked.local, src, dst, args.proto, pod_cidr, args.from_, _iface(args.iif, "--iif"),
                         _iface(args.oif, "--oif"))
    pred = dumps.run(walked, pkt)
    return _print_trace(args, lambda: dumps.trace_json(walked, pred, origin),
                        lambda: dumps.render_trace(walked, pred, origin))


def _iface(name: str | None, flag: str) -> str | None:
    """An interface name as the kernel allows it (IFNAMSIZ: at most 15 bytes, no slash or space)."""
    if name is not None and not (0 < len(name.encode()) <= 15 and not any(c in name for c in "/ :\t")):
        raise InputError(f"{flag} {name[:40]!r}: expected an interface name of 1 to 15 characters without '/', "
                         "':' or spaces, e.g. eth0, cni0, flannel.1")
    return name


def _print_trace(args: argparse.Namespace, as_json: Callable[[], dict], as_text: Callable[[], str]) -> int:
    """Print a trace as `-o` asks: JSON or YAML for scripts, else text."""
    if args.output in ("json", "yaml"):
        _print_data(as_json(), args.output)
    else:
        print(as_text(), end="")
    return 0


IMPORT_FORMATS = ("yaml", "json")
TEXT_OUTPUTS = ("text", "table", "json", "yaml")


def _print_data(data: dict, output: str) -> None:
    if output == "json":
        print(json.dumps(data, indent=2))
    else:
        import yaml

        print(yaml.safe_dump(data, sort_keys=False), end="")


def _count(items: list, noun: str) -> str:
    return f"{len(items)} {noun}{'' if len(items) == 1 else 's'}"


def cmd_import(args: argparse.Namespace) -> int:
    import sys

    from kpemu.inputs.topology import read_objects
    from kpemu.k8s.convert import topology_data
    from kpemu.k8s.render import render_topology
    from kpemu.model import topology_from_data

    if args.output not in IMPORT_FORMATS:
        raise InputError(f"kpemu import: -o is the output format now, as in kubectl: yaml (default) or json; "
                         f"write the topology to a file with --out {args.output} (or -f {args.output})")
    imported = topology_data(read_objects(args.sources), cni=args.cni, name=args.name)
    topo = topology_from_data(imported.data, f"the topology imported from {', '.join(args.sources)}")
    where = Path(args.out).parent if args.out else Path.cwd()
    if args.output == "json":
        text = json.dumps(imported.data, indent=2) + "\n"
    else:
        text = _schema_line(where) + render_topology(imported, args.sources)
    if args.out:
        Path(args.out).write_text(text)
    else:
        print(text, end="")
    fields = sum(len(f) for f in imported.unmodelled.values())
    print(f"imported {_count(topo.nodes, 'node')}, {_count(topo.pods, 'pod')}, {_count(topo.services, 'service')}"
          f"{' into ' + args.out if args.out else ''}; {_count(imported.notes, 'note')} and "
          f"{fields} fields not modelled are listed at the top of the topology", file=sys.stderr)
    return 0


def _schema_line(where: Path) -> str:
    """The line editors read the topology schema from, relative to where the file goes."""
    import os

    from kpemu.examples import ROOT

    schema = (ROOT / "schemas" / "topology.schema.json").resolve()
    return f"# yaml-language-server: $schema={os.path.relpath(schema, where.resolve())}\n"


def cmd_check_node(args: argparse.Namespace) -> int:
    from kpemu.dumps.registry import DUMPS
    from kpemu.inputs.topology import load_topology
    from kpemu.proxy.modes import mode_of

    _nft_alone(args)
    topo = load_topology(args.topology)
    topo.require_node(args.node)
    if not (args.iptables_save or args.ipvs or args.ipset or args.nft):
        raise InputError("kpemu check-node: give the node's dumps to check: --iptables-save FILE "
                         "(iptables-save), --ipvs FILE (ipvsadm -Sn), --ipset FILE (ipset save), --nft FILE "
                         "(nft list ruleset)")
    files = _dump_files(args)
    dumps = DUMPS[mode_of(topo).walks]
    if not dumps.given(files):  # they are the other kind's (_nft_alone: --nft never comes with the others)
        raise InputError(f"kpemu check-node: --nft (nft list ruleset) goes with kube-proxy in nftables mode, and an "
                         f"nftables-mode node needs --nft; topology {args.topology} has kubeProxy.mode "
                         f"{topo.kubeProxy.mode}")
    return _report_drift(dumps.check(topo, args.topology, args.node, files), args.output)


def _report_drift(drift: Drift, output: str) -> int:
    from kpemu.dumps.drift import drift_json, render_drift

    if output in ("json", "yaml"):
        _print_data(drift_json(drift), output)
    else:
        print(render_drift(drift), end="")
    return 0 if drift.equal else 1


def _dump_arguments(s: argparse.ArgumentParser) -> None:
    """The node dumps check-node and trace read (each optional; `-` is standard input)."""
    s.add_argument("--iptables-save", metavar="FILE",
                   help="the node's iptables-save (-c) or iptables [-t T] -S output, or -A lines of either")
    s.add_argument("--table", metavar="TABLE", help="the table of an iptables -S output or fragment (else told "
                   "by its -P policies or chain names)")
    s.add_argument("--nft", metavar="FILE", help="the node's nft [-j] list ruleset output")
    s.add_argument("--ipvs", metavar="FILE", help="the node's ipvsadm -Sn or -Ln output")
    s.add_argument("--ipset", metavar="FILE", help="the node's ipset save or ipset list output")


def register(sub: argparse._SubParsersAction) -> None:
    """Add this module's subcommands."""
    from kpemu.cni.catalog import names

    s = add_command(sub, "import", "Kubernetes objects (kubectl output, manifests) -> a kpemu topology",
                    ["kubectl get nodes,pods,services,endpointslices -A -o yaml | kpemu import - --out cluster.yaml",
                     "kpemu import manifests/ --cni calico-ipip --name shop -f shop.yaml",
                     "kpemu import cluster-list.yaml -o json | jq .services"])
    s.add_argument("sources", nargs="+", metavar="SRC", help="files, directories, or - for standard input")
    s.add_argument("--out", "-f", metavar="FILE", help="write the topology here (default: standard output)")
    s.add_argument("-o", "--output", metavar="FORMAT", default="yaml",
                   help="yaml: the topology file with its notes (default); json: the topology's data")
    s.add_argument("--cni", choices=names(), help="the CNI (default: inferred from the node annotations)")
    s.add_argument("--name", help="the lab name (default: imported)")
    s.set_defaults(func=cmd_import)

    s = add_command(sub, "check-node", "a node's real dumps against what kube-proxy would program (exit 1 on drift)",
                    ["kpemu check-node topologies/seed-001.yaml --node minikube --iptables-save node.iptables-save",
                     "kpemu check-node cluster.yaml --node node1 --ipvs node1.ipvs --ipset node1.ipset -o json",
                     "kpemu check-node cluster.yaml --node node1 --nft node1.nft"])
    add_topology(s, "topology", help="a kpemu topology or Kubernetes objects")
    add_node(s)
    _dump_arguments(s)
    s.add_argument("-o", "--output", choices=TEXT_OUTPUTS, default="text",
                   help="text (or table) for people (default), json or yaml for scripts")
    s.set_defaults(func=cmd_check_node)

    s = add_command(sub, "trace", "walk one packet through a node's rules offline (a real dump or kpemu's)",
                    ["kpemu trace --iptables-save node.iptables-save --node minikube --node-ip 192.168.49.2 "
                     "--src 10.242.72.50 --dst 192.168.49.2:30180",
                     "kpemu trace topologies/seed-001.yaml --node minikube --src 172.17.0.4 --dst 10.105.178.199:8080",
                     "kpemu trace --nft node1.nft --node node1 --node-ip 192.168.1.100 --src 10.242.72.50 "
                     "--dst 192.168.1.100:30080"])
    add_topology(s, "topology", required=False, help="a kpemu topology or Kubernetes objects (node addresses, "
                                                      "and the generated rules when no dump is given)")
    _dump_arguments(s)
    add_node(s)
    s.add_argument("--node-ip", nargs="+", default=[], metavar="IP", help="the node's own addresses")
    s.add_argument("--src", required=True, metavar="IP[:PORT]")
    s.add_argument("--dst", required=True, metavar="IP:PORT")
    s.add_argument("--proto", default="tcp", choices=["tcp", "udp", "sctp"])
    s.add_argument("--iif", metavar="IFACE", help="the interface the packet arrives on (decides -i / iifname; "
                                                  "without it such rules are undecided, both ways shown)")
    s.add_argument("--oif", metavar="IFACE", help="the interface the packet leaves by (decides -o / oifname; "
                                                  "else inferred where the rules make it certain, e.g. flannel's)")
    s.add_argument("--from", dest="from_", choices=["outside", "pod", "node"],
                   help="where the packet comes from (default: from --src: the node's address, its podCIDR, "
                        "else outside)")
    s.add_argument("-o", "--output", choices=TEXT_OUTPUTS, default="text",
                   help="text (or table) for people (default), json or yaml for scripts")
    s.set_defaults(func=cmd_trace)
