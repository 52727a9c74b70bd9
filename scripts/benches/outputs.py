"""What a run's outputs cost: writing run.pcapng from per-interface pcaps, rendering report.html."""

from __future__ import annotations

import gzip
import json
import tempfile
import time
from pathlib import Path

from scapy.layers.inet import IP, TCP
from scapy.layers.l2 import Ether
from scapy.utils import wrpcap

from kpemu.analyse.ledger import PointInfo
from kpemu.capture.pcap import read_pcap
from kpemu.inputs.scenario import load_scenario
from kpemu.report.html import render_html
from kpemu.report.pcapng import write_run_pcapngs

ROOT = Path(__file__).resolve().parents[2]
POINTS, PER_POINT = 10, 1000


def pcapng() -> list[dict]:
    """run.pcapng from 10 captures of 1000 TCP packets each (the decoding a run does anyway not counted)."""
    with tempfile.TemporaryDirectory(prefix="kpemu-bench-") as d:
        tmp = Path(d)
        files, infos = {}, {}
        for i in range(POINTS):
            point = f"m{i}/eth0"
            pkts = [Ether() / IP(src="10.0.0.1", dst="10.0.0.2", id=k) / TCP(sport=1000 + k, dport=80, flags="S")
                    for k in range(PER_POINT)]
            for k, p in enumerate(pkts):
                p.time = 1.0 + k * 1e-4 + i * 1e-6
            files[point] = tmp / f"m{i}.pcap"
            wrpcap(str(files[point]), pkts, nano=True)
            infos[point] = PointInfo(point, f"kp-b-m{i}", f"m{i}", "eth0", None, "external")
        packets = [p for point, path in files.items() for p in read_pcap(path, point)]
        decoded = time.perf_counter()
        write_run_pcapngs(tmp, infos, files, [], packets)
        done = time.perf_counter()
    n = POINTS * PER_POINT
    return [{"name": "outputs.pcapng_write_frames_per_s", "value": n / (done - decoded), "unit": "frames/s"}]


def html() -> list[dict]:
    """report.html of the largest saved run (loadbalancer-vxlan), rendered 20 times."""
    hops = json.loads(gzip.decompress((ROOT / "tests/data/reports/loadbalancer-vxlan.json.gz").read_bytes()))
    topo = load_scenario(ROOT / "scenarios/loadbalancer-vxlan.yaml").topology
    started = time.perf_counter()
    for _ in range(20):
        page = render_html(hops, topo, files=["run.pcapng"])
    ms = (time.perf_counter() - started) / 20 * 1000
    return [{"name": "outputs.report_html_ms", "value": ms, "unit": "ms"},
            {"name": "outputs.report_html_kb", "value": len(page) / 1024, "unit": "KiB"}]


BENCHES = [pcapng, html]
