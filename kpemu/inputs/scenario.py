"""Reading a scenario: its file, its topology (a file it names, or inline), the overrides and the
`--proxy-mode` renaming applied, its flows resolved and every cross-field check made."""

from __future__ import annotations

import copy
import re
from pathlib import Path
from typing import Any

from kpemu.cni import cni_of
from kpemu.errors import InputError, Problem
from kpemu.faults import check_faults, names
from kpemu.inputs.locate import located
from kpemu.inputs.topology import read_topology_source
from kpemu.inputs.yaml_reader import read_yaml
from kpemu.model import topology_from_data
from kpemu.model.modes import MODE_FACTS
from kpemu.model.parse import parse_model
from kpemu.model.scenario import FAULT_KINDS, Expectation, Scenario, ScenarioSpec, check_expectations, check_flow_names
from kpemu.model.topology import Topology
from kpemu.plan.fabric import capture_points, plan_fabric
from kpemu.plan.flows import resolve_flows


def _merge(base: dict[str, Any], over: dict[str, Any]) -> dict[str, Any]:
    out = copy.deepcopy(base)
    for k, v in over.items():
        out[k] = _merge(out[k], v) if isinstance(v, dict) and isinstance(out.get(k), dict) else copy.deepcopy(v)
    return out


@located
def load_scenario(path: str | Path, proxy_mode: str | None = None, lab: str | None = None,
                  kube_proxy: str | None = None) -> Scenario:
    """Read and validate a scenario file and its topology; InputError lists every problem.

    `proxy_mode` (iptables | ipvs | nftables) overrides the topology's kubeProxy.mode and names the
    lab `<lab>-<mode>`; in a mode other than the file's, rule and golden expectations and a `died: by:`
    naming one of its chains (written for the file's mode) are dropped, the others are kept. Every hop's
    `at` must be one of the lab's capture points. `lab` (the CLI's --name) replaces the lab name the
    file gives: two copies of one scenario run at once under two names. `kube_proxy` (the CLI's
    --kube-proxy, `kube_proxy_choice`) sets who programs the nodes: kpemu's model or the real kube-proxy.
    """
    return scenario_from_data(read_yaml(Path(path)), Path(path), proxy_mode, lab, kube_proxy)


@located
def load_file(path: str | Path) -> Topology | Scenario:
    """A topology or a scenario file (a scenario has `flows:`), read once; InputError lists every problem."""
    path = Path(path)
    if not path.is_dir():
        try:
            data = read_yaml(path)
        except InputError:
            data = None  # several documents (Kubernetes manifests), or bad: the topology reader says which
        if isinstance(data, dict) and "flows" in data:
            return scenario_from_data(data, path)
    return topology_from_data(read_topology_source(path), str(path))


def kube_proxy_choice(text: str) -> dict[str, Any]:
    """`--kube-proxy` as kubeProxy fields: `model`, `upstream` (the newest patch of kubeProxy.version),
    `upstream:1.36.3`, or the path of a kube-proxy binary."""
    if text == "model":
        return {"implementation": "model", "upstream": None}
    if text == "upstream":
        return {"implementation": "upstream"}
    pinned = text.removeprefix("upstream:")
    release = re.fullmatch(r"v?(1)\.(\d{1,4})\.\d{1,4}", pinned)
    # a release: the model predicts that release's minor too, for the comparison
    return {"implementation": "upstream", "upstream": pinned or None,
            **({"version": f"1.{int(release[2])}"} if release else {})}


