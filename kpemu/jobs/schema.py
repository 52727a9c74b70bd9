"""The typed hand-off between the host and the kernel half: the job the host builds (kpemu.jobs.build)
and what the executor collects (collected.json), as frozen dataclasses with `to_json` and `from_json`.

The executor imports this module in the guest, where every import costs seconds: it uses the
standard library and the light, pure kpemu types the job carries (plan steps, capture points, trace
matches, the CNI's device needs, the client's results). `from_json` refuses a job of another
`JOB_VERSION` (EnvironmentProblem: host and executor run different code) and a malformed document
(InputError naming the field), so a bad file never ends in a KeyError.
"""

from __future__ import annotations

import functools
import types
from dataclasses import MISSING, dataclass, field, fields, is_dataclass
from typing import Any, Literal, TypeVar, Union, get_args, get_origin, get_type_hints

from kpemu.cni.spec import DeviceNeed
from kpemu.errors import EnvironmentProblem, InputError, Problem
from kpemu.plan.batch import Step
from kpemu.plan.faultstep import AppliedFault, FaultStep
from kpemu.plan.lbrules import BalancerSpec
from kpemu.plan.tracing import FlowMatch, TraceData
from kpemu.plan.types import Interface, Namespace
from kpemu.traffic.health import HealthSpec
from kpemu.traffic.result import FlowResult

JOB_VERSION = 1
COLLECTED = "collected.json"

T = TypeVar("T")


@dataclass(frozen=True)
class ContainerSpec:
    """A container member the job starts: its namespace's name, image, command and environment."""

    ns: str
    image: str | None = None
    command: tuple[str, ...] | None = None
    env: dict[str, str] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        return _fields_json(self)


@dataclass(frozen=True)
class ServerSpec:
    """A pod the executor serves: its namespace, and its TCP and UDP ports; `own` when the pod's image
    runs its own server (the executor then only waits for it to listen)."""

    ns: str
    pod: str
    own: bool = False
    tcp: tuple[int, ...] = ()
    udp: tuple[int, ...] = ()
    sctp: tuple[int, ...] = ()

    def to_json(self) -> dict[str, Any]:
        return _fields_json(self)


@dataclass(frozen=True)
class FlowSpec:
    """One flow as the executor sends it: from namespace `src_ns` to `dst:port`, `connections` times;
    `match` says what its trace covers. A `container` source runs `command` in its container."""

    name: str
    src_ns: str
    dst: str
    port: int
    proto: Literal["tcp", "udp", "sctp"]
    match: FlowMatch
    from_: str = field(default="", metadata={"json": "from"})
    connections: int = 1
    timeout: float = 2.0
    size: int = 0
    sport: int | None = None
    http: str | None = None
    command: tuple[str, ...] | None = None
    container: bool = False
    candidates: tuple[str, ...] = ()

    def to_json(self) -> dict[str, Any]:
        return _fields_json(self)


@dataclass(frozen=True)
class Readback:
    """What the kernel must read back on `node` for one kind (kpemu.jobs.verify): `expected` is the
    canonical text; iptables compares kube-proxy's `chains` (table -> chains) only, ipset its `sets`."""

    node: str
    kind: Literal["iptables", "ipset", "ipvs", "nft"]
    expected: str
    chains: dict[str, tuple[str, ...]] = field(default_factory=dict)
    sets: tuple[str, ...] = ()

    def to_json(self) -> dict[str, Any]:
        out = _fields_json(self)
        return {k: v for k, v in out.items() if v or k not in ("chains", "sets")}

    @classmethod
    def from_json(cls, data: object, document: str = "readback") -> Readback:
        """The expectation of `data` (as kube-proxy's state writes it); InputError naming a malformed field."""
        return _document(cls, data, document)


@dataclass(frozen=True, kw_only=True)
class RealKubeProxy:
    """The real kube-proxy a job runs in every node's namespace instead of kpemu's model (kpemu.realproxy),
    and the control plane it reads: the binaries, the API server's ranges, the topology's objects
    (kpemu.k8s.emit) and each node's KubeProxyConfiguration."""

    binary: str
    version: str  # what `kube-proxy --version` says
    build: dict[str, Any] = field(default_factory=dict)  # the cache's manifest of it (kpemu.upstream.store), or {}
    etcd: str
    apiserver: str
    service_cidr: str
    node_port_range: str
    objects: tuple[dict[str, Any], ...]
    statuses: tuple[dict[str, Any], ...] = ()
    configs: dict[str, dict[str, Any]]  # node -> KubeProxyConfiguration (the executor writes its kubeconfig)

    def to_json(self) -> dict[str, Any]:
        return _fields_json(self)


