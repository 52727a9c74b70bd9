"""Model vs kernel (pure): does the path a kernel trace shows for a packet match one the oracle predicts?

Either walker's `Prediction` is compared with the kube-proxy rules the kernel reported (table, chain,
target), read from `xtables-monitor --trace` (kpemu.analyse.attribution.xtables) or `nft monitor trace`
(kpemu.analyse.attribution.nft); any difference is reported as "model vs kernel".
"""

from __future__ import annotations

from dataclasses import dataclass

from kpemu.analyse.oracle.types import Prediction


@dataclass(frozen=True)
class Disagreement:
    """The model's prediction and what the kernel did differ for one packet on one node."""

    node: str
    what: str
    model: str
    kernel: str

    def describe(self) -> str:
        return f"model vs kernel on {self.node}: {self.what}: model {self.model}; kernel {self.kernel}"


def compare_paths(pred: Prediction, kernel_path: list[tuple[str, str, str | None]],
                  kernel_dnat: str | None = None) -> list[Disagreement]:
    """Compare the kube-proxy rules a kernel trace shows (table, chain, target) with the model.

    The kernel took one path; it must be one of the model's outcomes (the one with the same DNAT
    target when known). Returns [] when they agree.
    """
    cands = [o for o in pred.outcomes if kernel_dnat is None or o.dnat == kernel_dnat]
    if not cands:
        return [Disagreement(pred.node, "DNAT target", " or ".join(sorted(pred.endpoints)) or "no DNAT",
                             kernel_dnat or "no DNAT")]
    kernel_path = _without_returns(kernel_path)
    for o in cands:
        if _without_returns(o.kube_path()) == kernel_path:
            return []
    best = cands[0]
    mp = _without_returns(best.kube_path())
    for i in range(max(len(mp), len(kernel_path))):
        a = mp[i] if i < len(mp) else None
        b = kernel_path[i] if i < len(kernel_path) else None
        if a != b:
            return [Disagreement(pred.node, f"rule {i + 1} of the kube-proxy path", _fmt(a), _fmt(b))]
    return []


def _without_returns(path: list[tuple[str, str, str | None]]) -> list[tuple[str, str, str | None]]:
    """The path without `-j RETURN` steps: some kernels (the guest's 6.1 among them) trace a matched
    RETURN rule as the chain's own return event, with no rule attached, so it is not always visible."""
    return [step for step in path if step[2] != "RETURN"]


def _fmt(x: tuple[str, str, str | None] | None) -> str:
    return "nothing" if x is None else f"{x[0]}/{x[1]} -j {x[2]}"
