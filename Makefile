# PHExplore — two commands set up everything on a fresh machine:
#   make run   creates .venv, installs, starts the app on the shipped samples
#   make test  creates .venv, installs with dev extras (and Debian chromium for the browser test,
#              Debian Java 17 for the Spark tests), runs all tests
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
PIP := $(VENV)/bin/pip
HOST ?= 127.0.0.1
PORT ?= 8501
ALLOW_HOSTS ?=
# make test runs the suite on this many pytest-xdist workers (tests that start Spark share one)
TEST_WORKERS ?= 2
comma := ,

.PHONY: run test install install-dev browser java lint format clean bench

$(VENV)/bin/activate:
	$(PYTHON) -m venv $(VENV)
	$(PIP) install --quiet --upgrade pip

$(VENV)/.installed: $(VENV)/bin/activate pyproject.toml
	$(PIP) install --quiet -e .
	touch $@

$(VENV)/.installed-dev: $(VENV)/bin/activate pyproject.toml
	$(PIP) install --quiet -e '.[dev]'
	touch $(VENV)/.installed $@

install: $(VENV)/.installed

install-dev: $(VENV)/.installed-dev

# The browser test drives Debian's chromium through Playwright; never download a browser.
browser:
	@if [ ! -x /usr/bin/chromium ]; then \
		echo "Installing Debian chromium for the browser test"; \
		(apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null) \
		|| (sudo apt-get update -qq && sudo DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null) \
		|| echo "WARNING: could not install chromium; the browser test will be skipped"; \
	fi

# The Spark tests run pyspark 4 in local[2], which needs a Java 17+ runtime: Debian's, never a download.
java:
	@if ! java -version 2>&1 | grep -Eq 'version "(1[7-9]|[2-9][0-9])'; then \
		echo "Installing Debian openjdk-17-jre-headless for the Spark tests"; \
		(apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq openjdk-17-jre-headless >/dev/null) \
		|| (sudo apt-get update -qq && sudo DEBIAN_FRONTEND=noninteractive apt-get install -y -qq openjdk-17-jre-headless >/dev/null) \
		|| echo "WARNING: could not install Java 17; the Spark tests will be skipped (and fail under CI)"; \
	fi

# serve.py is app.py behind a Host check (loopback names, plus ALLOW_HOSTS="name1,name2").
run: install
	$(VENV)/bin/phexplore app --host $(HOST) --port $(PORT) $(foreach h,$(subst $(comma), ,$(ALLOW_HOSTS)),--allow-host $(h))

test: install-dev browser java
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .
	$(VENV)/bin/lint-imports
	$(VENV)/bin/pytest -q -n $(TEST_WORKERS) --dist loadgroup

lint:
	$(VENV)/bin/ruff check . && $(VENV)/bin/ruff format --check . && $(VENV)/bin/lint-imports

format:
	$(VENV)/bin/ruff format . && $(VENV)/bin/ruff check --fix .

bench: install-dev java
	$(PY) benchmarks/noise.py
	$(PY) benchmarks/keyed_noise.py --seeds 1,2,3
	$(PY) benchmarks/topdown.py
	$(PY) benchmarks/phsafe.py
	$(PY) benchmarks/synthetic.py
	$(PY) benchmarks/metrics_epl.py
	$(PY) benchmarks/spark.py --persons 100000 --county 44001
	$(PY) benchmarks/prediction.py --seeds 4
	$(PY) benchmarks/topdown_production.py --persons 1e5,1e6
	$(PY) benchmarks/large_input.py --mb 40

clean:
	rm -rf $(VENV) .pytest_cache .ruff_cache test-output
