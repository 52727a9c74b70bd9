#!/usr/bin/env bash
# Installs everything kpemu needs from nothing on Debian/Ubuntu, as root. Idempotent: a second
# run checks and returns in about a second.
set -euo pipefail
cd "$(dirname "$0")/.."

# The package list lives in kpemu/system.py (standard library only), which `kpemu setup` uses too.
if ! command -v python3 >/dev/null; then
  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends python3 >/dev/null
fi
mapfile -t DEBS < <(python3 kpemu/system.py)
missing=()
for p in "${DEBS[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  echo "setup: installing Debian packages: ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  # wireshark-common asks whether non-root users may capture: answered no
  python3 kpemu/system.py debconf | debconf-set-selections
  # docker.io's maintainer scripts would start the host's docker service (docker0, iptables rules):
  # keep every service from starting while installing; kpemu starts its own dockerd when it needs one.
  noservices=0
  if [ ! -e /usr/sbin/policy-rc.d ]; then
    printf '#!/bin/sh\nexit 101\n' > /usr/sbin/policy-rc.d && chmod +x /usr/sbin/policy-rc.d && noservices=1
  fi
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
  if ((noservices)); then rm -f /usr/sbin/policy-rc.d; fi
fi

PY=${PYTHON:-python3}
if [ ! -x .venv/bin/python ]; then
  echo "setup: creating .venv"
  "$PY" -m venv .venv
fi
if ! .venv/bin/python -c 'import kpemu, pyroute2, scapy, pydantic, rich, yaml, argcomplete, docker, virtme_ng, pytest' 2>/dev/null \
   || [ pyproject.toml -nt .venv/.kpemu-setup-done ]; then
  echo "setup: installing kpemu (editable) and its Python dependencies into .venv"
  .venv/bin/pip install -q --upgrade pip >/dev/null
  .venv/bin/pip install -q -e '.[vm,docker,dev]'
fi

# actionlint, the GitHub workflow's linter (tests/unit/test_workflow.py), built with this machine's Go from the
# Go module proxy into .venv/bin
ACTIONLINT=1.7.12
if ! .venv/bin/actionlint -version 2>/dev/null | grep -qx "v$ACTIONLINT"; then
  if command -v go >/dev/null; then
    echo "setup: building actionlint v$ACTIONLINT (go install)"
    GOBIN="$PWD/.venv/bin" go install "github.com/rhysd/actionlint/cmd/actionlint@v$ACTIONLINT"
  else
    echo "setup: no go here: actionlint not built (install Go, then make setup, to lint the workflow)"
  fi
fi

# The guest kernel (only downloaded when this kernel lacks what some scenario needs).
.venv/bin/kpemu vm setup --if-needed
