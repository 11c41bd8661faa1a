# The two commands of the README (both set everything up first, idempotently):
#   make demo   - the main job on embedded defaults (report under runs/)
#   make test   - the whole test suite
ARGS ?=

.PHONY: demo test build lint clean

demo:
	@bash scripts/demo.sh $(ARGS)

test:
	@bash scripts/test.sh $(ARGS)

build:
	@bash scripts/bootstrap.sh

lint:
	@bash -c 'source scripts/env.sh && ruff check . && ruff format --check .'

clean:
	rm -rf build install log
