"""Offline readers on slow input: `kpemu trace --nft` on a table whose service-ips map holds 10,000
elements (a large cluster's), on a map written as one 10,000-element line, an iptables-save dump
of 10,000 rules, and the slowest case of the readers' fuzz test (in-process, the interpreter's start
excluded); the issue asks under a second for each."""

from __future__ import annotations

import contextlib
import io
import tempfile
import time
from pathlib import Path

from kpemu.cli import main
from tests.unit.fuzz_readers import DATA, TARGETS, cases, run_case

ELEMENTS = 10_000
_TRACE = ["trace", "--node", "node1", "--node-ip", "192.168.1.100", "--src", "10.242.72.50", "--dst",
          "10.96.0.10:80"]


def big_map(elements: int = ELEMENTS, one_line: bool = False) -> str:
    """node1.nft with `elements` more ClusterIP elements in its service-ips map (10.100.x.y . tcp . 80)."""
    text = (DATA / "nft-dump" / "node1.nft").read_text()
    extra = [f"10.{100 + i // 65536}.{i // 256 % 256}.{i % 256} . tcp . 80 : goto service-KHN6ECMT-shop/web/tcp/http"
             for i in range(elements)]
    sep = ", " if one_line else ",\n\t\t\t     "
    anchor = "elements = { 10.96.0.20 . tcp . 9000"
    return text.replace(anchor, "elements = { " + sep.join(extra) + sep + anchor[len("elements = { "):], 1)


def _timed(argv: list[str]) -> tuple[float, int]:
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
        t0 = time.perf_counter()
        rc = main(argv)
        return time.perf_counter() - t0, rc


def bench_nft_big_map() -> list[dict[str, object]]:
    out = []
    _timed([*_TRACE, "--nft", str(DATA / "nft-dump" / "node1.nft")])  # the modules imported before timing
    with tempfile.TemporaryDirectory() as d:
        for name, one_line in (("lines", False), ("one_line", True)):
            path = Path(d) / f"big-{name}.nft"
            path.write_text(big_map(one_line=one_line))
            seconds, rc = _timed([*_TRACE, "--nft", str(path)])
            assert rc == 0, f"trace --nft on a {ELEMENTS}-element map: exit {rc}"
            out.append({"name": f"readers.nft_map_{ELEMENTS}_{name}", "value": seconds, "unit": "s"})
    return out


def bench_iptables_many_rules() -> list[dict[str, object]]:
    text = (DATA / "seed-001.iptables-save").read_text()
    extra = "".join(f"-A KUBE-SERVICES -d 10.{100 + i // 65536}.{i // 256 % 256}.{i % 256}/32 -p tcp -m tcp "
                    "--dport 80 -j KUBE-SVC-4N57TFCL4MD7ZTDA\n" for i in range(ELEMENTS))
    with tempfile.TemporaryDirectory() as d:
        path = Path(d) / "many.iptables-save"
        path.write_text(text.replace("COMMIT\n", extra + "COMMIT\n", 1))
        seconds, rc = _timed(["trace", "--node", "minikube", "--node-ip", "192.168.49.2", "--src", "10.242.72.50",
                              "--dst", "192.168.49.2:30180", "--iptables-save", str(path)])
    assert rc == 0, f"trace --iptables-save with {ELEMENTS} more rules: exit {rc}"
    return [{"name": f"readers.iptables_{ELEMENTS}_rules", "value": seconds, "unit": "s"}]


def bench_fuzz_slowest_case() -> list[dict[str, object]]:
    times: dict[str, float] = {}
    with tempfile.TemporaryDirectory() as d:
        for t in TARGETS:
            for what, data in cases(t, 40):
                r = run_case(t, what, data, Path(d))
                times[f"{t.name}: {what}"] = max(times.get(f"{t.name}: {what}", 0.0), r.seconds)
    slowest = max(times, key=times.__getitem__)
    return [{"name": "readers.fuzz_slowest_case", "value": times[slowest], "unit": "s", "case": slowest}]


BENCHES = [bench_nft_big_map, bench_iptables_many_rules, bench_fuzz_slowest_case]
