# kpemu: every target that runs kpemu depends on setup, which installs everything from nothing.
SHELL := /bin/bash
VENV := .venv
KPEMU := $(VENV)/bin/kpemu
PY := $(VENV)/bin/python
STAMP := $(VENV)/.kpemu-setup-done
# `make scenario NAME`: the word after `scenario` is the scenario name.
NAME := $(word 2,$(MAKECMDGOALS))

.PHONY: setup test test-unit lint bench scenario scenarios clean-labs

setup: $(STAMP)

$(STAMP): pyproject.toml scripts/setup.sh
	bash scripts/setup.sh
	touch $@

test: setup
	$(VENV)/bin/pytest -ra tests

test-unit: setup
	$(VENV)/bin/pytest -ra tests/unit

lint: setup
	$(VENV)/bin/ruff check kpemu tests scripts

bench: setup
	$(PY) scripts/bench.py

scenario: setup
	@test -n "$(NAME)" || { echo "usage: make scenario NAME (one of: $$(ls scenarios/*.yaml | xargs -n1 basename | sed 's/.yaml//' | tr '\n' ' '))"; exit 2; }
	$(KPEMU) run scenarios/$(NAME).yaml --out runs/$(NAME)

scenarios: setup
	$(KPEMU) run scenarios/*.yaml scenarios/faults/*.yaml --out runs

clean-labs: setup
	$(KPEMU) destroy --all

# Swallow the scenario name given after `make scenario`.
ifneq ($(filter scenario,$(MAKECMDGOALS)),)
$(NAME):
	@:
endif
