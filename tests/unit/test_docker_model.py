"""Container members in the model and the pure parts of their traffic: `image:` validation, HTTP
flows and expectations, the container client's command and how its exit and output are read,
and the test image's root filesystem."""

from __future__ import annotations

import copy
import io
import tarfile
from pathlib import Path

import pytest
import yaml

from kpemu.analyse.expect import check_flow
from kpemu.analyse.ledger import ConnLedger, FlowLedger
from kpemu.docker.daemon import HOST_UNTOUCHED, PrivateDockerd
from kpemu.docker.image import SERVE, busybox_path, rootfs_tar
from kpemu.errors import InputError
from kpemu.inputs.scenario import load_scenario
from kpemu.model import topology_from_data
from kpemu.model.scenario import Expectation
from kpemu.traffic import http
from kpemu.traffic.container import command_for, connection_result
from tests.helpers import SCENARIOS, TOPOLOGIES

TOPO = yaml.safe_load((TOPOLOGIES / "flannel-vxlan.yaml").read_text())
IMAGE = "kpemu/busybox:local"


def topo_with(pod: dict | None = None, external: dict | None = None) -> dict:
    data = copy.deepcopy(TOPO)
    data["pods"][0].update(pod or {})
    data["externals"][0].update(external or {})
    return data


def problems(data: dict) -> dict[str, str]:
    with pytest.raises(InputError) as e:
        topology_from_data(data, "t.yaml")
    return {p.path: p.message for p in e.value.problems}


def test_image_members_are_listed_as_containers() -> None:
    topo = topology_from_data(topo_with({"image": IMAGE, "command": "/serve", "env": {"PORT": "80"}},
                                        {"image": "curlimages/curl:8.8.0", "command": ["sleep", "60"]}), "t.yaml")
    pod, ext = topo.pods[0], topo.externals[0]
    assert sorted(topo.containers()) == sorted([pod.name, ext.name])
    assert pod.command == ["/serve"]  # a string command is one argument
    assert pod.env == {"PORT": "80"}
    assert not topo.pods[1].has_image


@pytest.mark.parametrize(("pod", "path", "words"), [
    ({"command": ["sleep", "1"]}, "pods[0].command", "applies only to a container"),
    ({"env": {"A": "b"}}, "pods[0].env", "applies only to a container"),
    ({"image": IMAGE, "env": {"1BAD": "x"}}, "pods[0].env.1BAD", "environment variable name"),
    ({"image": "Bad Image!"}, "pods[0].image", "expected an image reference"),
])
def test_bad_container_fields_name_their_path(pod: dict, path: str, words: str) -> None:
    found = problems(topo_with(pod))
    assert path in found and words in found[path]


def test_a_loadbalancer_cannot_be_a_container() -> None:
    ext = {"role": "loadbalancer", "vip": "10.242.72.60", "backends": ["default/web"], "image": IMAGE}
    assert "externals[0].image" in problems(topo_with(external=ext))


def scenario(tmp_path: Path, flows: list[dict], expect: list[dict], external: dict | None = None) -> Path:
    data = {"name": "t-docker", "topology": topo_with({"image": IMAGE}, external), "flows": flows, "expect": expect}
    p = tmp_path / "s.yaml"
    p.write_text(yaml.safe_dump(data))
    return p


def load_problems(path: Path) -> list[str]:
    with pytest.raises(InputError) as e:
        load_scenario(path)
    return [p.path for p in e.value.problems]


def test_http_flow_from_a_container_resolves_as_container_source(tmp_path: Path) -> None:
    flows = [{"name": "f", "from": "client", "to": {"pod": "web-0"}, "http": "/index.html"}]
    sc = load_scenario(scenario(tmp_path, flows, [{"flow": "f", "httpStatus": 200, "bodyContains": "web-0"}],
                                {"image": IMAGE, "command": ["sleep", "60"]}))
    assert sc.flows[0].src_container and sc.flows[0].flow.http == "/index.html"


@pytest.mark.parametrize(("flow", "expect", "external", "path"), [
    ({"command": ["wget", "{dst}"]}, {}, None, "flows[0].command"),  # a bare source has no own client
    ({}, {}, {"image": IMAGE}, "flows[0]"),  # a container source needs http: or command:
    ({}, {"httpStatus": 200}, None, "expect[0].httpStatus"),  # only HTTP flows have a status
    ({"http": "no-slash"}, {}, None, "flows[0].http"),
    ({"http": "/", "protocol": "UDP"}, {}, None, "flows[0].protocol"),
])
def test_container_flow_mistakes(tmp_path: Path, flow: dict, expect: dict, external: dict | None, path: str) -> None:
    flows = [{"name": "f", "from": "client", "to": {"pod": "web-0"}, **flow}]
    assert path in load_problems(scenario(tmp_path, flows, [{"flow": "f", **expect}], external))


