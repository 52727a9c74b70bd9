"""Checking a scenario's expectations against the ledger, the clients' outcomes and goldens (pure)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from kpemu.analyse.golden import golden_diff, normalise_capture
from kpemu.analyse.ledger import FlowLedger, Hop
from kpemu.analyse.verdict import Verdict
from kpemu.model.scenario import Expectation, HopExpect
from kpemu.model.topology import Topology

TUNNEL_PORTS = {8472, 4789}


@dataclass
class Check:
    """One expectation's verdict, with what was expected and what was seen (for the diff)."""

    flow: str
    what: str  # "outcome", "backends", "hop client/eth0", "golden node1_eth0"
    ok: bool
    expected: str
    seen: str
    diff: str = ""

    def to_json(self) -> dict:
        return {"flow": self.flow, "what": self.what, "ok": self.ok, "expected": self.expected,
                "seen": self.seen, "diff": self.diff}


def fixed_ports(topo: Topology) -> set[int]:
    """Ports that are the same on every run: pod, service, target and node ports, tunnel ports."""
    out = set(TUNNEL_PORTS) | {53}
    for p in topo.pods:
        out |= {pp.port for pp in p.ports}
    for s in topo.services:
        for sp in s.ports:
            out |= {sp.port, sp.target} | ({sp.nodePort} if sp.nodePort else set())
    return out


def _match_ep(want: str | None, ip: str, port: int | None) -> bool:
    if want is None:
        return True
    wip, _, wport = want.partition(":")
    return wip == ip and (not wport or int(wport) == port)


def _hop_ok(h: Hop, e: HopExpect) -> bool:
    outer_ok = e.outer is None or (e.outer == "none" and h.pkt.outer is None) or (
        h.pkt.outer is not None and h.pkt.outer.type == e.outer)
    return _match_ep(e.src, h.pkt.src, h.pkt.sport) and _match_ep(e.dst, h.pkt.dst, h.pkt.dport) and outer_ok


def _want_text(e: HopExpect) -> str:
    parts = [f"src {e.src}" if e.src else "", f"dst {e.dst}" if e.dst else "",
             f"outer {e.outer}" if e.outer else ""]
    return " ".join(p for p in parts if p) or "seen"


def _seen_text(h: Hop) -> str:
    outer = f" outer {h.pkt.outer.type}" if h.pkt.outer else ""
    return f"src {h.src} dst {h.dst} [{h.pkt.flags}]{outer}"


def check_died(exp: Expectation, flow: str, verdicts: Mapping[int, Verdict]) -> list[Check]:
    """`died:`: every unanswered connection died at the expected member, by and for the expected thing."""
    d = exp.died
    if d is None:
        return []
    want = "; ".join(f"{k} {v}" for k, v in (("at", d.at), ("by", d.by), ("reason", d.reason)) if v)
    if not verdicts:
        return [Check(flow, "died", False, want, "no connection died (every one was answered)")]
    bad = []
    for i, v in sorted(verdicts.items()):
        words = v.words()
        if (d.at and d.at != v.at) or (d.by and d.by not in words) or (d.reason and d.reason not in words):
            bad.append(f"connection {i}: {v.text}")
    first = next(iter(verdicts.values()))
    return [Check(flow, "died", not bad, want, "; ".join(bad) if bad else f"at {first.at}: {first.text}")]


