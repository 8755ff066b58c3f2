# tierlab: build, demo, test, bench.
#   make install   .venv with the runtime + test dependencies and the native extension (release)
#   make demo      run the built-in demo scenario, outputs in demo-out/
#   make test      Rust tests + clippy + rustfmt, ruff, mypy, pytest
#   make bench     engine throughput
#   make costs     measure every built-in scenario's CPU time and peak memory (about an hour)
#   make docs      regenerate every image and sample output of README.md and docs/ (DOCS=GLOB
#                  limits it; about 1 h 30 min of CPU in full)
# PYTHON=python3.12 make install picks another interpreter (3.11 or newer).

SHELL := /bin/bash
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
DEPS_STAMP := $(VENV)/.deps.stamp
BUILD_STAMP := $(VENV)/.build.stamp
# Everything the native extension is built from: a change rebuilds it on the next target.
RUST_INPUTS := Cargo.toml $(wildcard Cargo.lock) $(shell find crates \( -name '*.rs' -o -name Cargo.toml -o -name '*.toml' \) -type f 2>/dev/null)

.PHONY: install demo test test-rust test-lint bench costs docs rust-tools system-tools lab-tools clean

install: $(BUILD_STAMP) $(DEPS_STAMP) system-tools lab-tools

# The virtual environment. Debian/Ubuntu ship `venv` separately (python3-venv): when
# `python3 -m venv` fails and we are root, install it and try again.
$(BIN)/python:
	@if ! $(PYTHON) -m venv $(VENV) >/dev/null 2>&1; then \
	  rm -rf $(VENV); \
	  if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
	    echo "make: '$(PYTHON) -m venv' failed; installing python3-venv"; \
	    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq python3-venv; \
	  fi; \
	  $(PYTHON) -m venv $(VENV) || { \
	    echo "make: cannot create $(VENV): install python3-venv (or set PYTHON=...)" >&2; \
	    rm -rf $(VENV); exit 1; }; \
	fi

# Build backend, runtime and test dependencies, all read from pyproject.toml. pip is upgraded
# here, not when the environment is made: the crates' background build (below) starts as soon
# as the environment exists, and the upgrade's download runs beside it. pip byte-compiles
# what it installs (21 of this install's 36 CPU-s), and must: with `--no-compile`, where
# PYTHONDONTWRITEBYTECODE is set (the development VM sets it), every process the tests start
# would compile every module it imports from source.
$(DEPS_STAMP): pyproject.toml | $(BIN)/python
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -c 'import tomllib; d = tomllib.load(open("pyproject.toml", "rb")); \
	  p = d["project"]; print("\n".join(d["build-system"]["requires"] + p["dependencies"] \
	  + p["optional-dependencies"]["test"]))' > $(VENV)/requirements.txt
	$(BIN)/python -m pip install --quiet -r $(VENV)/requirements.txt
	touch $@

# The environment maturin gives cargo when it builds the extension: pyo3's build script runs
# again (and pyo3 and the extension are compiled again) whenever it changes, so every cargo
# command of this file runs with it and they all share one build in target/.
PY_SIGNATURE = $$($(BIN)/python -c 'import sys; print("cpython-%d.%d-64bit" % sys.version_info[:2])')
PYO3_ENV = VIRTUAL_ENV="$(abspath $(VENV))" PYO3_PYTHON="$(abspath $(BIN))/python" \
  PYTHON_SYS_EXECUTABLE="$(abspath $(BIN))/python" PYO3_ENVIRONMENT_SIGNATURE="$(PY_SIGNATURE)"

# The native extension, built in release mode and installed (editable: the Python sources in
# python/ are used in place, so editing them needs no rebuild). The crates are compiled while
# pip downloads the Python dependencies (the network, not the CPU, is what pip waits for),
# and while the Debian packages and the lab's kernel are fetched (network and dpkg: 40-90 s
# on a fresh machine that would otherwise leave both cores idle); maturin then finds them
# built and only links and installs the extension. Should that compile fail, maturin's
# build shows the error.
$(BUILD_STAMP): $(RUST_INPUTS) pyproject.toml | $(BIN)/python
	@command -v cargo >/dev/null 2>&1 || { \
	  echo "make: cargo not found: install Rust from https://rustup.rs" >&2; exit 1; }
	@$(PYO3_ENV) cargo build --release --quiet -p tierlab-py >$(VENV)/prebuild.log 2>&1 & cargo=$$!; \
	  $(MAKE) --no-print-directory $(DEPS_STAMP) system-tools lab-tools || { kill $$cargo 2>/dev/null; exit 1; }; \
	  wait $$cargo || echo "make: compiling the crates failed (maturin shows why)"
	$(PYO3_ENV) PATH="$(abspath $(BIN)):$$PATH" $(BIN)/maturin develop --release --quiet
	touch $@

