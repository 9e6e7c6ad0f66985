# The two commands of the README, and their parts.
#   make demo   set up, then run the pipeline on the embedded sample (dvc repro) and summarise
#   make test   set up, then run the whole test suite (two workers; TEST_WORKERS=auto or 0 to change)
#   make test-corpus   the optional corpus tier: tests on the real PGN files beside the checkout
#               (tests/corpus.py says where; it reports and exits 0 when they are absent)
#   make lint   ruff's linter and formatter check over the whole tree (CI runs it too)
#   make gpu-check   on a machine with one CUDA device: the GPU profile's paths against the CPU
#               (bench/gpu.py, about 10 minutes; bench/README.md)
#   make lock   after a change to dvc.yaml, params.yaml or the code: rerun what changed (dvc repro),
#               stage dvc.lock and data/'s small uncached files for the commit, and refresh the
#               README's sample summary (tests/pipeline/test_lock.py fails while they are stale)
export PATH := $(CURDIR)/.venv/bin:/usr/games:$(PATH)
export PYTHONUNBUFFERED := 1

.PHONY: setup demo test test-corpus lint lock bench gpu-check

setup:
	@bash .ci/setup

demo: setup
	dvc repro
	@python -m chesscore.pipeline.summary

test: setup
	bash .ci/test $(PYTEST_ARGS)

test-corpus: setup
	bash .ci/test --corpus -m corpus $(PYTEST_ARGS)

lock: setup
	dvc repro
	@python -m chesscore.pipeline.summary --readme README.md
	git add dvc.lock data README.md
	@git status --short dvc.lock data README.md

lint: setup
	ruff check .
	ruff format --check .

bench: setup
	@for b in bench/[!_]*.py; do [ $$b = bench/gpu.py ] && continue; echo "== $$b"; python $$b || exit 1; done  # gpu.py: make gpu-check

gpu-check: setup
	python bench/gpu.py $(GPU_CHECK_ARGS)