@dataclass(frozen=True, kw_only=True)
class Job:
    """Everything the executor needs to build a lab (`kind` deploy) or to build it, run its flows with
    captures and traces, and remove it (`kind` collect): steps, texts and addresses, nothing to plan."""

    version: int
    kind: Literal["deploy", "collect"]
    lab: str
    source: str = ""
    prefix: str
    namespaces: tuple[Namespace, ...]
    steps: tuple[Step, ...]
    readback: tuple[Readback, ...] = ()
    backend: str
    ipvs: bool = False
    rule_kinds: tuple[str, ...] = ()  # what rules/ saves per node (kpemu.kernel.snapshot.RULE_KINDS)
    trace_kind: str  # the mode's tracer (kpemu.proxy.proxymode.ProxyMode.trace)
    containers: dict[str, ContainerSpec] = field(default_factory=dict)
    nodes: dict[str, str]  # node -> its namespace
    device_needs: tuple[DeviceNeed, ...] = ()
    serve: bool = False  # a deploy job's pods keep serving until destroy (kpemu deploy --serve)
    keep: bool = False  # a collect job's lab stays after its flows, its pods serving (kpemu run --keep)
    # a collect job's
    trace: bool = False
    settle: float = 0.0
    faults: tuple[FaultStep, ...] = ()  # what kpemu.kernel.faults applies, before the first flow or after one
    servers: tuple[ServerSpec, ...] = ()
    health: tuple[HealthSpec, ...] = ()  # kube-proxy's health-check servers, per node (kpemu.proxy.health)
    balancers: tuple[BalancerSpec, ...] = ()  # external load balancers that health-check the nodes
    captures: tuple[Interface, ...] = ()
    snaplen: int = 512  # bytes tcpdump keeps of each frame (the scenario's snaplen)
    nat_members: dict[str, str] = field(default_factory=dict)  # member -> namespace whose conntrack is read
    flows: tuple[FlowSpec, ...] = ()
    render: bool = True  # render the captures as text (a guest leaves it to the host)
    in_guest: bool = False  # it runs in kpemu's guest, as the runtime says (faults and the drop tracer ask)
    upstream: RealKubeProxy | None = None  # the real kube-proxy programs the nodes (their model steps are left out)

    def to_json(self) -> dict[str, Any]:
        return _fields_json(self)

    @classmethod
    def from_json(cls, data: object) -> Job:
        """The job of `data`; EnvironmentProblem for another JOB_VERSION, InputError naming a malformed field."""
        _same_version(data)
        return _document(cls, data, "job")


def _same_version(job: object) -> None:
    """EnvironmentProblem when the job document `job` is of another JOB_VERSION than this code executes."""
    version = job.get("version") if isinstance(job, dict) else None
    if isinstance(version, int) and not isinstance(version, bool) and version != JOB_VERSION:
        raise EnvironmentProblem(f"job version {version} cannot be executed: this kpemu executes job version "
                                 f"{JOB_VERSION} (the host and the executor run different kpemu code)",
                                 "run the same kpemu on both sides (a warm guest: kpemu vm down, then run again)")


@dataclass(frozen=True, kw_only=True)
class Request:
    """One request to the guest's agent (kpemu.jobs.exchange): `collect` or `deploy` a `job`, `destroy`
    a `lab` (or `all`), `inspect` one lab or every one, `exec` `argv` in a lab's `member`, `stop`.
    `by` is the owner token of the process waiting for the answer (kpemu.kernel.runowner). An unknown
    `kind` is answered as one (rc 2), so it stays a string here."""

    id: str
    kind: str
    by: str | None = None
    job: Job | None = None
    lab: str | None = None
    member: str = ""
    argv: tuple[str, ...] = ()
    all: bool = False

    def to_json(self) -> dict[str, Any]:
        return {k: v for k, v in _fields_json(self).items() if k in ("id", "kind") or v not in (None, "", [], False)}

    @classmethod
    def from_json(cls, data: object) -> Request:
        """The request of `data`; EnvironmentProblem for a job of another JOB_VERSION, InputError naming a
        malformed field."""
        _same_version(data.get("job") if isinstance(data, dict) else None)
        return _document(cls, data, "request")


@dataclass(frozen=True, kw_only=True)
class Reply:
    """The agent's answer to a Request: `rc` 0 done, else the exit code kpemu would use, with `error`;
    `seconds` a collect or deploy took, a deployed lab's `namespaces`, what a destroy `removed` and its
    `summary`, an exec's `stdout` and `stderr`, and inspect's `data` (kpemu.kernel.lab.inspect)."""

    rc: int
    error: str = ""
    seconds: float | None = None
    namespaces: tuple[str, ...] = ()
    removed: tuple[str, ...] = ()
    summary: str = ""
    stdout: str = ""
    stderr: str = ""
    data: dict[str, Any] | None = None

    def to_json(self) -> dict[str, Any]:
        return {k: v for k, v in _fields_json(self).items() if k == "rc" or v not in (None, "", [])}

    @classmethod
    def from_json(cls, data: object) -> Reply:
        """The reply of `data`; InputError naming a malformed field."""
        return _document(cls, data, "reply")


