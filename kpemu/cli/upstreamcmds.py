"""`upstream build|status|list`: the real kube-proxy, kube-apiserver and etcd, built from source into kpemu's cache."""

from __future__ import annotations

import argparse

from kpemu.cli.base import Parser, add_command, add_query, emit, human_console, progress


def cmd_upstream_build(args: argparse.Namespace) -> int:
    from kpemu.upstream import build, store
    from kpemu.upstream.releases import check_buildable, parse_release

    releases = [parse_release(r) for r in args.release]
    for release in releases:
        check_buildable(release)
    con = human_console()
    done = []
    with progress(con) as say:
        if not releases:
            releases = [build.served()[-1]]
        for i, release in enumerate(releases):
            done += build.build(release, say, control_plane=args.control_plane and i == 0)
    for built, now in done:
        how = f"built in {built.seconds:.0f}s" + (" (cold cache)" if built.cold else "") if now else "already built"
        print(f"{built.program:15} {built.version:28} {how:24} {built.size / 1e6:5.0f} MB  {built.path}")
    print(f"cache: {store.root()}")
    return 0


def cmd_upstream_status(args: argparse.Namespace) -> int:
    from dataclasses import asdict

    from kpemu.upstream import store

    built = store.all_built()
    data = {"cache": str(store.root()), "built": [asdict(b) for b in built]}
    emit(args, data, _status_text)
    return 0


def _status_text(data: dict) -> str:
    lines = [f"cache: {data['cache']}"]
    if not data["built"]:
        lines.append("nothing built yet (kpemu upstream build RELEASE builds kube-proxy, kube-apiserver and etcd)")
    for b in data["built"]:
        lines.append(f"{b['program']:15} {b['release']:9} {b['version']:28} {b['size'] / 1e6:5.0f} MB  "
                     f"{b['go']:10} built {b['built_at']} in {b['seconds']:.0f}s{' (cold)' if b['cold'] else ''}  "
                     f"{b['path']}")
    return "\n".join(lines)


def cmd_upstream_list(args: argparse.Namespace) -> int:
    from kpemu.upstream import build, store
    from kpemu.upstream.releases import OLDEST_BUILDABLE, buildable

    releases = build.served()
    ok = set(buildable(releases))
    have = {b.release for b in store.all_built() if b.program == "kube-proxy"}
    data = {"oldest_buildable": f"{OLDEST_BUILDABLE.major}.{OLDEST_BUILDABLE.minor}",
            "releases": [{"release": str(r), "buildable": r in ok, "kube_proxy_built": r.tag in have}
                         for r in releases]}
    emit(args, data, _list_text)
    return 0


def _list_text(data: dict) -> str:
    lines = [f"releases of k8s.io/kubernetes the module proxy serves (oldest buildable: {data['oldest_buildable']}):"]
    for r in data["releases"]:
        note = "kube-proxy built" if r["kube_proxy_built"] else "" if r["buildable"] else \
            f"older than {data['oldest_buildable']}: refused"
        lines.append(f"  {r['release']:8} {note}".rstrip())
    return "\n".join(lines)


DEFAULT_CONFORMANCE = ("1.29.6", "1.36.3", "1.37.2")  # the oldest buildable minor's newest patch, 1.36, 1.37


def cmd_upstream_conformance(args: argparse.Namespace) -> int:
    import json
    from pathlib import Path

    from kpemu import conformance
    from kpemu.examples import resolve

    con = human_console(stderr=args.output == "json")
    with progress(con) as say:
        cells = conformance.run([str(resolve(f)) for f in args.topology] if args.topology else None,
                                args.release or list(DEFAULT_CONFORMANCE), args.mode or list(conformance.MODES), say,
                                [str(resolve(f)) for f in args.also])
    data = {"cells": [c.to_json() for c in cells], "table": conformance.table(cells)}
    if args.out:
        Path(args.out).write_text(json.dumps(data, indent=1) + "\n")
    emit(args, data, _conformance_text)
    return 1 if any(c.status == "differs" for c in cells) else 0


def _conformance_text(data: dict) -> str:
    lines = [data["table"], ""]
    for c in data["cells"]:
        if c["status"] == "not run":
            lines.append(f"{c['topology']} {c['release']} {c['mode']}: not run: {c['why']}")
        for d in c["differences"]:
            lines.append(f"{c['topology']} {c['release']} {c['mode']}: {d['node']}: {d['what']}"
                         + (f" (known: {d['known']})" if d["known"] else ""))
            lines += [f"    {x}" for x in d["diff"]]
    return "\n".join(lines)


def register(sub: argparse._SubParsersAction) -> None:
    """Add this module's subcommands."""
    s = add_command(sub, "upstream", "the real kube-proxy, kube-apiserver and etcd, built from source "
                                     "into kpemu's cache",
                    ["kpemu upstream list", "kpemu upstream build 1.36.3", "kpemu upstream status -o json"])
    usub = s.add_subparsers(dest="upstream_command", required=True, parser_class=Parser)
    u = add_command(usub, "build", "build kube-proxy of each RELEASE (default: the newest), and kube-apiserver and "
                                   "etcd of the newest release once; what is built already is reused",
                    ["kpemu upstream build 1.36.3", "kpemu upstream build 1.36.3 1.37.2 --no-control-plane"])
    u.add_argument("release", nargs="*", help="MAJOR.MINOR.PATCH, e.g. 1.36.3")
    u.add_argument("--control-plane", action=argparse.BooleanOptionalAction, default=True,
                   help="also kube-apiserver and etcd of the newest release (default on)")
    u.set_defaults(func=cmd_upstream_build)
    add_query(usub, "status", "what is built, where, its version and size",
              ["kpemu upstream status", "kpemu upstream status -o json"], cmd_upstream_status)
    add_query(usub, "list", "the releases the module proxy serves (go list -m -versions k8s.io/kubernetes)",
              ["kpemu upstream list", "kpemu upstream list -o json"], cmd_upstream_list)
    c = add_query(usub, "conformance", "model versus the real kube-proxy: every shipped topology under each "
                                       "RELEASE in iptables and nftables mode, one table (exit 1 on a difference "
                                       "not known)",
                  ["kpemu upstream conformance", "kpemu upstream conformance --release 1.37.2 --mode nftables"],
                  cmd_upstream_conformance)
    c.add_argument("--release", action="append", help="a release to run (repeat; default: "
                   f"{', '.join(DEFAULT_CONFORMANCE)})")
    c.add_argument("--mode", action="append", choices=("iptables", "nftables"), help="a mode (repeat; default both)")
    c.add_argument("--topology", action="append", metavar="FILE", help="a scenario or topology file (repeat; "
                   "default: every shipped scenario's)")
    c.add_argument("--with", dest="also", action="append", default=[], metavar="FILE",
                   help="a topology checked besides the others, such as an upstream test fixture (repeat)")
    c.add_argument("--out", metavar="FILE", help="also write the cells as JSON to FILE")
