# make demo | make test | make bench   (each creates and uses .venv itself) | make gpu-check
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
PIP := $(PY) -m pip
STAMP := $(VENV)/.installed

.PHONY: demo test bench install lint clean gpu-check gpu-readme docs

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
	$(MAKE) --no-print-directory docs

# The documentation site (MkDocs + mkdocstrings, the API reference from the docstrings), built
# with --strict: a broken link or docstring reference fails the build. Output: build/site/.
docs: $(STAMP)
	$(PY) -m mkdocs build --strict --quiet

demo: $(STAMP)
	$(VENV)/bin/tumorboard demo

bench: $(STAMP)
	$(VENV)/bin/tumorboard bench

# Every GPU figure in one bounded run (benchmarks/gpu_check.py): on a CUDA machine it builds the
# wheel if needed, runs the CUDA tests and the GPU benchmarks and writes benchmarks/results/.
# It uses the interpreter that has torch with CUDA: .venv's when it exists, else python3.
GPU_PY := $(if $(wildcard $(PY)),$(PY),$(PYTHON))
# GPU_CHECK_ARGS reaches the shell unexpanded by make ($(value ...)), so a shell variable in it
# stays one: GPU_CHECK_ARGS='--copy-to $OUT' copies to the folder $OUT names, not to 'UT'.
gpu-check:
	$(GPU_PY) benchmarks/gpu_check.py $(value GPU_CHECK_ARGS)

# The README's GPU section, regenerated from the newest benchmarks/results/ file of each GPU.
gpu-readme:
	$(GPU_PY) benchmarks/gpu_check.py readme

lint: $(PY)
	$(PIP) install --quiet ruff
	$(VENV)/bin/ruff check . && $(VENV)/bin/ruff format --check .

clean:
	rm -rf build dist $(STAMP)
