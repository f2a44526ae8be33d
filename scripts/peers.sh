#!/usr/bin/env bash
# Install the real peers agentdata is tested against, each in its own venv under .peers/ so
# their pins never touch the project's (shared/PEERS.md). Idempotent; safe to rerun.
#   .peers/serve    transformers[serving] at the project's transformers version (`transformers serve`)
#   .peers/verl     verl (--no-deps) with the few modules its dataset readers import
#   .peers/sfclient the `sandbox-fusion` client
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON=${PYTHON:-python3}
mkdir -p .peers
TRANSFORMERS_VERSION=$(.venv/bin/python -c "import transformers; print(transformers.__version__)")

make_venv() {  # make_venv NAME: create .peers/NAME once; later calls reuse it
  if [ ! -x ".peers/$1/bin/python" ]; then
    "$PYTHON" -m venv ".peers/$1"
    ".peers/$1/bin/python" -m pip install -q --upgrade pip
  fi
}

install_serve() {
  make_venv serve
  .peers/serve/bin/python -m pip install -q "torch==2.13.0" "transformers[serving]==${TRANSFORMERS_VERSION}" gguf
}

install_verl() {
  make_venv verl
  # verl pins transformers<5.11; its readers need only these (shared/PEERS.md).
  .peers/verl/bin/python -m pip install -q "torch==2.13.0" "transformers==5.10.*" datasets omegaconf pillow \
    ray tensordict codetiming math-verify pandas pyarrow
  .peers/verl/bin/python -m pip install -q --no-deps verl
}

install_sfclient() {
  make_venv sfclient
  .peers/sfclient/bin/python -m pip install -q sandbox-fusion
}

for peer in "${@:-serve verl sfclient}"; do
  for name in $peer; do "install_$name"; done
done
