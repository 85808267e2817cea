SHELL := /bin/bash
VENV := .venv
BIN := $(VENV)/bin

# The personal pool's account owns job folders; these match deploy/personal-pool/pool.
export NIGHTSHIFT_JOB_DIR_UID ?= 2000
export NIGHTSHIFT_JOBS_DIR ?= $(CURDIR)/var/jobs
export CONDOR_TOKEN_DIR ?= $(CURDIR)/var/condor-tokens
export NIGHTSHIFT_LIVE_TUNNEL_DIR ?= $(CURDIR)/var/live-tunnels

TEST_DATABASE_URL ?= postgres://postgres:postgres@127.0.0.1:5432/test
TEST_REDIS_URL ?= redis://127.0.0.1:6379/15

.PHONY: run test lint format venv gpu-check bench-venv pool-start pool-stop pool-status db-start db-stop bench bench-sync bench-api bench-list bench-load bench-reports bench-goodput bench-environments bench-datasets bench-sessions bench-usage bench-placement bench-checkpoints bench-polls bench-sync-schedds bench-sync-apply bench-sweep bench-gil clean

venv: $(VENV)/.installed

$(VENV)/.installed: pyproject.toml
	@test -x $(BIN)/python || python3 -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q -e '.[dev]'
	@touch $@

bench-venv: $(VENV)/.bench-installed

$(VENV)/.bench-installed: $(VENV)/.installed
	$(BIN)/pip install -q -e '.[dev,bench]'
	@touch $@

# System packages come first: a fresh Debian needs python3-venv before the venv.
run:
	@deploy/dev/ensure-system run
	@$(MAKE) --no-print-directory venv
	@deploy/dev/run

# The development database make run uses (PostgreSQL under var/postgres/), on its own.
db-start:
	@deploy/dev/ensure-system run
	deploy/dev/database start
db-stop:
	deploy/dev/database stop

pool-start:
	deploy/personal-pool/pool start
pool-stop:
	deploy/personal-pool/pool stop
pool-status:
	deploy/personal-pool/pool status

lint: venv
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/lint-imports

format: venv
	$(BIN)/ruff check --fix .
	$(BIN)/ruff format .

test:
	@deploy/dev/ensure-system test
	@$(MAKE) --no-print-directory venv
	deploy/personal-pool/pool start
	$(MAKE) lint
	DATABASE_URL=$(TEST_DATABASE_URL) $(BIN)/python manage.py makemigrations --check --dry-run
	TEST_DATABASE_URL=$(TEST_DATABASE_URL) TEST_REDIS_URL=$(TEST_REDIS_URL) deploy/dev/run-tests

bench: bench-venv
	deploy/personal-pool/pool start
	DATABASE_URL=$(TEST_DATABASE_URL) REDIS_URL=redis://127.0.0.1:6379/14 \
	$(BIN)/python bench/submit_and_sync.py

bench-sync: bench-venv
	deploy/personal-pool/pool start
	DATABASE_URL=$(TEST_DATABASE_URL) REDIS_URL=redis://127.0.0.1:6379/14 \
	$(BIN)/python bench/sync_scale.py $(ARGS)

# The sync's applying of 10,000 changes alone, on one thread and on two (no pool needed).
bench-sync-apply: bench-venv
	DATABASE_URL=$(TEST_DATABASE_URL) REDIS_URL=redis://127.0.0.1:6379/14 \
	$(BIN)/python bench/sync_apply.py $(ARGS)

# The same over two schedds (the personal pool's second one); ARGS="--jobs 100000".
bench-sync-schedds: bench-venv
	deploy/personal-pool/pool start
	DATABASE_URL=$(TEST_DATABASE_URL) REDIS_URL=redis://127.0.0.1:6379/14 \
	$(BIN)/python bench/sync_schedds.py $(ARGS)

bench-api: bench-venv
	DATABASE_URL=$(TEST_DATABASE_URL) REDIS_URL=redis://127.0.0.1:6379/14 \
	$(BIN)/python bench/api_list.py

bench-list: bench-venv
	DATABASE_URL=$(TEST_DATABASE_URL) REDIS_URL=redis://127.0.0.1:6379/14 \
	$(BIN)/python bench/job_list_scale.py

bench-load: bench-venv
	DATABASE_URL=$(TEST_DATABASE_URL) REDIS_URL=redis://127.0.0.1:6379/14 \
	$(BIN)/python bench/web_load.py $(ARGS)

bench-reports: bench-venv
	DATABASE_URL=$(TEST_DATABASE_URL) $(BIN)/python bench/reports.py

bench-goodput: bench-venv
	deploy/personal-pool/pool start
	$(BIN)/python bench/goodput.py

bench-environments: bench-venv
	deploy/personal-pool/pool start
	$(BIN)/python bench/environments.py

bench-datasets: bench-venv
	DATABASE_URL=$(TEST_DATABASE_URL) $(BIN)/python bench/datasets.py

bench-sessions: bench-venv
	deploy/personal-pool/pool start
	DATABASE_URL=$(TEST_DATABASE_URL) $(BIN)/python bench/sessions.py

# A 10,000-run sweep from API POST to all ClusterIds beside raw itemdata; ARGS="--profile".
bench-sweep: bench-venv
	deploy/personal-pool/pool start
	DATABASE_URL=$(TEST_DATABASE_URL) REDIS_URL=redis://127.0.0.1:6379/14 \
	$(BIN)/python bench/sweep_scale.py $(ARGS)

# How much a thread runs beside a htcondor2 query or submit (does the call keep the GIL?).
bench-gil: bench-venv
	deploy/personal-pool/pool start
	DATABASE_URL=$(TEST_DATABASE_URL) REDIS_URL=redis://127.0.0.1:6379/14 \
	$(BIN)/python bench/bindings_gil.py $(ARGS)

# 1,000 students watching their job pages: the status poll's 304 against the full document.
bench-polls: bench-venv
	DATABASE_URL=$(TEST_DATABASE_URL) REDIS_URL=redis://127.0.0.1:6379/14 \
	$(BIN)/python bench/status_polls.py

bench-usage: bench-venv
	DATABASE_URL=$(TEST_DATABASE_URL) $(BIN)/python bench/usage_sampling.py

# A simulation: no database, no pool. ARGS="--rate 8 --seed 2" changes the load or the draw.
bench-placement: bench-venv
	$(BIN)/python bench/placement.py $(ARGS)

# Checkpoints timed by the workstation against hourly, on the placement bench's owners.
bench-checkpoints: bench-venv
	$(BIN)/python bench/checkpoints.py $(ARGS)

clean:
	rm -rf $(VENV) var/staticfiles

# On a machine with a real NVIDIA GPU: what Nightshift reads of it (docs/gpu-check.md).
# Without a GPU it says so and does nothing else.
gpu-check:
	@if ! command -v nvidia-smi >/dev/null || ! nvidia-smi -L >/dev/null 2>&1; then \
		echo "gpu-check: skipped: no NVIDIA GPU here (nvidia-smi is missing or lists none)."; \
	else \
		deploy/dev/ensure-system test && $(MAKE) --no-print-directory venv && \
		CONDOR_TOKEN_DIR=$(CONDOR_TOKEN_DIR) $(BIN)/python deploy/gpu-check/gpu_check.py $(ARGS) \
		|| { status=$$?; [ -x $(BIN)/python ] || python3 deploy/gpu-check/gpu_check.py --no-pool; exit $$status; }; \
	fi