def test_the_docker_scenarios_use_container_pods() -> None:
    sc = load_scenario(SCENARIOS / "nodeport-iptables-docker.yaml")
    assert sorted(sc.topology.containers()) == ["nginx-0", "nginx-1", "wget-client"]
    assert [f.src_container for f in sc.flows] == [False, True]
    assert sc.topology.name == "nodeport-iptables-docker"  # its own lab


def test_http_request_carries_the_marker_and_the_response_is_parsed() -> None:
    req = http.request("192.168.49.2", 30180, "/", "kpemu:f:003")
    assert req == (b"GET / HTTP/1.0\r\nHost: 192.168.49.2:30180\r\nUser-Agent: kpemu:f:003\r\n"
                   b"Accept: */*\r\nConnection: close\r\n\r\n")
    assert http.parse_response(b"HTTP/1.0 200 OK\r\nContent-Length: 18\r\n\r\nkpemu pod nginx-1\n") == \
        (200, "kpemu pod nginx-1\n")
    assert http.parse_response(b"kpemu:f:000:reply:x\n") == (None, "")


def test_pod_named_needs_a_whole_name_and_exactly_one() -> None:
    assert http.pod_named("kpemu pod nginx-1\n", ["nginx-1", "nginx-10"]) == "nginx-1"
    assert http.pod_named("kpemu pod nginx-10\n", ["nginx-1", "nginx-10"]) == "nginx-10"
    assert http.pod_named("Welcome to nginx!", ["nginx-0", "nginx-1"]) is None


def test_container_command_is_filled_in(tmp_path: Path) -> None:
    flows = [{"name": "f", "from": "client", "to": {"pod": "web-0"}, "timeout": 2.5,
              "command": ["sh", "-c", "echo {marker} | nc -w {timeout} {dst} {port}"]},
             {"name": "g", "from": "client", "to": {"pod": "web-0"}, "http": "/x"}]
    from kpemu.jobs.build import collect_job
    from kpemu.labplan import lab_plan
    sc = load_scenario(scenario(tmp_path, flows, [], {"image": IMAGE, "command": ["sleep", "60"]}))
    ip = sc.topology.pods[0].ip
    job_flows = [f.to_json() for f in collect_job(sc, lab_plan(sc.topology, (6, 1))).flows]  # as executed
    assert job_flows[0]["container"] is True
    assert command_for(job_flows[0], 2) == ["sh", "-c", f"echo kpemu:f:002 | nc -w 2 {ip} 80"]
    assert command_for(job_flows[1], 0) == ["timeout", "2", "wget", "-S", "-q", "-O", "-", f"http://{ip}:80/x"]


@pytest.mark.parametrize(("code", "out", "err", "outcome", "status", "backend"), [
    (0, "kpemu pod nginx-0\n", "  HTTP/1.0 200 OK\n  Content-Type: text/html\n", "reply", 200, "nginx-0"),
    (0, "kpemu:f:000:reply:nginx-1\n", "", "reply", None, "nginx-1"),
    (1, "", "wget: can't connect to remote host (10.0.0.1): Connection refused\n", "refused", None, None),
    (1, "", "wget: download timed out\n", "dropped", None, None),
    (143, "", "", "dropped", None, None),
    (1, "", "  HTTP/1.0 404 Not Found\nwget: server returned error: HTTP/1.0 404 Not Found\n", "error", 404, None),
    (7, "", "curl: (7) Failed to connect: No route to host\n", "unreachable", None, None),
])
def test_container_client_outcome_from_exit_and_output(code: int, out: str, err: str, outcome: str,
                                                       status: int | None, backend: str | None) -> None:
    rec = connection_result(code, out, err, ["nginx-0", "nginx-1"])
    assert (rec["outcome"], rec["status"], rec["backend"], rec["sport"]) == (outcome, status, backend, None)


def ledger(*answers: tuple[int | None, str | None]) -> FlowLedger:
    fl = FlowLedger("f", "client", "1.2.3.4:80", "TCP")
    fl.connections = [ConnLedger(i, f"kpemu:f:{i:03d}", 40000 + i, "reply", None, answer=a, status=s)
                      for i, (s, a) in enumerate(answers)]
    return fl


def test_http_expectations_check_every_connection() -> None:
    exp = Expectation(flow="f", httpStatus=200, bodyContains="nginx-")
    good = check_flow(exp, ledger((200, "kpemu pod nginx-0"), (200, "kpemu pod nginx-1")))
    assert [(c.what, c.ok) for c in good] == [("http status", True), ("body", True)]
    bad = check_flow(exp, ledger((200, "kpemu pod nginx-0"), (503, "busy")))
    assert [(c.what, c.ok) for c in bad] == [("http status", False), ("body", False)]
    assert bad[0].seen == "200 x1, 503 x1"
    assert "connection(s) [1]" in bad[1].seen


