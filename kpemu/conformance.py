"""Model versus the real kube-proxy over every shipped topology (`kpemu conformance`, `make conformance`):
for each topology, each release and each mode this kernel runs, the real kube-proxy programs the
topology's nodes and what it wrote is compared with what kpemu's model generates for the same objects
(kpemu.realproxy.compare); one table, topology x release x mode: equal, the differences, a known
difference with its reason, or why the cell was not run.

One control plane per topology (its objects do not change across releases and modes); per cell a lab of
the topology's fabric (its namespaces, addresses, CNI and kubelet's rules, no traffic) is built, one
kube-proxy per node syncs, the kernel is read back, and the lab is removed.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from kpemu.controlplane.flags import service_range
from kpemu.controlplane.plane import ControlPlane, start_with_ranges
from kpemu.controlplane.write import delete_objects, split_for_start, write_objects
from kpemu.errors import KpemuError
from kpemu.jobs.build import deploy_job, release_tuple
from kpemu.jobs.execute import deploy
from kpemu.k8s import emit
from kpemu.kernel import snapshot
from kpemu.kernel.lab import destroy
from kpemu.labplan import lab_plan
from kpemu.model.topology import KubeProxy, Topology
from kpemu.model.validate import check_topology
from kpemu.realproxy import nodes
from kpemu.realproxy.binary import Binary
from kpemu.realproxy.compare import Difference, differences
from kpemu.realproxy.config import as_probed, kubeconfig, with_apiserver_service
from kpemu.realproxy.known import known_reason
from kpemu.realproxy.spec import real_kube_proxy
from kpemu.statedir import scratch_dir

LAB = "conformance"  # the lab each cell builds
CONTROL_PLANE_LAB = "conformance-api"  # where the control plane lives (destroying a cell's lab leaves it)
MODES = ("iptables", "nftables")  # the modes this kernel runs (IPVS needs kpemu's guest)


@dataclass
class Cell:
    """One topology x release x mode: `status` equal | differs | known | not run, with the differences
    (those a known reason covers say it) or why it did not run."""

    topology: str
    release: str
    mode: str
    status: str
    why: str = ""
    differences: list[dict[str, Any]] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        return {"topology": self.topology, "release": self.release, "mode": self.mode, "status": self.status,
                "why": self.why, "differences": self.differences}


def cell_topology(topo: Topology, mode: str, binary: Binary, minor: int) -> Topology | str:
    """The topology run by kube-proxy `binary` (release 1.<minor>) in `mode`, or why the model cannot
    predict that (the release lacks the mode, or kpemu does not model it)."""
    try:
        kp = KubeProxy.model_validate({**topo.kubeProxy.model_dump(), "mode": mode, "version": f"1.{minor}",
                                       "implementation": "upstream", "upstream": binary.path})
    except ValidationError as e:
        return "; ".join(err["msg"] for err in e.errors())[:300]
    cell = topo.model_copy(update={"kubeProxy": kp})
    problems = check_topology(cell, topo.name)
    if problems:
        return "; ".join(p.message for p in problems)[:300]
    return as_probed(cell)


def _judged(found: list[Difference], mode: str, minor: int) -> tuple[str, list[dict[str, Any]]]:
    out, unexplained = [], 0
    for d in found:
        reason = known_reason(d, mode, minor)
        unexplained += reason is None
        out.append({**d.to_json(), "known": reason})
    return ("equal" if not found else "differs" if unexplained else "known"), out


def run_cell(topo: Topology, binary: Binary, control: dict[str, Path], cidr: str, cp: ControlPlane,
             say: Callable[[str], None]) -> tuple[str, list[dict[str, Any]]]:
    """Build the topology's fabric as lab LAB, start `binary` on every node, write the Services and their
    EndpointSlices, wait for the sync that follows, compare, and remove the lab and those objects."""
    seen = with_apiserver_service(topo, cidr)
    lp = lab_plan(seen.model_copy(update={"name": LAB}), release_tuple(os.uname().release))
    spec = real_kube_proxy(topo, binary, control, cidr)
    job = deploy_job(lp, upstream=spec)
    _, rest = split_for_start(list(spec.objects))
    deploy(job)
    try:
        write_objects(cp.client, rest, list(spec.statuses), topo.name)  # before kube-proxy starts, as a run does
        real = nodes.start(binary.path, spec.configs, job.nodes, kubeconfig(str(cp.client.ca), cp.client.token),
                           ("127.0.0.1", cp.ports.apiserver), scratch_dir(LAB) / "kube-proxy")
        try:
            nodes.wait_synced(real, say)
            ns_of = job.nodes
            found = differences(job.readback, lambda node, kind: snapshot.rules_text(ns_of[node], kind, job.backend))
        finally:
            nodes.stop(real)
            delete_objects(cp.client, rest)
    finally:
        destroy(LAB)
    return _judged(found, topo.kubeProxy.mode, topo.kubeProxy.minor)


def conformance(topologies: Sequence[tuple[str, Topology]], binaries: Sequence[Binary], control: dict[str, Path],
                say: Callable[[str], None], modes: Sequence[str] = MODES) -> list[Cell]:
    """Every cell of topologies x binaries x modes (see the module's docstring)."""
    from kpemu.realproxy.binary import minor_of

    cells: list[Cell] = []
    for label, topo in topologies:
        try:
            cidr = service_range(topo)
            cp = start_with_ranges(CONTROL_PLANE_LAB, cidr, topo.kubeProxy.nodePortRange, control, say)
        except KpemuError as e:
            cells += [Cell(label, b.version.removeprefix("Kubernetes v"), m, "not run", f"the control plane: {e}"[:300])
                      for b in binaries for m in modes]
            continue
        try:
            write_objects(cp.client, split_for_start(emit.objects(topo))[0], [], label)
            for binary in binaries:
                minor = minor_of(binary.version) or 0
                for mode in modes:
                    release = binary.version.removeprefix("Kubernetes v")
                    t = cell_topology(topo, mode, binary, minor)
                    if isinstance(t, str):
                        cells.append(Cell(label, release, mode, "not run", f"the model: {t}"))
                        continue
                    say(f"{label}: kube-proxy {release} in {mode} mode")
                    try:
                        status, diffs = run_cell(t, binary, control, cidr, cp, say)
                        cells.append(Cell(label, release, mode, status, differences=diffs))
                    except (KpemuError, ValueError) as e:
                        cells.append(Cell(label, release, mode, "not run", str(e).split("; the end of")[0][:400]))
        finally:
            cp.stop()
    return cells


def table(cells: Sequence[Cell]) -> str:
    """The cells as one text table: a row per topology, a column per release and mode."""
    cols = sorted({(c.release, c.mode) for c in cells}, key=lambda rm: (tuple(int(x) for x in rm[0].split(".")
                                                                              if x.isdigit()), rm[1]))
    rows = list(dict.fromkeys(c.topology for c in cells))
    by = {(c.topology, c.release, c.mode): c for c in cells}

    def word(c: Cell | None) -> str:
        if c is None:
            return ""
        return {"differs": f"{len(c.differences)} differ", "known": "known"}.get(c.status, c.status)

    heads = ["topology", *(f"{r} {m}" for r, m in cols)]
    body = [[row, *(word(by.get((row, r, m))) for r, m in cols)] for row in rows]
    widths = [max(len(x) for x in col) for col in zip(heads, *body, strict=True)]
    lines = ["  ".join(x.ljust(w) for x, w in zip(line, widths, strict=True)).rstrip() for line in [heads, *body]]
    return "\n".join([lines[0], "  ".join("-" * w for w in widths), *lines[1:]])


def topologies(files: Sequence[str] | None, extra: Sequence[str] = ()) -> list[tuple[str, Topology]]:
    """The topologies to check: of `files` (scenarios or topologies), else of every shipped scenario, then
    of `extra`; each once (by what kube-proxy is given: its objects and settings, whatever the scenario's
    mode and release)."""
    import json

    from kpemu.examples import examples
    from kpemu.inputs.scenario import load_file

    out, seen = [], set()
    for f in [*(files or [str(e.path) for e in examples() if e.kind == "scenario"]), *extra]:
        loaded = load_file(Path(f))
        topo = loaded if isinstance(loaded, Topology) else loaded.topology
        if topo.containers():
            continue  # container members run under docker (kpemu run); conformance builds bare labs
        kp = topo.kubeProxy.model_dump(exclude={"mode", "version", "implementation", "upstream"})
        key = json.dumps([emit.objects(topo), kp, topo.cni], sort_keys=True)
        if key not in seen:
            seen.add(key)
            out.append((Path(f).stem, topo))
    return out


def run(files: Sequence[str] | None, releases: Sequence[str], modes: Sequence[str],
        say: Callable[[str], None], extra: Sequence[str] = ()) -> list[Cell]:
    """`kpemu upstream conformance`: the topologies of `files` (default: the shipped scenarios') and
    `extra` under kube-proxy of each release (built first where the cache lacks it), in each mode."""
    from kpemu.kernel.lab import require_root
    from kpemu.realproxy.binary import of_release
    from kpemu.upstream.build import control_plane_binaries
    from kpemu.upstream.releases import parse_release

    require_root()
    chosen = topologies(files, extra)
    binaries = [of_release(parse_release(r), say) for r in releases]
    return conformance(chosen, binaries, control_plane_binaries(say), say, modes)
