"""One flow's hop table as Markdown a document can pin (pure): `kpemu runs show RUN --flow F -o md`, and
the block between markers that `--write DOC` puts into a Markdown file and `--check DOC` compares.

A pinned table must be the same on every run of an unchanged data path, so what a run chooses at
random is masked: the client's ephemeral port (the source port of request hops, the destination port
of reply hops, wherever it is printed) becomes `<port>`, and the pcapng frame numbers are left
out. Addresses, service and node ports, flags, tunnels and the rule that changed each hop stay."""

from __future__ import annotations

import difflib
import re

from kpemu.errors import InputError
from kpemu.report.runreport import FlowReport, HopReport, RunReport, representative
from kpemu.report.table import HEADERS, hop_rows, verdict_row

EPHEMERAL = "<port>"


def _md_row(cells: tuple[str, ...] | list[str]) -> str:
    return "| " + " | ".join(c.replace("|", "\\|").replace("\n", "<br>") for c in cells) + " |"


def _client_ports(hops: list[HopReport]) -> set[int]:
    """The ports the kernel chose for this connection: request hops' source, reply hops' destination."""
    return {p for h in hops if (p := h["sport"] if h["direction"] == "request" else h["dport"]) is not None}


def _mask(cell: str, ports: set[int]) -> str:
    return re.sub(r":(\d+)\b", lambda m: f":{EPHEMERAL}" if int(m[1]) in ports else m[0], cell)


def find_flow(report: RunReport, name: str | None) -> FlowReport:
    """The flow called `name` in a run's hops.json (the only one when `name` is None)."""
    flows = report["flows"]
    names = ", ".join(f["name"] for f in flows) or "none"
    if name is None:
        if len(flows) != 1:
            raise InputError(f"the run {report['scenario']!r} has {len(flows)} flows ({names}); "
                             "name one with --flow")
        return flows[0]
    for f in flows:
        if f["name"] == name:
            return f
    raise InputError(f"the run {report['scenario']!r} has no flow {name!r} (its flows: {names})")


def flow_markdown(report: RunReport, flow: FlowReport, stable: bool = True) -> str:
    """One flow's heading line and hop table as Markdown (ephemeral ports masked when `stable`)."""
    conns = flow["connections"]
    outcomes = [c["outcome"] for c in conns]
    summary = ", ".join(f"{o} x{outcomes.count(o)}" for o in sorted(set(outcomes))) or "no connection"
    out = [f"**{report['scenario']} / {flow['name']}**: {flow['from']} -> {flow['to']} ({flow['protocol']}), "
           f"{summary}", "", _md_row(list(HEADERS)), _md_row(["---"] * len(HEADERS))]
    rep = representative(flow)
    hops = rep["hops"] if rep else []
    ports = _client_ports(hops) if stable else set()
    out += [_md_row([_mask(c, ports) for c in row]) for row in hop_rows(hops)]
    verdict = flow.get("verdict")
    if verdict:
        out.append(_md_row(verdict_row(verdict)))
    return "\n".join(out) + "\n"


def _markers(run: str, flow: str) -> tuple[str, str]:
    return f"<!-- kpemu runs show {run} --flow {flow} -->", "<!-- /kpemu -->"


def _span(doc: str, run: str, flow: str) -> tuple[int, int] | None:
    """Where the block of (run, flow) sits in `doc`: the offsets just after its opening marker and of its end."""
    begin, end = _markers(run, flow)
    m = re.search(re.escape(begin) + r"\n", doc)
    if m is None:
        return None
    close = doc.find(end, m.end())
    if close < 0:
        raise InputError(f"the block {begin} has no closing {end}")
    return m.end(), close


def write_block(doc: str, run: str, flow: str, table: str) -> str:
    """`doc` with the (run, flow) block's content replaced by `table` (the block appended when absent)."""
    span = _span(doc, run, flow)
    if span is None:
        begin, end = _markers(run, flow)
        sep = "" if not doc or doc.endswith("\n\n") else ("\n" if doc.endswith("\n") else "\n\n")
        return f"{doc}{sep}{begin}\n{table}{end}\n"
    return doc[:span[0]] + table + doc[span[1]:]


def check_block(doc: str, doc_name: str, run: str, flow: str, table: str) -> str:
    """A unified diff of the pinned block in `doc` against `table` ("" when the same)."""
    span = _span(doc, run, flow)
    if span is None:
        begin, _ = _markers(run, flow)
        raise InputError(f"{doc_name}: no pinned block {begin} (write it with "
                         f"kpemu runs show {run} --flow {flow} --write {doc_name})")
    pinned = doc[span[0]:span[1]]
    if pinned == table:
        return ""
    return "".join(difflib.unified_diff(pinned.splitlines(keepends=True), table.splitlines(keepends=True),
                                        f"{doc_name} (pinned)", f"runs/{run} (this run)", n=1))


def pinned_keys(doc: str) -> list[tuple[str, str]]:
    """Every (run, flow) pinned in `doc`, in order."""
    return re.findall(r"<!-- kpemu runs show (\S+) --flow (\S+) -->", doc)

