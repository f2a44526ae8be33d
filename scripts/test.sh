#!/usr/bin/env bash
# Install what the tests need, then run the whole test suite.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install.sh
# The real peers the boundary tests talk to (transformers serve, verl, sandbox-fusion), each in its own venv.
bash scripts/peers.sh
. .venv/bin/activate
export HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 HF_DATASETS_OFFLINE=1 TOKENIZERS_PARALLELISM=false
# Lint and layout first: a second of work that ends arguments about style (settings in pyproject.toml).
ruff check .
ruff format --check .
python -m pytest -q "$@"