def check_flow(exp: Expectation, fl: FlowLedger, rules_text: dict[str, str] | None = None) -> list[Check]:
    """Outcome, backends and hop tuples of one flow; rule lines the kernel must hold (`<node>.<kind>` texts)."""
    rules_text = rules_text or {}
    checks: list[Check] = []
    outcomes = [c.outcome for c in fl.connections]
    want = exp.wanted_outcome
    if want is not None:
        seen = ", ".join(f"{o} x{outcomes.count(o)}" for o in sorted(set(outcomes))) or "no connection"
        ok = bool(outcomes) and all(o == want or (want == "dropped" and o == "unreachable") for o in outcomes)
        checks.append(Check(fl.name, "outcome", ok, f"{want} on all {len(outcomes)} connections", seen))
    if exp.backends is not None:
        got = sorted({c.backend for c in fl.connections if c.backend})
        ok = set(got) == set(exp.backends)
        checks.append(Check(fl.name, "backends", ok, ", ".join(sorted(exp.backends)) or "none",
                            ", ".join(got) or "none"))
    checks += _http_checks(exp, fl)
    for e in exp.hops:
        what = f"hop {e.at} ({e.direction})"
        reached = [[h for h in c.hops if h.point == e.at and h.direction == e.direction] for c in fl.connections]
        reached = [r for r in reached if r]
        if not reached:
            checks.append(Check(fl.name, what, False, _want_text(e), "the packet was not seen there"))
            continue
        # A connection may pass a point twice (hairpin); one of its sightings must match.
        bad = [r for r in reached if not any(_hop_ok(h, e) for h in r)]
        seen = "; ".join(_seen_text(h) for h in (bad[0] if bad else next(
            [h for h in r if _hop_ok(h, e)] for r in reached)))
        if bad:
            seen += f" ({len(bad)} of {len(reached)} connections differ)"
        checks.append(Check(fl.name, what, not bad, _want_text(e), seen))
    for r in exp.rules:
        text = rules_text.get(f"{r.node}.{r.kind}", "")
        missing = [line for line in r.contains if line not in text]
        checks.append(Check(fl.name, f"rules {r.node}.{r.kind}", not missing,
                            "\n".join(r.contains), "missing: " + "\n".join(missing) if missing else "all present",
                            "\n".join(f"- {m}" for m in missing)))
    return checks


def _http_checks(exp: Expectation, fl: FlowLedger) -> list[Check]:
    """httpStatus and bodyContains: every connection's answer must show them."""
    checks = []
    if exp.httpStatus is not None:
        got = [c.status for c in fl.connections]
        ok = bool(got) and all(s == exp.httpStatus for s in got)
        seen = ", ".join(f"{s} x{got.count(s)}" for s in sorted(set(got), key=str)) or "no connection"
        checks.append(Check(fl.name, "http status", ok, f"{exp.httpStatus} on all {len(got)} connections", seen))
    if exp.bodyContains is not None:
        missing = [c.index for c in fl.connections if exp.bodyContains not in (c.answer or "")]
        ok = bool(fl.connections) and not missing
        first = next((c.answer for c in fl.connections if c.index in missing), None) if missing else None
        seen = "in every answer" if ok else (f"missing in connection(s) {missing}: {(first or '').strip()[:80]!r}"
                                            if fl.connections else "no connection")
        checks.append(Check(fl.name, "body", ok, f"contains {exp.bodyContains!r}", seen))
    return checks


def check_goldens(flow: str, golden_dir: Path, texts: dict[str, str], ports: set[int], update: str) -> list[Check]:
    """Compare each capture point's normalised text (keyed `member_iface`) with golden_dir/<key>.txt; a
    failure names the file and `update`, the command that rewrites the goldens."""
    checks = []
    existing = {p.stem for p in golden_dir.glob("*.txt")} if golden_dir.is_dir() else set()
    for key in sorted(set(texts) | existing):
        seen = normalise_capture(texts.get(key, ""), ports)
        gfile = golden_dir / f"{key}.txt"
        if not gfile.exists():
            checks.append(Check(flow, f"golden {key}", False, f"a golden file {gfile}",
                                f"none (if this capture point is new, write it with: {update})"))
            continue
        expected = [line for line in gfile.read_text().splitlines() if line.strip()]
        diff = golden_diff(str(gfile), expected, seen)
        if diff:
            diff += f"\n(if the change is meant: {update}, then review git diff {golden_dir})"
        checks.append(Check(flow, f"golden {key}", not diff, f"{len(expected)} lines", f"{len(seen)} lines", diff))
    return checks


def write_goldens(golden_dir: Path, texts: dict[str, str], ports: set[int]) -> list[Path]:
    """Rewrite golden_dir from the normalised captures (stale files removed); return the files written."""
    golden_dir.mkdir(parents=True, exist_ok=True)
    for old in golden_dir.glob("*.txt"):
        if old.stem not in texts:
            old.unlink()
    out = []
    for key, text in sorted(texts.items()):
        lines = normalise_capture(text, ports)
        path = golden_dir / f"{key}.txt"
        path.write_text("".join(line + "\n" for line in lines))
        out.append(path)
    return out