def test_private_dockerd_leaves_the_host_network_alone(tmp_path: Path) -> None:
    d = PrivateDockerd(tmp_path)
    argv = d.argv()
    for flag in ("--bridge=none", "--iptables=false", "--ip6tables=false", "--ip-forward=false", "--ip-masq=false"):
        assert flag in HOST_UNTOUCHED and flag in argv
    assert argv[argv.index("--host") + 1] == f"unix://{tmp_path}/docker.sock"
    assert argv[argv.index("--data-root") + 1] == str(tmp_path / "data")
    assert not d.running()


def test_test_image_rootfs_is_busybox_and_a_page_naming_the_pod() -> None:
    pytest.importorskip("tarfile")
    try:
        busybox_path()
    except Exception:
        pytest.skip("busybox-static is not installed")
    with tarfile.open(fileobj=io.BytesIO(rootfs_tar())) as tar:
        members = {m.name: m for m in tar.getmembers()}
        assert members["bin/busybox"].isfile() and members["bin/busybox"].size > 500_000
        for applet in ("sh", "httpd", "wget", "nc"):
            assert members[f"bin/{applet}"].issym() and members[f"bin/{applet}"].linkname == "busybox"
        serve = tar.extractfile("serve").read().decode()  # type: ignore[union-attr]
    assert serve == SERVE and 'echo "kpemu pod $(hostname)"' in serve and "exec httpd -f" in serve


def test_container_members_need_the_host_runtime(monkeypatch: pytest.MonkeyPatch) -> None:
    from kpemu.docker.engine import HOST_ONLY, blocker
    from kpemu.runtimes import Needs, choose
    from kpemu.runtimes.guest import GuestRuntime

    assert blocker(False, guest_kernel=True) is None  # bare labs go anywhere
    reason, fix = blocker(True, guest_kernel=True)  # type: ignore[misc]
    assert reason.startswith(HOST_ONLY) and "drop `image:`" in fix
    topo = topology_from_data(topo_with({"image": IMAGE, "command": "/serve"}), "t.yaml")
    assert GuestRuntime().refuses(topo) == (reason, fix)
    monkeypatch.setenv("KPEMU_IN_GUEST", "1")  # kpemu run inside the guest: this kernel is the guest's
    runtime, why = choose("host", [Needs(topo.cni, topo.kubeProxy.mode)])[0]
    assert (runtime.name, why) == ("host", "already inside the guest kernel") and runtime.refuses(topo) == (reason, fix)


def test_reports_show_what_an_http_flow_got() -> None:
    from kpemu.analyse.ledger import hops_json
    from kpemu.report.html import render_html
    from kpemu.report.markdown import render_markdown
    from kpemu.report.runreport import RunReport

    def report(fl: FlowLedger) -> RunReport:
        return {"scenario": "s", "runtime": "host", "reason": "why", "kernel": "6.1", "ok": True,
                "flows": [hops_json(fl, True)], "checks": [], "seconds": 1.0}

    fl = ledger((200, "kpemu pod nginx-1 <b>"))
    md = render_markdown(report(fl))
    assert "Connection 0 got HTTP 200:\n\n```\nkpemu pod nginx-1 <b>\n```" in md
    page = render_html(report(fl))
    assert "<p>connection 0 got HTTP 200:</p><pre>kpemu pod nginx-1 &lt;b&gt;</pre>" in page
    assert "got HTTP" not in render_markdown(report(ledger((None, "kpemu:f:000:reply:x"))))  # bare clients' markers


def test_namespace_client_speaks_http_and_names_the_pod_from_the_page() -> None:
    import socket
    import threading

    from kpemu.traffic.client import _tcp

    srv = socket.socket()
    srv.bind(("127.0.0.1", 0))
    srv.listen(1)
    got: list[bytes] = []

    def serve() -> None:
        conn, _ = srv.accept()
        with conn:
            got.append(conn.recv(4096))
            conn.sendall(b"HTTP/1.0 200 OK\r\nContent-Type: text/html\r\n\r\nkpemu pod nginx-1\n")

    t = threading.Thread(target=serve)
    t.start()
    res = _tcp("127.0.0.1", srv.getsockname()[1], "kpemu:f:000", 2.0, "/", ["nginx-0", "nginx-1"])
    t.join()
    srv.close()
    assert b"GET / HTTP/1.0\r\n" in got[0] and b"User-Agent: kpemu:f:000\r\n" in got[0]
    assert (res["outcome"], res["status"], res["reply"], res["backend"]) == ("reply", 200, "kpemu pod nginx-1",
                                                                             "nginx-1")
