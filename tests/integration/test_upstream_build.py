"""`kpemu upstream build` really builds kube-proxy from source: into a fresh cache (its wrapper module
made anew from the release's go.mod, the binary compiled, linked and version-stamped), then
`kube-proxy --version` names the release, `status` lists it and a second build reuses it.

Go's module and build caches are shared with the machine's kpemu cache, so this costs a cold build
(about 12 minutes on 2 cores) only on a machine that never built kube-proxy, and seconds after."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from kpemu.upstream import store
from tests.helpers import kpemu

pytestmark = pytest.mark.long
RELEASE = "1.37.2"


def test_kube_proxy_is_built_into_a_fresh_cache_stamped_and_reused(tmp_path: Path) -> None:
    shared = store.root() / "go"  # the machine's GOMODCACHE and GOCACHE
    shared.mkdir(parents=True, exist_ok=True)
    (tmp_path / "upstream").mkdir()
    (tmp_path / "upstream" / "go").symlink_to(shared)
    env = {"KPEMU_CACHE": str(tmp_path)}

    res = kpemu("upstream", "build", RELEASE, "--no-control-plane", env=env, timeout=3600)
    assert res.returncode == 0, res.stderr + res.stdout
    binary = tmp_path / "upstream" / "bin" / f"v{RELEASE}" / "kube-proxy"
    assert f"v{RELEASE}: kube-proxy's wrapper module with" in res.stdout
    assert f"kube-proxy v{RELEASE}: built in" in res.stdout
    go_mod = (tmp_path / "upstream" / "src" / f"v{RELEASE}" / "kube-proxy" / "go.mod").read_text()
    assert f"\n\tk8s.io/kubernetes v{RELEASE}\n" in go_mod  # go mod tidy keeps it in its require block
    assert f"\tk8s.io/client-go => k8s.io/client-go v0.{RELEASE.split('.', 1)[1]}\n" in go_mod

    version = subprocess.run([str(binary), "--version"], capture_output=True, text=True, timeout=60)
    assert version.stdout == f"Kubernetes v{RELEASE}\n"

    status = json.loads(kpemu("upstream", "status", "-o", "json", env=env).stdout)
    assert [(b["program"], b["release"], b["version"], b["path"], b["size"]) for b in status["built"]] == [
        ("kube-proxy", f"v{RELEASE}", f"Kubernetes v{RELEASE}", str(binary), binary.stat().st_size)]

    again = kpemu("upstream", "build", RELEASE, "--no-control-plane", env=env, timeout=3600)
    assert again.returncode == 0, again.stderr
    assert again.stdout.splitlines()[0].split()[:4] == ["kube-proxy", "Kubernetes", f"v{RELEASE}", "already"]
