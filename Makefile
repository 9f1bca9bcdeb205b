# tritonize: the two commands a new machine needs are `make demo` and `make test`.
PY ?= python3
VENV := .venv
VPY := $(VENV)/bin/python
JOBS ?= 2

.PHONY: demo test test-gpu bench bench-models venv

$(VENV)/.installed: pyproject.toml
	$(PY) -m venv $(VENV)
	$(VPY) -m pip install -q --upgrade pip
	$(VPY) -m pip install -q torch==2.13.0
	$(VPY) -m pip install -q -e '.[test]'
	touch $@

venv: $(VENV)/.installed

demo: $(VENV)/.installed
	$(VPY) -m tritonize.demo

test: $(VENV)/.installed
	$(VPY) -m pytest -q -n $(JOBS) -p no:cacheprovider tests

# On the GPU machine, from source, with nothing installed: the whole suite on CUDA.
test-gpu:
	PYTHONPATH=src TRITONIZE_TEST_DEVICE=cuda $(PY) -m pytest -q -x -p no:cacheprovider -n 4 tests

bench:
	PYTHONPATH=src $(PY) bench/kernels.py

bench-models:
	PYTHONPATH=src $(PY) bench/models.py
