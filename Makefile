# Every target creates .venv when missing, so a fresh clone needs nothing installed first.
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: demo test lint bench schemas clean compiled pictures docs corev1 krew evaluate controlplane

$(STAMP): pyproject.toml
	test -d $(VENV) || $(PY) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q -e '.[test]'
	touch $(STAMP)

# Byte-code for the project's modules, written once here (up-to-date files are skipped): every
# `jobtree` process then starts without compiling them, also where PYTHONDONTWRITEBYTECODE is set.
compiled: $(STAMP)
	$(BIN)/python -m compileall -q reconciler planner schemas bench evaluation

demo: compiled
	$(BIN)/python -m reconciler.cli.demo

lint: $(STAMP)
	$(BIN)/ruff format --check .
	$(BIN)/ruff check .
	$(BIN)/mypy
	$(BIN)/lint-imports

# kube-apiserver, etcd and kwok, built from their Go modules once into a cache outside the checkout
# (~/.cache/jobtree/controlplane/<versions>/): the cluster tests run against them. Needs Go >= 1.26.
controlplane:
	@tests/support/controlplane/build.sh >/dev/null

test: controlplane lint compiled
	$(BIN)/pytest -n 2

# `make bench BENCH=--million` adds the 1,000,000-GPU rows (about an hour on 2 CPUs); any bench.run option goes there.
BENCH ?=
# `make bench BENCH=--nodes-10k`: the 10,000-node rows alone, one control plane of realistic GPU nodes (bench/README.md)
bench: compiled
	$(BIN)/python -m bench.run $(BENCH)

# A month of a GPU fleet replayed against Jobtree and four baseline schedulers (docs/evaluation.md):
# rewrites docs/evaluation/ (results, figures), or with TRACE=path (a Helios or Philly CSV trace)
# writes build/evaluation/<name>/. Installs matplotlib (the `evaluate` extra) for the figures.
EVALUATE := $(VENV)/.evaluate
$(EVALUATE): $(STAMP)
	$(BIN)/pip install -q -e '.[test,evaluate]'
	touch $(EVALUATE)

evaluate: compiled $(EVALUATE)
	$(BIN)/python -m evaluation $(if $(TRACE),--trace $(TRACE))

# The pictures (state/fleet.svg, state/timeline.svg) opened in headless Chromium: each reads without
# an error and draws every run in its colour; the screenshots are kept in build/pictures/. Installs
# Debian's chromium package when no Chromium is found (as root, or through sudo).
CHROMIUM ?= $(shell command -v chromium || command -v chromium-browser || command -v google-chrome)
SUDO := $(shell [ "$$(id -u)" = 0 ] || echo sudo)
pictures: compiled
	@if [ -z "$(CHROMIUM)" ]; then $(SUDO) apt-get update -q && DEBIAN_FRONTEND=noninteractive $(SUDO) apt-get install -y -q chromium; fi
	JOBTREE_CHROMIUM="$${JOBTREE_CHROMIUM:-$$(command -v chromium || command -v chromium-browser || command -v google-chrome)}" \
		$(BIN)/pytest -q -p no:cacheprovider tests/browser/
	@echo "screenshots: build/pictures/"

docs: $(STAMP)
	$(BIN)/python -m reconciler.cli.reference docs

# The archive krew installs `kubectl runs` from, and its sha256 in the manifest deploy/krew/runs.yaml
krew: $(STAMP)
	$(BIN)/python deploy/krew/archive.py build/krew/kubectl-runs.tar.gz

schemas: $(STAMP)
	$(BIN)/python -m schemas.publish
	cp schemas/crds/*.yaml deploy/crds/  # the copies deploy/crds/kustomization.yaml lists (tests/deploy)

# core/v1's PodSpec as a JSON Schema (schemas/vendor/core-v1-podspec.schema.json), derived from the
# OpenAPI document of the k8s.io/kubernetes Go module (fetched once through the Go module proxy, then
# read from the module cache). Needs Go; validation reads the committed file, never the network.
corev1: $(STAMP)
	$(BIN)/python tools/corev1.py

clean:
	rm -rf $(VENV)
