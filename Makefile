# kpemu: every target that runs kpemu depends on setup, which installs everything from nothing.
SHELL := /bin/bash
VENV := .venv
KPEMU := $(VENV)/bin/kpemu
PY := $(VENV)/bin/python
STAMP := $(VENV)/.kpemu-setup-done
# `make scenario NAME`: the word after `scenario` is the scenario name.
NAME := $(word 2,$(MAKECMDGOALS))

.PHONY: conformance setup test test-long test-unit test-integration test-vm lint goldens goldens-check bench soak scenario \
	scenarios scenarios-nftables clean-labs

setup: $(STAMP)

$(STAMP): pyproject.toml scripts/setup.sh
	bash scripts/setup.sh
	touch $@

test: setup
	$(VENV)/bin/pytest -ra -m "not long" tests

# The tests of over a minute each (wheel install, frozen and stalled guests); .ci/run runs both targets.
test-long: setup
	$(VENV)/bin/pytest -ra -m long tests

# Model versus the real kube-proxy: every shipped topology and upstream's nftables fixtures under kube-proxy
# 1.29.6, 1.36.3 and 1.37.2 (built into the cache first where missing), iptables and nftables mode.
CONFORMANCE_FIXTURES := tests/data/nftables/overall-1.36.yaml tests/data/nftables/overall-1.37.yaml
conformance: setup
	mkdir -p runs
	$(KPEMU) upstream conformance --out runs/conformance.json $(foreach f,$(CONFORMANCE_FIXTURES),--with $(f))

test-unit: setup
	$(VENV)/bin/pytest -ra tests/unit

# Parts of `test`: real namespaces on this machine (as root), and the guest; long tests stay in test-long.
test-integration: setup
	$(VENV)/bin/pytest -ra -m "not long" tests/integration

test-vm: setup
	$(VENV)/bin/pytest -ra -m "not long" tests/vm

lint: setup goldens-check
	$(VENV)/bin/ruff check kpemu tests scripts

# Rewrite tests/data/golden after a change meant to alter `kpemu rules` output; review the diff like code.
goldens: setup
	$(PY) -m scripts.goldens

goldens-check: setup
	$(PY) -m scripts.goldens --check

bench: setup
	$(PY) scripts/bench.py

# `make soak NAME=nodeport-ipvs N=20`: one scenario N times; passes/N, median and worst time, failures.
soak: setup
	@test -n "$(NAME)" || { echo "usage: make soak NAME=<scenario> N=<runs>"; exit 2; }
	$(PY) scripts/soak.py $(NAME) $(or $(N),10)

scenario: setup
	@test -n "$(NAME)" || { echo "usage: make scenario NAME (one of: $$(ls scenarios/*.yaml | xargs -n1 basename | sed 's/.yaml//' | tr '\n' ' '))"; exit 2; }
	$(KPEMU) run scenarios/$(NAME).yaml --out runs/$(NAME)

scenarios: setup
	$(KPEMU) run scenarios/*.yaml scenarios/faults/*.yaml --out runs

# The iptables-mode scenarios that pass in nftables mode too (their rules: lines given per mode), and the
# faults that apply there (kpemu.matrix.NFTABLES_TOO, which `kpemu matrix` lists); runs/nftables/<name>.
scenarios-nftables: setup
	$(KPEMU) run $$($(KPEMU) matrix --variant nftables --kernels host --files) --proxy-mode nftables --out runs/nftables

clean-labs: setup
	$(KPEMU) destroy --all

# Swallow the scenario name given after `make scenario`.
ifneq ($(filter scenario,$(MAKECMDGOALS)),)
$(NAME):
	@:
endif
