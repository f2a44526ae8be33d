"""Shared test settings: nothing is fetched from a model hub."""

import os

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("HF_DATASETS_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
# GRPO's `use_vllm: auto` would start a vLLM server for every training test where .venv-vllm exists; the
# vLLM tests (tests/test_vllm_real.py) ask for it by name.
os.environ.setdefault("AGENTDATA_VLLM", "off")

# The training tests' shared fixtures (a tiny Llama with SmolLM2's tokenizer) and the viewer's artifacts; a module that
# defines its own fixture of the same name (the engine tests do) keeps its own.
pytest_plugins = ["tests.train_fixtures", "tests.view_fixtures"]
