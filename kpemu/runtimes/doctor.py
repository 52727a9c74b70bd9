"""`kpemu doctor`: what this kernel and machine can do, and for each CNI x mode which runtime would run it."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from kpemu.cni.catalog import names
from kpemu.docker.engine import status as docker_status
from kpemu.kernel.probe import PROXY_MODES, Capabilities, Feature, can_run
from kpemu.runtimes import probe_here


@dataclass(frozen=True)
class Doctor:
    """What `doctor` found: the report (`doctor_data`) and the probe's facts its table heads with."""

    data: dict[str, Any]
    kernel: str
    seconds: float
    root: bool


def feature_status(f: Feature) -> str:
    """ok, missing, or not probed (a feature the probe could not try, e.g. kernel features without root)."""
    return "ok" if f.ok else ("not probed" if f.how == "not probed" else "missing")


def doctor_data(caps: Capabilities) -> dict[str, Any]:
    """What `doctor` reports: every feature ok / missing / not probed, and per CNI x mode where it runs."""
    runs = {}
    for c in names():
        for m in PROXY_MODES:
            ok, missing = can_run(caps, c, m)
            unprobed = [n for n in missing if n in caps.features and feature_status(caps.features[n]) == "not probed"]
            lacks = [n for n in missing if n not in unprobed]
            runtime = "host" if ok else ("unknown" if unprobed and not lacks else "vm")
            runs[f"{c}/{m}"] = {"host": ok, "runtime": runtime, "missing": lacks, "not_probed": unprobed}
    data = caps.to_json()
    for name, f in data["features"].items():
        f["status"] = feature_status(caps.features[name])
    data["runs"] = runs
    data["vm_ready"] = caps.has("tool:qemu-system-x86_64") and caps.has("tool:vng")
    ok, detail = docker_status()
    data["docker"] = {"ok": ok, "detail": detail}
    return data


def doctor() -> Doctor:
    """Probe this kernel and machine (KVM included) and say what runs where."""
    caps = probe_here(kvm=True)
    return Doctor(doctor_data(caps), caps.kernel, caps.seconds, caps.root)
