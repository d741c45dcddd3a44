# Two commands do all the set-up on a fresh machine: `make demo` and `make test`.
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed
OUT    := out

.PHONY: demo test test-fast venv clean

$(STAMP): requirements-dev.txt setup.cfg pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -q --disable-pip-version-check -r requirements-dev.txt
	$(BIN)/pip install -q --disable-pip-version-check --no-deps --no-build-isolation -e .
	touch $(STAMP)

venv: $(STAMP)

# Runs dfdoctor on the bundled trainer and writes the report to out/.
demo: $(STAMP)
	mkdir -p $(OUT)
	$(BIN)/dfdoctor check --log $(OUT)/demo/train.log --format text --format json --output $(OUT)/check.json \
	    --format html --output $(OUT)/check.html -- $(BIN)/python -m trainer --help || true
	@echo "report: $(OUT)/check.html"

test: $(STAMP)
	$(BIN)/pytest -q

test-fast: $(STAMP)
	$(BIN)/pytest -q -m "not slow"

clean:
	rm -rf $(VENV) $(OUT) .dfdoctor
