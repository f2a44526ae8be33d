"""Shared test settings: nothing is fetched from a model hub."""

import os

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("HF_DATASETS_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

# The training tests' shared fixtures (a tiny Llama with SmolLM2's tokenizer) and the viewer's artifacts; a module that
# defines its own fixture of the same name (the engine tests do) keeps its own.
pytest_plugins = ["tests.train_fixtures", "tests.view_fixtures"]
