# Two commands do all the set-up on a fresh machine: `make demo` and `make test`.
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
RUNSTAMP := $(VENV)/.run-installed
STAMP  := $(VENV)/.installed
EDITABLE := $(VENV)/.dfdoctor-linked
PKG_DIRS := $(shell find doctor checks trainer templates -type d -not -name __pycache__ 2>/dev/null)
OUT    := out

.PHONY: demo test test-fast venv dist clean

# What `make demo` needs: dfdoctor (editable) and the trainer's torch, nothing the tests alone use (on a fresh
# clone the test tools were a quarter of the demo's install time). The venv is made without a pip, and the pip of
# $(PYTHON) installs pip into it as a package (`pip --python`, pip 22.3 and later): 3 s where `python -m venv`'s
# ensurepip took 8 on a fresh clone here (pinned, as every install here is). Without such a pip, ensurepip does it,
# as `python -m venv` would.
# The pinned files are installed by uv where it can be had, by the venv's pip where not (.ci/venv_install.py: uv
# 0.13.10, fetched into .venv/.uv by the venv's pip, is given the indexes, links and constraint file of pip's own
# settings, which uv does not read; pip installs, after a line saying why, where uv cannot be had or is not told of
# a pip setting). pip installed one package at a time on one core; uv fetches, unpacks and compiles on every core.
# Round 24, fresh clones, `make venv` alternated, 4 rounds on the 2-core machine beside other helpers' suites (load
# 3.4-8.5): pip 89.7, 111.8, 72.6, 96.4 s (47.5, 49.3, 61.3, 68.2 CPU-s), uv 55.4, 85.4, 76.5, 95.6 s (40.9, 41.4,
# 60.4, 56.0 CPU-s). Most of either is compiling the same files (uv: the demo's 5,520 in 31 of its 42 s at a load of
# 4-5), where uv's second core counts only as far as the load leaves it one. The venvs are alike: `pip freeze
# --all`, every file but uv's records and its console scripts' wording, the same 11,943 .pyc files (all current,
# timestamp-checked as pip's), a bare `python -c pass` 39.41 M instructions in both (callgrind, PYTHONHASHSEED=0).
# uv's cache is .venv/.uv-cache, on the venv's disk (the venv's files are hard links to it: 0.1 GB more than pip's
# venv), gone with `make clean`.
$(RUNSTAMP): requirements-run.txt setup.cfg pyproject.toml
	test -x $(BIN)/python || { $(PYTHON) -m venv --without-pip $(VENV) && \
	    { $(PYTHON) -m pip --python $(BIN)/python install -q --disable-pip-version-check pip==26.3 2>/dev/null || \
	      $(BIN)/python -m ensurepip --upgrade --default-pip >/dev/null; }; }
	$(BIN)/python .ci/venv_install.py $(VENV) requirements-run.txt
# (the distribution's old name, now dfdoctor-launch, is asked of the venv's Python first: pip takes a second)
	$(BIN)/python -c "import importlib.metadata as m; m.distribution('dfdoctor')" 2>/dev/null && \
	    $(BIN)/pip uninstall -q -y dfdoctor || true
	touch $(RUNSTAMP)

# dfdoctor itself, editable in setuptools' strict mode: a tree of links to the checkout's files (build/__editable__.*)
# that a plain .pth line puts on the path. The default mode's import hook was imported by every start of the venv's
# Python, and the tests start it thousands of times: a bare `python -c pass` 88 M instructions with it, 38 M without
# (callgrind; 25 against 13 ms here). Links see an edit at once but not a file added or removed: the package folders
# are prerequisites here, so a new module reinstalls the links (3 s) at the next `make`.
# (-qq: the pip of today relays setuptools' warning about editable installs, a screenful a newcomer need not read)
$(EDITABLE): $(RUNSTAMP) $(PKG_DIRS)
	$(BIN)/pip install -qq --disable-pip-version-check --no-deps --no-build-isolation -e . \
	    --config-settings editable_mode=strict
	touch $(EDITABLE)

# Everything `make test` needs: the above, then the test tools.
$(STAMP): $(EDITABLE) requirements-dev.txt
	$(BIN)/python .ci/venv_install.py $(VENV) requirements-dev.txt
	touch $(STAMP)

venv: $(STAMP)

