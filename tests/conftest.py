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

# The modules whose tests run longest, run first (longest-processing-time-first): under xdist each starts at
# once on a worker of its own while the short tests fill the other, instead of one worker running them alone at
# the end while the other idles (a full run sat 14 of its 28 minutes at 98% so). Each module stays in one piece,
# so its module-scoped fixtures (a vLLM server) start once a worker.
LONGEST_FIRST = (
    "test_vllm_real.py",  # two xdist groups of about 10 minutes each (its module doc)
    "test_bench_smoke.py",
    "test_async_grpo_vllm.py",
    "test_experiment.py",
    "test_experiment_workers.py",
    "test_tir_default.py",
    "test_validation.py",
)


def pytest_collection_modifyitems(items: list) -> None:
    def rank(item) -> int:
        name = item.path.name
        return LONGEST_FIRST.index(name) if name in LONGEST_FIRST else len(LONGEST_FIRST)

    items.sort(key=rank)  # stable: each module's own order is kept