def scenario_from_data(data: Any, path: Path, proxy_mode: str | None = None, lab: str | None = None,
                       kube_proxy: str | None = None) -> Scenario:
    """`load_scenario` on the already-read YAML of the scenario file `path`."""
    file = str(path)
    if lab is not None and isinstance(data, dict):
        data = {**data, "lab": lab}
    spec = parse_model(ScenarioSpec, data, file, context={FAULT_KINDS: names()})
    if isinstance(spec.topology, str):
        data, topo_file = _topology_file(path, spec.topology)
    else:
        data, topo_file = spec.topology, file
    data = _merge(data, spec.overrides)
    data["name"] = spec.lab or spec.name
    kp = data.get("kubeProxy") if isinstance(data.get("kubeProxy"), dict) else {}
    native = str(kp.get("mode", "iptables"))
    if proxy_mode is not None:
        data["kubeProxy"] = {**kp, "mode": proxy_mode}
        data["name"] = f"{data['name']}-{proxy_mode}"
        if proxy_mode != native:
            spec = spec.model_copy(update={"expect": [_in_other_mode(e, native, proxy_mode) for e in spec.expect]})
    if proxy_mode in (None, native):
        spec = spec.model_copy(update={"expect": [_rules_for(e, native, native) for e in spec.expect]})
    if kube_proxy is not None:
        kp = data.get("kubeProxy") if isinstance(data.get("kubeProxy"), dict) else {}
        data["kubeProxy"] = {k: v for k, v in {**kp, **kube_proxy_choice(kube_proxy)}.items() if v is not None}
    try:
        topo = topology_from_data(data, topo_file)
    except InputError as e:
        prefix = "topology." if topo_file == file else ""
        fixed = [Problem(p.file, prefix + p.path if p.file == file else p.path, p.message) for p in e.problems]
        if spec.overrides:
            fixed = [Problem(p.file, p.path, p.message + " (after the scenario's overrides)") for p in fixed]
        raise InputError(fixed) from None
    flows, problems = resolve_flows(topo, spec.flows, file)
    problems += check_flow_names(spec, file) + check_faults(spec, topo, file)
    problems += check_expectations(spec, topo, file, capture_points(plan_fabric(topo, cni_of(topo).plan)))
    problems += [Problem(file, f"flows[{spec.flows.index(f.flow)}].sourcePort", "a fixed source port is for UDP flows "
                         "(TCP would wait out TIME_WAIT between connections); drop sourcePort or send UDP")
                 for f in flows if f.flow.sourcePort is not None and f.protocol != "UDP"]
    if problems:
        raise InputError(problems)
    return Scenario(spec, topo, path, flows)


def _rules_for(e: Expectation, native: str, run: str) -> Expectation:
    """`e` with only the rule lines for the run's kube-proxy mode `run` (`rules[].mode`; unset: `native`, the
    topology's own)."""
    return e.model_copy(update={"rules": [r for r in e.rules if (r.mode or native) in (run,)]})


def _in_other_mode(e: Expectation, native: str, mode: str) -> Expectation:
    """An expectation written for kube-proxy mode `native`, in `mode`: without its golden and its rule lines
    (but those given for `mode`, `rules[].mode`), and without a `died: by:` that names one of `native`'s
    chains (not `mode`'s): those are that mode's words. Where and why the packet died (`at`, `reason`) are
    kept."""
    died = e.died
    if died is not None and died.by and MODE_FACTS.get(native) and MODE_FACTS[native].names_a_chain(died.by) \
            and not (MODE_FACTS.get(mode) and MODE_FACTS[mode].names_a_chain(died.by)):
        died = died.model_copy(update={"by": None})
    return _rules_for(e, native, mode).model_copy(update={"golden": None, "died": died})


def _topology_file(scenario: Path, name: str) -> tuple[dict[str, Any], str]:
    """The mapping in the scenario's `topology:` file and that file's path; a problem reading it names
    the scenario's `topology` field."""
    topo_path = (scenario.parent / name).resolve()

    def bad(msg: str) -> InputError:
        return InputError([Problem(str(scenario), "topology", f"{name!r}: {msg}; expected the path of a topology "
                                                              "YAML file (relative to the scenario) or an inline "
                                                              "mapping")])

    if not topo_path.exists():
        raise bad("no such file")
    try:
        data = read_topology_source(topo_path)
    except InputError as e:
        raise bad("; ".join(f"{topo_path}{': ' + p.path if p.path else ''}: {p.message}" for p in e.problems)) from None
    if not isinstance(data, dict):
        raise bad(f"{topo_path} is not a topology (its YAML is not a mapping of keys to values)")
    return data, str(topo_path)
