"""The run's pcapng, read by tshark with the command the report prints: for one connection the
same hops in the same order as hops.json, each on its capture point's named interface, VXLAN
decoded on flannel's port."""

from __future__ import annotations

import html
import json
import shlex
import shutil
import subprocess
from pathlib import Path

import pytest

from kpemu.kernel.netns import list_netns
from kpemu.report.table import hop_numbers
from kpemu.report.wireshark import RUN_PCAPNG, flow_pcapng, open_options, tshark_argv
from tests.helpers import SCENARIOS, kpemu, needs_root

pytestmark = [pytest.mark.root, needs_root,
              pytest.mark.skipif(shutil.which("tshark") is None, reason="tshark is not installed (scripts/setup.sh)")]


def _tshark(argv: list[str], cwd: Path) -> list[list[str]]:
    res = subprocess.run(argv, cwd=cwd, capture_output=True, text=True, timeout=60)
    assert res.returncode == 0, res.stderr
    return [line.split("\t") for line in res.stdout.splitlines() if line]


def test_tshark_follows_one_connection_hop_by_hop(tmp_path: Path) -> None:
    res = kpemu("run", "scenarios/clusterip-vxlan.yaml", "--runtime", "host", "--out", str(tmp_path), timeout=180)
    assert res.returncode == 0, "\n".join(ln for ln in res.stdout.splitlines() if ln.startswith("FAIL")) + \
        res.stdout[-2000:] + res.stderr[-2000:]
    assert not list_netns("kp-clusterip-vxlan-")
    data = json.loads((tmp_path / "hops.json").read_text())
    # the first connection that crosses VXLAN (a backend on the other node)
    flow, conn = next((f, c) for f in data["flows"] for c in f["connections"]
                      if any(h["outer"] and h["outer"]["type"] == "vxlan" for h in c["hops"]))
    hops = conn["hops"]
    rows = _tshark(tshark_argv(RUN_PCAPNG, flow["name"], conn["index"]), tmp_path)
    assert [int(r[0]) for r in rows] == [h["frame"] for h in hops]
    assert [r[1] for r in rows] == [f"{h['member']}/{h['interface']}" for h in hops]
    for r, h, num in zip(rows, hops, hop_numbers(hops), strict=True):
        assert r[2].startswith(f"[{flow['name']}#{conn['index']}] hop {num} {h['direction']} at "
                               f"{h['member']}/{h['interface']}")
    # with decode-as, the VXLAN hops show their VNI and inner tuple; their interface is described with its netns
    vx = [h for h in hops if h["outer"] and h["outer"]["type"] == "vxlan"]
    frames = " || ".join(f"frame.number=={h['frame']}" for h in vx)
    seen = _tshark(["tshark", "-r", RUN_PCAPNG, *open_options(), "-Y", frames, "-T", "fields", "-e", "vxlan.vni",
                    "-e", "tcp.dstport", "-e", "frame.interface_description"], tmp_path)
    assert [(int(s[0]), int(s[1])) for s in seen] == [(h["outer"]["vni"], h["dport"]) for h in vx]
    assert all(s[2].startswith(f"{h['member']}/{h['interface']} in {h['netns']}")
               for s, h in zip(seen, vx, strict=True))
    # the flow's own pcapng holds the same hops under their flow_frame numbers
    rows = _tshark(tshark_argv(flow_pcapng(flow["name"]), flow["name"], conn["index"]), tmp_path)
    assert [int(r[0]) for r in rows] == [h["flow_frame"] for h in hops]
    # the reports print that command for each flow's first followed connection
    md, page = (tmp_path / "report.md").read_text(), (tmp_path / "report.html").read_text()
    for f in data["flows"]:
        rep = next(c for c in f["connections"] if c["hops"])
        tshark = shlex.join(tshark_argv(RUN_PCAPNG, f["name"], rep["index"]))
        assert tshark in md and html.escape(tshark) in page
    # the per-interface pcaps stay
    assert len(list((tmp_path / "pcaps").glob("*.pcap"))) >= 10


def test_wireshark_sees_arp_the_real_snaplen_and_what_is_behind_a_veth(tmp_path: Path) -> None:
    import yaml

    scenario = yaml.safe_load((SCENARIOS / "clusterip-vxlan.yaml").read_text())
    scenario.update(name="pcap-polish", snaplen=200, topology=str(SCENARIOS / scenario["topology"]))
    scenario["expect"] = [{k: v for k, v in e.items() if k != "golden"} for e in scenario.get("expect", [])]
    path = tmp_path / "s.yaml"
    path.write_text(yaml.safe_dump(scenario))
    out = tmp_path / "out"
    res = kpemu("run", str(path), "--runtime", "host", "--out", str(out), "--no-trace", timeout=180)
    assert res.returncode == 0, res.stdout[-2000:] + res.stderr[-2000:]
    arp = _tshark(["tshark", "-r", RUN_PCAPNG, "-Y", "arp", "-T", "fields", "-e", "frame.interface_name"], out)
    assert arp, "no ARP frame in the run's pcapng"
    assert all("arp" not in line.lower() for txt in (out / "capture").glob("*.txt") for line in
               txt.read_text().splitlines()), "ARP reached the text the goldens are made from"
    idb = _tshark(["tshark", "-r", RUN_PCAPNG, "-T", "fields", "-e", "frame.interface_name",
                   "-e", "frame.interface_description", "-e", "frame.cap_len", "-e", "frame.len"], out)
    described = {r[0]: r[1] for r in idb}
    pod_side = [(p, d) for p, d in described.items() if "/veth" in p]
    assert pod_side and all(", veth to " in d and d.endswith("(pod)") for _, d in pod_side), pod_side
    assert all(int(r[2]) == min(int(r[3]), 200) for r in idb)  # each frame cut at the scenario's snaplen
    assert set(_idb_snaplens(out / RUN_PCAPNG)) == {200}


def _idb_snaplens(path: Path) -> list[int]:
    """The SnapLen of every Interface Description Block of a little-endian pcapng (its spec, section 4.2)."""
    import struct

    data, pos, out = path.read_bytes(), 0, []
    while pos + 12 <= len(data):
        kind, length = struct.unpack_from("<II", data, pos)
        if kind == 1:
            out.append(struct.unpack_from("<I", data, pos + 12)[0])
        pos += length
    return out
