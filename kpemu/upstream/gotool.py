"""Running the Go toolchain for upstream builds: its environment (kpemu's module and build caches),
the module proxy's version list, a module's download, `go mod tidy` and `go build` with progress.

Every go command runs under `nice -n 10` with `-p 1` for builds: the machine stays usable while a
build runs. Failures are EnvironmentProblem (exit 3) carrying go's own first error lines.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import time
from collections.abc import Callable
from pathlib import Path

from kpemu.errors import EnvironmentProblem
from kpemu.upstream import store

NICE = ["nice", "-n", "10"]
GO_FIX = "install Go 1.26 or newer (https://go.dev/dl, or Debian's golang-go where it is new enough) and put " \
         "`go` on PATH"


def go_binary() -> str:
    """The `go` on PATH (or Go's usual /usr/local/go/bin/go); EnvironmentProblem when there is none."""
    found = shutil.which("go") or ("/usr/local/go/bin/go" if Path("/usr/local/go/bin/go").exists() else None)
    if not found:
        raise EnvironmentProblem("upstream builds need the Go toolchain, and there is no `go` here", GO_FIX)
    return found


def environment() -> dict[str, str]:
    """The environment of every go command: kpemu's own caches, static binaries, no workspace, no VCS stamp."""
    env = dict(os.environ)
    env.update(GOMODCACHE=str(store.gomodcache()), GOCACHE=str(store.gocache()), CGO_ENABLED="0",
               GOWORK="off", GO111MODULE="on", GOFLAGS="-modcacherw -buildvcs=false")
    return env


def _errors(output: str, limit: int = 6) -> str:
    """go's error lines without its download chatter."""
    lines = [ln for ln in output.splitlines() if ln.strip() and not ln.startswith("go: downloading")]
    return "\n  ".join(lines[:limit]) or "(no output)"


def run(args: list[str], cwd: Path, what: str, timeout: float = 1800.0) -> str:
    """`go ARGS` in `cwd` under nice; its stdout. A failure is an EnvironmentProblem naming `what`."""
    cwd.mkdir(parents=True, exist_ok=True)
    try:
        res = subprocess.run([*NICE, go_binary(), *args], cwd=cwd, env=environment(), capture_output=True,
                             text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        raise EnvironmentProblem(f"{what}: `go {' '.join(args)}` did not finish in {timeout:.0f}s") from None
    if res.returncode != 0:
        raise EnvironmentProblem(f"{what}: `go {' '.join(args)}` failed:\n  {_errors(res.stderr + res.stdout)}",
                                 _fix(res.stderr))
    return res.stdout


def _fix(stderr: str) -> str:
    if "not available" in stderr or "403" in stderr or "404" in stderr:
        return "the module proxy does not serve a module this release needs; pick another release " \
               "(`kpemu upstream list`)"
    if m := re.search(r"requires go >= (\S+)", stderr):
        return f"this release needs Go {m[1]}: install it, or set GOTOOLCHAIN=go{m[1]} to let go fetch it"
    return ""


def version() -> str:
    """The toolchain's version, e.g. go1.26.8."""
    out = subprocess.run([go_binary(), "env", "GOVERSION"], capture_output=True, text=True, env=environment())
    return out.stdout.strip() or "unknown"


def list_versions(module: str) -> list[str]:
    """Every version of `module` the module proxy lists (`go list -m -versions`)."""
    out = run(["list", "-m", "-versions", module], store.root(), f"listing {module}'s versions", timeout=120)
    return out.split()[1:]


def download(module: str, version: str) -> dict:
    """`go mod download -json MODULE@VERSION`: its JSON (GoMod, Dir, ...). A version the proxy does
    not serve is an EnvironmentProblem carrying go's error."""
    res = subprocess.run([*NICE, go_binary(), "mod", "download", "-json", f"{module}@{version}"],
                         cwd=_mkdir(store.root()), env=environment(), capture_output=True, text=True, timeout=1800)
    try:
        data = json.loads(res.stdout or "{}")
    except ValueError:
        data = {}
    if res.returncode != 0 or data.get("Error") or not data.get("GoMod"):
        raise EnvironmentProblem(f"downloading {module}@{version} failed: {data.get('Error') or _errors(res.stderr)}",
                                 "`kpemu upstream list` lists the releases the module proxy serves")
    return data


def _mkdir(path: Path) -> Path:
    path.mkdir(parents=True, exist_ok=True)
    return path


def build(module_dir: Path, package: str, out: Path, ldflags: str, progress: Callable[[int], None],
          timeout: float = 7200.0) -> float:
    """`go build -p 1 -trimpath -ldflags LDFLAGS -o OUT PACKAGE` in the wrapper module, under nice;
    `progress(n)` hears the count of packages compiled so far (go -v names each). Seconds taken."""
    argv = [*NICE, go_binary(), "build", "-p", "1", "-v", "-trimpath", f"-ldflags={ldflags}", "-o", str(out),
            package]
    t0 = time.monotonic()
    proc = subprocess.Popen(argv, cwd=module_dir, env=environment(), stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True)
    tail: list[str] = []
    compiled = 0
    assert proc.stdout is not None
    for line in proc.stdout:
        line = line.rstrip("\n")
        if _is_package(line):
            compiled += 1
            progress(compiled)
        else:
            tail = [*tail[-20:], line]
        if time.monotonic() - t0 > timeout:
            proc.kill()
    rc = proc.wait()
    if rc != 0:
        raise EnvironmentProblem(f"go build {package} failed (exit {rc}):\n  " + _errors("\n".join(tail), 12),
                                 _fix("\n".join(tail)))
    return time.monotonic() - t0


_PACKAGE = re.compile(r"^[\w.~-]+(/[\w.~+-]+)*$")


def _is_package(line: str) -> bool:
    """Whether a line of `go build -v` names a package (its other lines are errors)."""
    return bool(_PACKAGE.match(line)) and not line.startswith("#")


def package_count(module_dir: Path, package: str) -> int:
    """How many packages `package` is built from (`go list -deps`), for progress."""
    out = run(["list", "-deps", package], module_dir, f"listing {package}'s packages", timeout=600)
    return len(out.split())
