# make demo | make test | make bench   (each creates and uses .venv itself)
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
PIP := $(PY) -m pip
STAMP := $(VENV)/.installed

.PHONY: demo test bench install lint clean

$(PY):
	$(PYTHON) -m venv $(VENV)
	$(PIP) install --quiet --upgrade pip

# A regular (not editable) install of the package with every extra, pinned by constraints.txt.
$(STAMP): $(PY) pyproject.toml CMakeLists.txt constraints.txt $(shell find csrc python kernels -type f -not -name '*.pyc' 2>/dev/null)
	$(PIP) install --quiet -c constraints.txt ".[all,test]"
	touch $(STAMP)

install: $(STAMP)

test: $(STAMP)
	cd tests && ../$(PY) -m pytest -q -p no:cacheprovider .

demo: $(STAMP)
	$(VENV)/bin/tumorboard demo

bench: $(STAMP)
	$(VENV)/bin/tumorboard bench

lint: $(PY)
	$(PIP) install --quiet ruff
	$(VENV)/bin/ruff check . && $(VENV)/bin/ruff format --check .

clean:
	rm -rf build dist $(STAMP)
