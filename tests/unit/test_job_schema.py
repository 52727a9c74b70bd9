"""The typed hand-off (kpemu.jobs.schema): a job and collected.json survive JSON unchanged, a job of
another version is refused before anything runs, and a malformed document names its field."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest

from kpemu.errors import EnvironmentProblem, InputError
from kpemu.inputs.scenario import load_scenario
from kpemu.jobs import agent, exchange, execute
from kpemu.jobs.build import collect_job
from kpemu.jobs.schema import JOB_VERSION, Collected, Job, Readback, Reply, Request
from kpemu.labplan import lab_plan
from kpemu.plan.faultstep import AppliedFault, FaultStep
from kpemu.plan.tracing import CounterSnapshot, TraceData
from tests.helpers import ROOT

SCENARIO = ROOT / "scenarios" / "nodeport-ipvs.yaml"

# collected.json as the executor writes it (and old run folders hold it)
COLLECTED_JSON: dict[str, Any] = {
    "results": {"f": {"name": "f", "connections": [{"outcome": "reply", "backend": "web-0"}], "stderr": ""}},
    "conntrack": {"node1": "tcp 6 117 TIME_WAIT src=10.0.0.1 ...\n"},
    "ipvs": {"node1": ""},
    "traces": {"f": {"texts": {"node1": "trace id 1 ..."}, "unavailable": None,
                     "before": {"iptables": {"node1": "*nat\n"}, "ipvs_stats": {}},
                     "after": {"iptables": {"node1": "*nat\n[1:60] -A ...\n"}, "ipvs_stats": {}},
                     "drops_unavailable": "no bpftrace", "drop_members": {"4026532": "node1"}, "drops": ""}},
    "points": [{"ns": "kp-t-node1", "name": "eth0", "member": "node1", "role": "node-eth0", "kind": "ethernet"}],
    "faults": [{"kind": "rp-filter", "member": "node1", "netns": "kp-t-node1",
                "commands": [["sysctl", "-q", "-w", "net.ipv4.conf.all.rp_filter=1"]], "delete_rules": None,
                "delete_nft": None,
                "change": "strict reverse-path filtering", "symptom": "dropped on input", "after": None,
                "elsewhere": [], "rules_changed": [], "conntrack": [], "kernel_wide": None,
                "done": ["sysctl -q -w net.ipv4.conf.all.rp_filter=1"]}],
    "balanced": [{"balancer": "lb", "status": {"node1:32000": 200, "node2:32000": None}}],
    "seconds": 3.5, "trace": True, "kernel": "6.1.0-57-amd64",
    "readback": [{"node": "node1", "kind": "iptables", "expected": "*nat\n", "chains": {"nat": ["KUBE-SERVICES"]}},
                 {"node": "node1", "kind": "ipset", "expected": "", "sets": ["KUBE-CLUSTER-IP"]},
                 {"node": "node1", "kind": "ipvs", "expected": "-A -t 10.96.0.10:80 -s rr\n"}],
    "timings": [["create the namespaces", 0.012], ["flow f", 1.5]],
}


def _job() -> Job:
    sc = load_scenario(SCENARIO)
    return collect_job(sc, lab_plan(sc.topology, (6, 1), sc.spec.faults))


def test_a_job_survives_json_unchanged() -> None:
    job = _job()
    data = json.loads(json.dumps(job.to_json()))
    assert Job.from_json(data) == job
    assert data["version"] == JOB_VERSION and data["flows"][0]["from"] == job.flows[0].from_
    assert Job.from_json(data).flows[0].match.backends == job.flows[0].match.backends  # tuples again, not lists


def test_a_jobs_faults_cross_as_fault_steps_and_come_back_as_applied_faults() -> None:
    sc = load_scenario(ROOT / "scenarios" / "faults" / "rp-filter.yaml")
    job = collect_job(sc, lab_plan(sc.topology, (6, 1), sc.spec.faults))
    again = Job.from_json(json.loads(json.dumps(job.to_json())))
    assert again == job and [type(f) for f in again.faults] == [FaultStep]
    assert again.faults[0].commands[2][:3] == ("ip", "route", "replace")  # tuples again, not lists
    col = Collected.from_json(copy.deepcopy(COLLECTED_JSON))
    assert col.faults == (AppliedFault(
        "rp-filter", "node1", "kp-t-node1", commands=(("sysctl", "-q", "-w", "net.ipv4.conf.all.rp_filter=1"),),
        change="strict reverse-path filtering", symptom="dropped on input",
        done=("sysctl -q -w net.ipv4.conf.all.rp_filter=1",)),)


def test_collected_json_survives_unchanged() -> None:
    col = Collected.from_json(copy.deepcopy(COLLECTED_JSON))
    assert col.traces["f"].after == CounterSnapshot({"node1": "*nat\n[1:60] -A ...\n"}, {})
    assert col.readback[1] == Readback("node1", "ipset", "", sets=("KUBE-CLUSTER-IP",))
    assert col.timings[1] == ("flow f", 1.5)
    assert col.to_json() == COLLECTED_JSON


def test_an_old_collected_json_without_the_later_fields_still_reads() -> None:
    later = ("faults", "balanced", "readback", "timings")
    old = {k: v for k, v in copy.deepcopy(COLLECTED_JSON).items() if k not in later}
    for key in ("drops", "drops_unavailable", "drop_members"):
        del old["traces"]["f"][key]
    col = Collected.from_json(old)
    assert (col.faults, col.readback, col.timings) == ((), (), ())
    assert col.traces["f"].drops == "" and col.traces["f"].drop_members == {}
    assert Collected.from_json({**old, "traces": {"f": {**old["traces"]["f"], "before": None}}}).traces["f"] == \
        TraceData(texts={"node1": "trace id 1 ..."}, after=col.traces["f"].after)


def test_a_job_of_another_version_is_refused() -> None:
    data = {**_job().to_json(), "version": JOB_VERSION + 1}
    with pytest.raises(EnvironmentProblem) as e:
        Job.from_json(data)
    assert str(e.value) == (
        f"job version {JOB_VERSION + 1} cannot be executed: this kpemu executes job version {JOB_VERSION} "
        "(the host and the executor run different kpemu code)\n"
        "  fix: run the same kpemu on both sides (a warm guest: kpemu vm down, then run again)")
    assert e.value.exit_code == 3


def test_the_agent_refuses_a_job_of_another_version_before_executing(tmp_path: Path) -> None:
    exchange.prepare(tmp_path)
    req = {"id": "r1", "kind": "collect", "job": {**_job().to_json(), "version": 0}}
    read, res = agent.answer(tmp_path, req)
    assert read is None and res.rc == 3 and res.error.startswith("job version 0 cannot be executed: ")


def test_a_request_and_its_reply_survive_json_unchanged() -> None:
    req = Request(id="r1", kind="exec", by="1234:5678", lab="flannel", member="node1", argv=("ip", "-br", "link"))
    assert req.to_json() == {"id": "r1", "kind": "exec", "by": "1234:5678", "lab": "flannel", "member": "node1",
                             "argv": ["ip", "-br", "link"]}
    assert Request.from_json(json.loads(json.dumps(req.to_json()))) == req
    job = Request(id="r2", kind="collect", job=_job())
    assert Request.from_json(json.loads(json.dumps(job.to_json()))) == job
    reply = Reply(rc=0, namespaces=("kp-t-node1",), seconds=0.5)
    assert reply.to_json() == {"rc": 0, "seconds": 0.5, "namespaces": ["kp-t-node1"]}
    assert Reply.from_json(json.loads(json.dumps(reply.to_json()))) == reply


def test_a_malformed_request_is_answered_with_its_field_before_anything_runs(tmp_path: Path) -> None:
    exchange.prepare(tmp_path)
    read, res = agent.answer(tmp_path, {"id": "r1", "kind": "exec", "argv": "ls"})
    assert (read, res) == (None, Reply(rc=2, error="request: argv: expected a list, got 'ls'"))
    assert not (tmp_path / exchange.WORK / "r1").exists()


@pytest.mark.parametrize(("version", "code", "said"), [
    (JOB_VERSION + 1, 3, f"kpemu: job version {JOB_VERSION + 1} cannot be executed: "),
    ("one", 2, "kpemu: job: version: expected an integer, got 'one'\n"),
])
def test_the_executor_refuses_a_bad_job_file_with_its_exit_code(version: object, code: int, said: str, tmp_path: Path,
                                                                capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "job.json").write_text(json.dumps({**_job().to_json(), "version": version}))
    assert execute.main([str(tmp_path / "job.json"), str(tmp_path / "out")]) == code
    assert capsys.readouterr().err.startswith(said)
    assert not (tmp_path / "out").exists()  # refused before anything ran


@pytest.mark.parametrize(("change", "message"), [
    (lambda d: d.pop("version"), "job: version: missing"),
    (lambda d: d.update(version="1"), "job: version: expected an integer, got '1'"),
    (lambda d: d.update(kind="run"), "job: kind: expected one of 'deploy', 'collect', got 'run'"),
    (lambda d: d["flows"][0].update(port="80"), "job: flows[0].port: expected an integer, got '80'"),
    (lambda d: d["flows"][0]["match"].pop("dst"), "job: flows[0].match.dst: missing"),
    (lambda d: d["flows"][0]["match"].update(backends=[["10.0.0.1"]]),
     "job: flows[0].match.backends[0]: expected a list of 2, got ['10.0.0.1']"),
    (lambda d: d["steps"][0].update(argv="ip -batch -"), "job: steps[0].argv: expected a list, got 'ip -batch -'"),
    (lambda d: d["nodes"].update(node1=7), "job: nodes.node1: expected a string, got 7"),
    (lambda d: d.update(trace=1), "job: trace: expected true or false, got 1"),
    (lambda d: d.update(servers={}), "job: servers: expected a list, got {}"),
    (lambda d: d.update(faults=[{"kind": "rp-filter", "member": "node1"}]), "job: faults[0].netns: missing"),
    (lambda d: d.update(faults=[{"kind": "rp-filter", "member": "n", "netns": "kp-n", "commands": ["sysctl"]}]),
     "job: faults[0].commands[0]: expected a list, got 'sysctl'"),
])
def test_a_malformed_job_names_its_field(change: Any, message: str) -> None:
    data = _job().to_json()
    change(data)
    with pytest.raises(InputError) as e:
        Job.from_json(data)
    assert str(e.value) == message
    assert e.value.exit_code == 2


@pytest.mark.parametrize(("change", "message"), [
    (lambda d: d.pop("kernel"), "collected.json: kernel: missing"),
    (lambda d: d["traces"]["f"].update(before="x"), "collected.json: traces.f.before: expected an object, got 'x'"),
    (lambda d: d["results"]["f"].update(connections=None),
     "collected.json: results.f.connections: expected a list, got None"),
    (lambda d: d["readback"][0].update(kind="ebtables"),
     "collected.json: readback[0].kind: expected one of 'iptables', 'ipset', 'ipvs', 'nft', got 'ebtables'"),
    (lambda d: d["timings"].append(["x"]), "collected.json: timings[2]: expected a list of 2, got ['x']"),
])
def test_a_malformed_collected_json_names_its_field(change: Any, message: str) -> None:
    data = copy.deepcopy(COLLECTED_JSON)
    change(data)
    with pytest.raises(InputError) as e:
        Collected.from_json(data)
    assert str(e.value) == message


def test_a_document_that_is_not_an_object_is_refused() -> None:
    with pytest.raises(InputError) as e:
        Collected.from_json(["results"])
    assert str(e.value) == "collected.json: expected an object, got ['results']"
