# Plain entry points; each target is one of the scripts in bin/.
.PHONY: run test lint bench

run:
	bin/run

test:
	bin/test

lint:
	.venv/bin/ruff check .

bench:
	.venv/bin/python bench/tag.py
