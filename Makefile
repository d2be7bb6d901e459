# Norm Kernels: one command to open the course, one to test it.
#   make lab        set up .venv and open JupyterLab on notebooks/
#   make test       set up .venv and run the CPU test suite (what CI runs)
#   make test-gpu   GPU tests (marker `gpu`) with the current Python: no set-up, no network
#   make bench      benchmark sweep on the GPU -> benchmarks/results/<device>.json + PNG plots
#   make notebooks  regenerate the student notebooks from solutions/ (nbgrader's machinery)
#   make grade SUBMISSIONS="subs/*.ipynb" [GRADE_ARGS="--json grades.json --jobs 4"]
#                   grade submissions with the CLI (default: the student copies in notebooks/, which score 0)

PY       ?= python3
VENV     := .venv
VPY      := $(VENV)/bin/python
# On a machine without an NVIDIA GPU, pin the CPU stack: torch's CPU wheel (found locally where
# the workplace keeps one) and triton for its interpreter.
HAS_GPU  := $(shell nvidia-smi -L >/dev/null 2>&1 && echo 1)
CPU_PINS ?= torch==2.13.0 triton==3.6.0
EXTRAS   := dev,instructor
# make test spreads the CPU tests over one worker per core, at most TEST_JOBS (pytest-xdist).
TEST_JOBS ?= 4
# test-gpu / bench run where the GPU is, with whatever Python has torch+triton there.
RUNPY    ?= $(if $(wildcard $(VPY)),$(VPY),$(PY))
SUBMISSIONS ?= notebooks/*.ipynb
GRADE_ARGS  ?=

.PHONY: setup lab test test-gpu bench notebooks grade clean

$(VENV)/.installed: pyproject.toml
	$(PY) -m venv $(VENV)
	$(if $(HAS_GPU),,$(VPY) -m pip install -q $(CPU_PINS))
	$(VPY) -m pip install -q -e ".[$(EXTRAS)]"
	$(VPY) -m ipykernel install --sys-prefix --name norm-kernels --display-name "Norm Kernels" >/dev/null
	touch $@

setup: $(VENV)/.installed

lab: setup
	$(VENV)/bin/jupyter lab notebooks/

test: setup
	$(VPY) -m pytest -q -n auto --maxprocesses $(TEST_JOBS) --durations=10

test-gpu:
	$(RUNPY) tools/run_gpu_tests.py

bench:
	$(RUNPY) -m benchmarks.run

notebooks: setup
	$(VPY) tools/make_notebooks.py

grade: setup
	$(VPY) -m autograder grade $(SUBMISSIONS) $(GRADE_ARGS)

clean:
	rm -rf $(VENV) .pytest_cache
