# tritonize: the two commands a new machine needs are `make demo` and `make test`.
PY ?= python3
VENV := .venv
VPY := $(VENV)/bin/python
JOBS ?= 2

.PHONY: demo test test-gpu bench bench-models venv chromium

$(VENV)/.installed: pyproject.toml
	$(PY) -m venv $(VENV)
	$(VPY) -m pip install -q --upgrade pip
	$(VPY) -m pip install -q torch==2.13.0
	$(VPY) -m pip install -q -e '.[test]'
	touch $@

venv: $(VENV)/.installed

demo: $(VENV)/.installed
	$(VPY) -m tritonize.demo

# Headless Chromium renders tritonize.profile's HTML page in tests/test_profile_report.py (Debian's
# package; without it that test skips and says so).
chromium:
	@command -v chromium >/dev/null || apt-get install -y -q chromium >/dev/null 2>&1 \
		|| (apt-get update -q >/dev/null 2>&1 && apt-get install -y -q chromium >/dev/null 2>&1) \
		|| echo "chromium could not be installed: the HTML page test will skip"

test: $(VENV)/.installed chromium
	$(VPY) -m pytest -q -n $(JOBS) -p no:cacheprovider tests

# On the GPU machine, from source, with nothing installed: the whole suite on CUDA.
test-gpu:
	PYTHONPATH=src TRITONIZE_TEST_DEVICE=cuda $(PY) -m pytest -q -x -p no:cacheprovider -n 4 tests

bench:
	PYTHONPATH=src $(PY) bench/kernels.py

bench-models:
	PYTHONPATH=src $(PY) bench/models.py
