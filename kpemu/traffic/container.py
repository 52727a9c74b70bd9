"""Traffic with container members: their own servers (wait until they listen) and their own
client commands (one `docker exec` per connection; the outcome from its exit code and output)."""

from __future__ import annotations

import re
import time

from kpemu.errors import EnvironmentProblem
from kpemu.kernel import netns as nsmod
from kpemu.traffic import http
from kpemu.traffic.markers import parse_reply, request_marker

# busybox wget: -S prints the status line. `timeout` bounds it (busybox 1.35's own wget -T crashes).
HTTP_COMMAND = ["timeout", "{timeout}", "wget", "-S", "-q", "-O", "-", "http://{dst}:{port}{path}"]
TIMED_OUT = (124, 143)  # coreutils timeout / busybox timeout (the command got SIGTERM)
FAILURES = (("refused", "refused"), ("timed out", "dropped"), ("timeout", "dropped"),
            ("no route", "unreachable"), ("unreachable", "unreachable"))


def wait_listening(servers: list[dict], timeout: float) -> None:
    """Wait until every container pod ({ns, pod, tcp, udp} of a job) listens on its TCP and UDP ports
    (read with `ss` in its namespace)."""
    pending = {s["pod"]: {("TCP", p) for p in s["tcp"]} | {("UDP", p) for p in s["udp"]} for s in servers}
    where = {s["pod"]: s["ns"] for s in servers}
    deadline = time.monotonic() + timeout
    while True:
        for name in list(pending):
            out = nsmod.output_in(where[name], ["ss", "-Hltun"])
            open_ = {("TCP" if line.startswith("tcp") else "UDP", int(m.group(1)))
                     for line in out.splitlines() if (m := re.search(r":(\d+)\s+\S+\s*$", line.split("users:")[0]))}
            if pending[name] <= open_:
                del pending[name]
        if not pending:
            return
        if time.monotonic() > deadline:
            raise EnvironmentProblem(f"the containers of {', '.join(sorted(pending))} do not listen on their ports "
                                     f"within {timeout:.0f}s", "check the image's command and the pod's ports")
        time.sleep(0.05)


def command_for(flow: dict, index: int) -> list[str]:
    """The container client's argv for connection `index` of a job's flow (its command, else wget of http:)."""
    template = flow.get("command") or HTTP_COMMAND
    values = {"dst": flow["dst"], "port": str(flow["port"]), "path": flow.get("http") or "/",
              "timeout": str(max(1, round(flow["timeout"]))), "marker": request_marker(flow["name"], index)}
    return [re.sub(r"\{(dst|port|path|timeout|marker)\}", lambda m: values[m.group(1)], a) for a in template]


def connection_result(exit_code: int, stdout: str, stderr: str, candidates: list[str]) -> dict:
    """One connection's record, as the namespace client writes it, from a command's exit and output."""
    both = f"{stdout}\n{stderr}"
    status = http.status_in(both)
    answer = stdout.strip()[: http.MAX_BODY] or None
    parsed = parse_reply(answer or "")
    backend = parsed[1] if parsed else http.pod_named(stdout, candidates)
    if exit_code == 0:
        outcome = "reply"
    elif exit_code in TIMED_OUT:
        outcome = "dropped"
    else:
        low = both.lower()
        outcome = next((o for word, o in FAILURES if word in low), "error")
    out = {"connected": exit_code == 0, "reply": answer, "backend": backend, "outcome": outcome,
           "sport": None, "status": status, "exit": exit_code}
    if exit_code:
        out["error"] = stderr.strip()[-200:]
    return out


def run_in_container(container: str, flow: dict, budget: float) -> tuple[list[dict], str]:
    """Run a job's flow's connections as commands in `container`; (records, stderr of the last failure)."""
    from docker.errors import DockerException
    from requests.exceptions import RequestException

    from kpemu.docker.engine import connect

    client = connect(start=False)
    if client is None:
        raise EnvironmentProblem(f"{flow['from']} is a container but no docker engine answers",
                                 "kpemu destroy --all, then run again")
    c = client.containers.get(container)
    records, err = [], ""
    deadline = time.monotonic() + budget
    for i in range(flow["connections"]):
        if time.monotonic() > deadline:
            break
        argv = command_for(flow, i)
        started = time.monotonic()
        try:
            res = c.exec_run(argv, demux=True)
        except (DockerException, RequestException) as e:  # the engine's own timeout bounds a hung command
            rec = {"connected": False, "reply": None, "backend": None, "outcome": "error", "sport": None,
                   "status": None, "error": str(e)[-200:]}
            err = str(e)
        else:
            stdout, stderr = ((b or b"").decode(errors="replace") for b in (res.output or (b"", b"")))
            rec = connection_result(res.exit_code or 0, stdout, stderr, list(flow["candidates"]))
            if res.exit_code:
                err = stderr.strip()
        rec.update(index=i, marker=request_marker(flow["name"], i), duration=round(time.monotonic() - started, 6),
                   command=argv)
        records.append(rec)
    return records, err