# Debian packages the live-recording tools and their tests use: valgrind (`tierlab trace`), a
# C compiler (the test programs), perf (the `tierlab import perf-script` test runs the
# documented commands) and Chromium, the headless browser the tests of the interactive HTML
# reports drive (through Playwright, with Debian's browser: Playwright's own download is not
# used), LLVM's libomp (clang -fopenmp), and SLURM with munge (the test of `--executor slurm`
# starts a one-node cluster).
# Installed when missing and we are root; else the tests skip.
system-tools:
	@for tool in valgrind:valgrind cc:gcc perf:linux-perf chromium:chromium; do \
	  cmd=$${tool%%:*}; pkg=$${tool##*:}; \
	  command -v $$cmd >/dev/null 2>&1 && continue; \
	  if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
	    echo "make: $$cmd not found; installing $$pkg"; \
	    (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $$pkg) \
	      || echo "make: could not install $$pkg: the tests that need $$cmd will be skipped"; \
	  else \
	    echo "make: $$cmd not found: the tests that need it will be skipped (install $$pkg)"; \
	  fi; \
	done
	@# LLVM's OpenMP runtime, libomp, for clang -fopenmp (the test of libomp's synchronisation
	@# in traces, tests/test_trace_sync.py).
	@if command -v clang >/dev/null 2>&1 \
	    && ! printf 'int main(void){return 0;}\n' | clang -fopenmp -x c - -o /dev/null 2>/dev/null; then \
	  if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
	    echo "make: clang -fopenmp does not link; installing libomp-dev"; \
	    (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq \
	      --no-install-recommends libomp-dev) \
	      || echo "make: could not install libomp-dev: the test of libomp's synchronisation will be skipped"; \
	  else \
	    echo "make: clang -fopenmp does not link: the test of libomp's synchronisation will be skipped (install libomp-dev)"; \
	  fi; \
	fi
	@# SLURM and munge: the test of `--executor slurm` starts a one-node cluster of its own.
	@if ! command -v slurmd >/dev/null 2>&1 || ! command -v slurmctld >/dev/null 2>&1 \
	    || ! command -v sbatch >/dev/null 2>&1 || ! command -v munged >/dev/null 2>&1; then \
	  if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
	    echo "make: SLURM not found; installing slurmctld slurmd slurm-client munge"; \
	    (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq \
	      --no-install-recommends slurmctld slurmd slurm-client munge) \
	      || echo "make: could not install SLURM: the test of --executor slurm will be skipped"; \
	  else \
	    echo "make: SLURM not found: the test of --executor slurm will be skipped (install slurmctld slurmd slurm-client munge)"; \
	  fi; \
	fi

# The lab (`tierlab lab`, docs/lab.md): QEMU, a static busybox for the initramfs tierlab
# builds, and the guest kernel, Debian bookworm-backports' linux-image-amd64 (6.12), fetched
# with `apt-get download` by tools/lab-kernel.sh into target/lab/kernel (not installed on the
# host). Where QEMU cannot be had the lab tests are skipped.
LAB_DIR := target/lab
lab-tools:
	@if ! command -v qemu-system-x86_64 >/dev/null 2>&1 \
	    || ! { [ -x /bin/busybox ] && ! ldd /bin/busybox >/dev/null 2>&1; }; then \
	  if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
	    echo "make: QEMU or a static busybox not found; installing qemu-system-x86 busybox-static"; \
	    (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq \
	      --no-install-recommends qemu-system-x86 busybox-static) \
	      || echo "make: could not install qemu-system-x86 busybox-static: the lab tests will be skipped"; \
	  else \
	    echo "make: qemu-system-x86_64 or a static busybox not found: the lab tests will be skipped (install qemu-system-x86 busybox-static)"; \
	  fi; \
	fi
	@if command -v qemu-system-x86_64 >/dev/null 2>&1; then \
	  tools/lab-kernel.sh $(LAB_DIR) || echo "make: could not fetch the lab's kernel (tools/lab-kernel.sh)"; \
	fi

demo: install
	$(BIN)/tierlab run demo --out demo-out

rust-tools:
	@command -v cargo >/dev/null 2>&1 || { \
	  echo "make: cargo not found: install Rust from https://rustup.rs" >&2; exit 1; }
	@cargo clippy --version >/dev/null 2>&1 || rustup component add clippy
	@cargo fmt --version >/dev/null 2>&1 || rustup component add rustfmt

# Rust unit, integration and doc tests (the example, examples/run.rs, and the extension crate,
# which has no Rust tests and is built by maturin, are compiled by clippy --all-targets, not
# built once more by cargo test); pytest on every core. The whole workspace is selected, the
# extension crate included (it has no test targets, so nothing of it is built): cargo then
# resolves the dependencies' features as for maturin's build of the extension, and the
# libraries `install` compiled are reused as they are (with `--exclude tierlab-py` the
# engine's crates get other hashes and are compiled a second time); only the test harnesses
# are compiled here. Clippy runs with the release profile too: the build scripts' outputs
# (zstd's C library) and the proc-macro crates (serde_derive, pyo3's macros, syn) that
# `install` built are reused, only the check pass over the libraries is new (41 s -> 19 s in
# a fresh clone). The Rust checks and the Python linters (one core, ~20 s) run side by side
# under make's job server (cargo takes its share of the two slots), each one's output shown
# when it ends; pytest then has both cores. (Running the Rust tests and clippy side by side
# once the harnesses are built, which cargo's lock allows, was slower: 149 s against 128 s
# for this phase, 50 more s of CPU, the two contending for the VM's cores.)
#
# The package's own modules are byte-compiled first: the tests start ~300 `python -m tierlab`
# processes, and where PYTHONDONTWRITEBYTECODE is set (the development VM sets it) Python
# writes no .pyc of its own, so each process would compile the tierlab modules it imports
# from source again (~50 ms of CPU for `tierlab view`). pytest-xdist hands out whole files
# in the order tests/conftest.py gives them (LONGEST_FIRST: the lab's QEMU guest first), not
# by their number of tests (--no-loadscope-reorder), so no long file starts last.
test: install rust-tools
	$(MAKE) --no-print-directory -j2 --output-sync=target test-rust test-lint
	$(BIN)/python -m compileall -q python/tierlab
	$(BIN)/pytest -q -n auto --dist loadfile --no-loadscope-reorder --durations=10 tests

test-rust: install rust-tools
	$(PYO3_ENV) cargo test --workspace --profile release --tests
	$(PYO3_ENV) cargo test --workspace --profile release --doc
	$(PYO3_ENV) cargo clippy --workspace --release --all-targets -- -D warnings
	cargo fmt --all --check

test-lint: install
	$(BIN)/ruff check python tests examples tools
	$(BIN)/ruff format --check python tests examples tools
	$(BIN)/mypy

# The engine's throughput, calibrated against the naive C model of ../shared/bench (when it
# is there) in the same rounds, recorded in bench/results/ and compared with the last record.
CALIBRATION := ../shared/bench/engine-calibration.c
bench: install
	$(BIN)/tierlab bench engine --record bench/results \
	  $(if $(wildcard $(CALIBRATION)),--calibrate $(CALIBRATION))

# Every built-in scenario's measured cost (CPU time, peak RSS) on this machine, into the
# checked-in table that `tierlab scenarios` and every --dry-run read
# (python/tierlab/scenario_costs.json). COSTS_FLAGS=--quick measures the scaled-down forms.
costs: install
	$(BIN)/tierlab bench costs --write $(COSTS_FLAGS) $(SCENARIOS)

# Every image of docs/img and every sample output of README.md and docs/*.md (the blocks after a
# `<!-- make-docs output: COMMAND -->` marker), regenerated by the commands that make them
# (tools/make_docs.py lists them: `.venv/bin/python tools/make_docs.py --list`), and
# docs/parameters.md. DOCS='demo*' limits it to the names that match.
docs: install
	$(BIN)/python tools/make_docs.py $(DOCS)

clean:
	rm -rf $(VENV) demo-out python/tierlab/_native*.so python/tierlab/_native*.pyd