# Launches the bundled trainer (tiny CPU config) under dfdoctor and writes the report to out/. With 3000 target
# steps (the preset has 120) its first phase is a loop of half a minute or more, so the verdict `running` is known
# within seconds of its start and dfdoctor returns; the job goes on (its drafters compile, then train) and ends by
# itself: `dfdoctor status` says so later. With 120 steps every phase ended within the settle time, and the watch
# waited for the whole job (93 s of a 2 min 58 s first run). A fresh clone's `make demo`: docs/trainer.md.
demo: $(EDITABLE)
	mkdir -p $(OUT)/demo
	$(BIN)/dfdoctor launch --log $(OUT)/demo/train.log --watch 120 --format text \
	    --format json --output $(OUT)/launch.json --format html --output $(OUT)/launch.html \
	    -- $(BIN)/python -u -m dfdoctor.trainer --preset tiny --target-steps 3000 --out $(OUT)/demo/ckpt
	@echo "report: $(OUT)/launch.html   (later: $(BIN)/dfdoctor status; $(BIN)/dfdoctor stop ends the job while it runs)"

# The suite runs in parallel workers (pytest-xdist; tests/conftest.py decides which tests share one): most of it
# waits on subprocesses, targets and Slurm, so more workers than the 2 cores of CI's machine pay. TEST_WORKERS=0 runs
# it serially. The ten slowest tests are listed at the end. 6 workers, measured side by side with 4 on CI's 2-core
# machine (round 7): 591 s against 690 s of tests, every test passing in both. Round 19, `CI=true .ci/run` in fresh
# clones on the 2-core machine, nothing else running, its CPU sampled every 5 s: 6 workers 714 s of tests (761 s in
# all), the CPU busy 85% of the tests' time (spells of 15-35% as every worker waited); 8 workers 614 and 650 s, busy
# 95%, but a load-sensitive Slurm status test failed in one of the two runs: 6 stayed until such tests held at 8.
# Round 20: that test's cause mended (a buffered range loop read as an empty loader's, doctor/diagnose/loop_looks.py)
# and the wait-bound files spread test by test; 8 workers: 630 s of tests (679 s in all), busy 96%, all passing.
TEST_WORKERS ?= 8
# The tests start dfdoctor hundreds of times; where PYTHONDONTWRITEBYTECODE is set (as on our machines) each
# start compiled dfdoctor's sources again: 0.3 of 0.45-0.75 CPU-seconds per `check`, measured. Compiled once here.
# The HTML report's templates are compiled once too (dfdoctor/render/compiled.py): 0.05 CPU-s of every launch.
# Each xdist worker also collects every test file, and pytest rewrites the asserts of each (10 CPU-s a worker,
# 1.6 with the rewritten files cached): one collection writes that cache first (pytest reads it whatever
# PYTHONDONTWRITEBYTECODE says, and writes it only without it). A file that fails to collect fails in the run itself.
# The probes run from the checkout's checks/probes (the links resolved: probe.py, probe_server.py), not from the
# link tree compiled above, and the helpers they import (_probe_support, _near, _pep508, text_files_probe) were
# compiled again in every probe: 12 M of log_probe's 87 M instructions, 23 M of deps_probe's 1.02 G (callgrind).
# The methods of dfdoctor's dataclasses are compiled once too (dfdoctor/dataclass_code.py): 0.16 G of a launch's
# 0.76 G instructions, 0.15 G of a status's 0.63 G; so is the code of the regular expressions they compile
# (dfdoctor/regex_code.py), both noted in one interpreter (dfdoctor/kept_code.py).
PRECOMPILE = $(BIN)/python -c "import compileall, os, dfdoctor; compileall.compile_dir(os.path.dirname(dfdoctor.__file__), quiet=1)" && \
	$(BIN)/python -c "import compileall, os, dfdoctor.checks.probes as p; compileall.compile_dir(os.path.dirname(os.path.realpath(p.__file__)), quiet=1)" && \
	$(BIN)/python -c "from dfdoctor.render.html import keep_compiled; keep_compiled()" && \
	$(BIN)/python -c "from dfdoctor.kept_code import keep; keep()" && \
	{ PYTHONDONTWRITEBYTECODE= $(BIN)/pytest --collect-only -q -p no:cacheprovider >/dev/null 2>&1 || true; }

test: $(STAMP)
	$(PRECOMPILE)
	$(BIN)/pytest -q -n $(TEST_WORKERS) --durations=10

test-fast: $(STAMP)
	$(PRECOMPILE)
	$(BIN)/pytest -q -n $(TEST_WORKERS) -m "not slow"

# The wheel a machine without the checkout installs (`pip install dist/*.whl`, README *Install*): built by the
# pip of $(PYTHON), without the dev venv, and alone in dist/ so that glob names one file.
dist:
	rm -rf dist
	$(PYTHON) -m pip wheel --quiet --no-deps --wheel-dir dist .

clean:
	rm -rf $(VENV) $(OUT) .dfdoctor dist build
