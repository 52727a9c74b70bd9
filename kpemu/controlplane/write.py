"""Writing a topology's Kubernetes objects (kpemu/k8s/emit.py) through the API, as a client would, and
reading them back."""

from __future__ import annotations

from typing import Any

from kpemu.controlplane.client import ApiError, Client
from kpemu.errors import EnvironmentProblem
from kpemu.k8s import emit
from kpemu.model.topology import Topology


def _name(obj: dict[str, Any]) -> str:
    meta = obj["metadata"]
    return f"{obj['kind']} {meta['namespace'] + '/' if meta.get('namespace') else ''}{meta['name']}"


def write_topology(client: Client, topo: Topology) -> list[dict[str, Any]]:
    """Create every object of the topology, then write the load-balancer statuses; the objects as the
    API server stored them. A refusal names the object and carries the API server's reason."""
    return write_objects(client, emit.objects(topo), emit.statuses(topo), topo.name)


# What the API server makes itself: a topology's copy of it is not written again.
_ITS_OWN = {("Service", "default/kubernetes")}


def write_objects(client: Client, objects: list[dict[str, Any]], statuses: list[dict[str, Any]],
                  source: str) -> list[dict[str, Any]]:
    """`write_topology` of objects and statuses made already (kpemu.k8s.emit), as a job carries them."""
    stored = []
    for obj in objects:
        meta = obj["metadata"]
        if (obj["kind"], f"{meta.get('namespace')}/{meta['name']}") in _ITS_OWN:
            continue  # the API server's own stands for it (its slices are written: they are the topology's)
        try:
            stored.append(client.post(emit.collection(obj), obj))
        except ApiError as e:
            if obj["kind"] == "Namespace" and e.status == 409:
                continue
            raise EnvironmentProblem(f"the API server refused {_name(obj)} of topology {source}: {e.reason}") \
                from None
    for status in statuses:
        path = emit.path_of(status)
        try:
            current = client.get(path)
            current["status"] = status["status"]
            client.put(path + "/status", current)
        except ApiError as e:
            raise EnvironmentProblem(f"the API server refused the load-balancer status of {_name(status)}: "
                                     f"{e.reason}") from None
    return stored


def read_back(client: Client, topo: Topology) -> dict[str, dict[str, Any]]:
    """Every object of the topology as the API server now holds it, by `Kind namespace/name`."""
    return {_name(obj): client.get(emit.path_of(obj)) for obj in emit.objects(topo)}


NODE_KINDS = ("Namespace", "Node")  # what a kube-proxy needs before it starts (it reads its Node at start)


def split_for_start(objects: list[dict[str, Any]]) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """(Namespaces and Nodes, the rest): a control plane kept for several runs keeps the first and
    writes and deletes the rest per run (kpemu.conformance)."""
    return [o for o in objects if o["kind"] in NODE_KINDS], [o for o in objects if o["kind"] not in NODE_KINDS]


def delete_objects(client: Client, objects: list[dict[str, Any]]) -> None:
    """Delete what `write_objects` wrote of `objects` (in reverse order; one not there is no error)."""
    for obj in reversed(objects):
        meta = obj["metadata"]
        if (obj["kind"], f"{meta.get('namespace')}/{meta['name']}") in _ITS_OWN:
            continue
        try:
            client.delete(emit.path_of(obj))
        except ApiError as e:
            if e.status != 404:
                raise EnvironmentProblem(f"the API server refused to delete {_name(obj)}: {e.reason}") from None
