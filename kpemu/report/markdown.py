"""report.md: per flow the hop table, the client outcomes, conntrack/IPVS entries, PASS/FAIL (pure)."""

from __future__ import annotations

from kpemu.analyse.expect import Check
from kpemu.analyse.ledger import FlowLedger
from kpemu.report.table import HEADERS, hop_rows


def _md_row(cells: tuple[str, ...] | list[str]) -> str:
    return "| " + " | ".join(c.replace("|", "\\|") for c in cells) + " |"


def render_markdown(scenario: str, runtime: str, reason: str, kernel: str, ledgers: list[FlowLedger],
                    checks: list[Check], seconds: float) -> str:
    """The whole report.md."""
    ok = all(c.ok for c in checks)
    out = [f"# {scenario}: {'PASS' if ok else 'FAIL'}", "",
           f"- runtime: {runtime} ({reason})", f"- kernel: {kernel}", f"- duration: {seconds:.2f}s", ""]
    for fl in ledgers:
        rep = fl.representative
        out += [f"## flow {fl.name}: {fl.src_member} -> {fl.dst} ({fl.protocol})", ""]
        outcomes = [c.outcome for c in fl.connections]
        backends = sorted({c.backend for c in fl.connections if c.backend})
        out.append(f"{len(outcomes)} connection(s): "
                   + ", ".join(f"{o} x{outcomes.count(o)}" for o in sorted(set(outcomes)))
                   + (f"; answered by {', '.join(backends)}" if backends else ""))
        out.append("")
        if rep and rep.hops:
            out += [f"Connection {rep.index} (`{rep.marker}`, outcome {rep.outcome}"
                    + (f", backend {rep.backend}" if rep.backend else "") + "):", "",
                    _md_row(HEADERS), _md_row(["---"] * len(HEADERS))]
            out += [_md_row(r) for r in hop_rows(rep.hops)]
            out.append("")
        else:
            out += ["No packet of this flow was captured.", ""]
        if rep and rep.conntrack:
            out += ["conntrack:", "", "```"] + [f"{e['node']}: {e['line']}" for e in rep.conntrack] + ["```", ""]
        if rep and rep.ipvs:
            out += ["IPVS connections:", "", "```"] + [f"{e['node']}: {e['line']}" for e in rep.ipvs] + ["```", ""]
        per_conn = [c for c in fl.connections if c.backend or c.request]
        if len(per_conn) > 1:
            out += ["| conn | outcome | backend | tuple at the backend |", "| --- | --- | --- | --- |"]
            for c in fl.connections:
                last = c.request[-1] if c.request else None
                at = f"{last.point}: {last.src} > {last.dst}" if last else ""
                out.append(_md_row([str(c.index), c.outcome, c.backend or "", at]))
            out.append("")
    out += ["## expectations", "", "| flow | check | expected | seen | result |", "| --- | --- | --- | --- | --- |"]
    out += [_md_row([c.flow, c.what, c.expected, c.seen, "PASS" if c.ok else "FAIL"]) for c in checks]
    for c in checks:
        if c.diff:
            out += ["", f"### {c.flow}: {c.what}", "", "```diff", c.diff, "```"]
    return "\n".join(out) + "\n"
