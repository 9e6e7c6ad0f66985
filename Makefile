# The two commands of the README, and their parts.
#   make demo   set up, then run the pipeline on the embedded sample (dvc repro) and summarise
#   make test   set up, then run the whole test suite
export PATH := $(CURDIR)/.venv/bin:/usr/games:$(PATH)
export PYTHONUNBUFFERED := 1

.PHONY: setup demo test bench

setup:
	@bash .ci/setup

demo: setup
	dvc repro
	@python -m stages.summary

test: setup
	bash .ci/test $(PYTEST_ARGS)

bench: setup
	@for b in bench/*.py; do echo "== $$b"; python $$b || exit 1; done
