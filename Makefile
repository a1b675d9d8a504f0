# The two commands: `make up` (run the default job) and `make test` (run every test).
SHELL := /bin/bash
VENV := .venv
PY := $(VENV)/bin/python
PROTO_DIR := packages/ale-proto/proto
PROTO_OUT := packages/ale-proto/src

.PHONY: setup up down status test lint typecheck proto proto-check bench clean dist images

setup:
	@bash scripts/setup.sh

up: setup
	@$(VENV)/bin/ale up $(ARGS)

down:
	@$(VENV)/bin/ale down

status:
	@$(VENV)/bin/ale status

test: setup
	@bash scripts/test.sh $(ARGS)

lint: setup
	@$(VENV)/bin/ruff check .
	@$(VENV)/bin/ruff format --check . || true
	@cd packages/ale-proto && npx --no-install buf lint

typecheck: setup
	@$(VENV)/bin/mypy packages/ale-proto/src packages/ale-rock/src packages/ale-flow/src packages/ale-roll/src src

# Regenerate the committed Python stubs from the .proto files (pinned grpcio-tools).
proto: setup
	@$(PY) -m ale_proto.codegen $(PROTO_DIR) $(PROTO_OUT)
	@cd packages/ale-proto && npx --no-install buf build -o /tmp/ale-v1-current.binpb
	@$(PY) -m ale_proto.docgen /tmp/ale-v1-current.binpb > docs/contract-reference.md

# Wheels and sdists of the four packages and the `ale` meta-package into dist/, then in any venv:
# `pip install --find-links dist ale-rock` (each package's README says which line).
dist: setup
	@$(PY) scripts/dist.py dist

# Service images (admin, worker, proxy, inference, trainer) from the project's base image and the
# wheels scripts/dist.py builds; no registry. `make images ARGS="admin worker"` builds some. docs/deploy.md.
images: setup
	@bash deploy/images/build.sh $(ARGS)

bench: setup
	@for b in bench/*.py; do echo "== $$b"; $(PY) $$b --json || exit 1; done

clean:
	rm -rf .stamps runs
