#!/usr/bin/env bash
# Install what the tests need, then run the whole test suite.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install.sh
# The real peers the boundary tests talk to (transformers serve, verl, sandbox-fusion), each in its own venv.
bash scripts/peers.sh
# The viewer's browser tests drive Debian's headless Chromium (selenium comes with the dev extra).
if ! command -v chromium >/dev/null || ! command -v chromedriver >/dev/null; then
  SUDO=$([ "$(id -u)" = 0 ] || echo sudo)
  $SUDO apt-get update -qq && $SUDO apt-get install -y -qq chromium chromium-driver >/dev/null \
    || echo "warning: could not install chromium: the browser tests will be skipped (failed where AGENTDATA_REQUIRE_BROWSER is set)" >&2
fi
. .venv/bin/activate
export HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 HF_DATASETS_OFFLINE=1 TOKENIZERS_PARALLELISM=false
# Lint and layout first: a second of work that ends arguments about style (settings in pyproject.toml).
ruff check .
ruff format --check .
# Two workers: most tests wait on servers, sandboxes and subprocesses, so two at once keep both cores busy; a group of tests
# that must not run beside itself (xdist_group: the Ray clusters) stays on one worker
# (a full run 1090 s -> 904 s beside a recipe, 2026-12-03). AGENTDATA_TEST_WORKERS=0 runs them in one process.
# A worker that dies (a crash, a test stuck past its timeout: tests/timeout_backstop.py) ends the run at once, naming its
# test: replacing it can hang xdist under --dist loadgroup (tests/test_ci_bounds.py).
python -m pytest -q -n "${AGENTDATA_TEST_WORKERS:-2}" --dist loadgroup --max-worker-restart=0 --durations=20 "$@"