@dataclass(frozen=True, kw_only=True)
class Collected:
    """What the executor gathered while the lab was up (collected.json): each flow's client results and
    trace data, conntrack and IPVS tables, the capture points, the faults applied, and how it went."""

    results: dict[str, FlowResult]
    conntrack: dict[str, str]  # member -> conntrack -L text
    ipvs: dict[str, str]  # node -> ipvsadm -Lnc text
    traces: dict[str, TraceData]  # flow -> trace texts, counter snapshots, kernel drops
    points: tuple[Interface, ...]
    faults: tuple[AppliedFault, ...] = ()  # the faults applied (the step and the commands run, `done`)
    balanced: tuple[dict[str, Any], ...] = ()  # each health-checking balancer's checks (kpemu.jobs.balancers)
    seconds: float
    trace: bool
    kernel: str  # the release of the kernel that ran the lab
    readback: tuple[Readback, ...] = ()
    timings: tuple[tuple[str, float], ...] = ()  # (what, seconds) of the steps and phases (`make bench`)
    # the real kube-proxy's run: version, build, control plane and per-node sync seconds, any resync
    upstream: dict[str, Any] | None = None

    def to_json(self) -> dict[str, Any]:
        out = _fields_json(self)
        return out if self.upstream is not None else {k: v for k, v in out.items() if k != "upstream"}

    @classmethod
    def from_json(cls, data: object) -> Collected:
        """What collected.json holds; InputError naming a malformed field."""
        return _document(cls, data, COLLECTED)


# ---------------------------------------------------------------- the JSON codec of these dataclasses


class _Malformed(Exception):
    """A field that is not what its type says: where (as `a.b[0].c`), and what was expected."""

    def __init__(self, where: str, message: str):
        super().__init__(message)
        self.where, self.message = where, message


def _key(f: Any) -> str:
    return f.metadata.get("json", f.name)


def _encode(value: Any) -> Any:
    if is_dataclass(value) and not isinstance(value, type):
        to_json = getattr(value, "to_json", None)
        return to_json() if to_json is not None else _fields_json(value)
    if isinstance(value, list | tuple):
        return [_encode(v) for v in value]
    if isinstance(value, dict):
        return {k: _encode(v) for k, v in value.items()}
    return value


def _fields_json(obj: Any) -> dict[str, Any]:
    """`obj`'s fields as JSON, by their JSON names; nested dataclasses by their own `to_json`."""
    return {_key(f): _encode(getattr(obj, f.name)) for f in fields(obj)}


def _document(cls: type[T], data: object, document: str) -> T:
    try:
        return _dataclass(cls, data, "")
    except _Malformed as e:
        raise InputError([Problem(document, e.where, e.message)]) from None


@functools.cache
def _hints(cls: type) -> dict[str, Any]:
    return get_type_hints(cls)


def _shown(value: object) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def _dataclass(cls: type[T], value: object, where: str) -> T:
    if not isinstance(value, dict):
        raise _Malformed(where, f"expected an object, got {_shown(value)}")
    hints = _hints(cls)
    kwargs = {}
    for f in fields(cls):  # type: ignore[arg-type]
        here = f"{where}.{_key(f)}" if where else _key(f)
        if _key(f) in value:
            kwargs[f.name] = _decode(hints[f.name], value[_key(f)], here)
        elif f.default is MISSING and f.default_factory is MISSING:
            raise _Malformed(here, "missing")
    return cls(**kwargs)


def _decode(tp: Any, value: Any, where: str) -> Any:
    """`value` as type `tp` (JSON lists become tuples where `tp` says so); _Malformed when it is not one."""
    origin, args = get_origin(tp), get_args(tp)
    if tp is Any:
        return value
    if is_dataclass(tp):
        return _dataclass(tp, value, where)
    if origin in (Union, types.UnionType):
        if value is None and type(None) in args:
            return None
        (inner,) = [a for a in args if a is not type(None)]
        return _decode(inner, value, where)
    if origin is Literal:
        if value not in args:
            raise _Malformed(where, f"expected one of {', '.join(repr(a) for a in args)}, got {_shown(value)}")
        return value
    if origin in (tuple, list) or tp is list:
        if not isinstance(value, list):
            raise _Malformed(where, f"expected a list, got {_shown(value)}")
        if origin is tuple and args[-1] is not Ellipsis:
            if len(args) != len(value):
                raise _Malformed(where, f"expected a list of {len(args)}, got {_shown(value)}")
            kinds = list(args)
        else:
            kinds = [args[0] if args else Any] * len(value)
        decoded = [_decode(k, v, f"{where}[{i}]") for i, (k, v) in enumerate(zip(kinds, value, strict=True))]
        return tuple(decoded) if origin is tuple else decoded
    if origin is dict or tp is dict:
        if not isinstance(value, dict):
            raise _Malformed(where, f"expected an object, got {_shown(value)}")
        return {k: _decode(args[1], v, f"{where}.{k}") for k, v in value.items()} if args else dict(value)
    wanted = {bool: "true or false", int: "an integer", float: "a number", str: "a string"}[tp]
    ok = isinstance(value, bool) if tp is bool else isinstance(value, str) if tp is str else \
        isinstance(value, int if tp is int else int | float) and not isinstance(value, bool)
    if not ok:
        raise _Malformed(where, f"expected {wanted}, got {_shown(value)}")
    return value
