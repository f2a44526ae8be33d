"""scripts/gpu_check.sh and examples/accelerate/: the GPU paths, run for real where there is a GPU.

Without a CUDA GPU or without vLLM the real run is skipped, saying which; the dry run (every
command printed) and the accelerate configs are checked everywhere.
"""

from __future__ import annotations

import importlib.util
import os
import subprocess
from pathlib import Path

import pytest
import torch

REPO = Path(__file__).resolve().parent.parent
SCRIPT = REPO / "scripts" / "gpu_check.sh"
ACCELERATE_CONFIGS = ["single_gpu", "multi_gpu", "zero2", "zero3", "fsdp"]


def test_the_dry_run_prints_every_check_and_runs_nothing(tmp_path):
    result = subprocess.run(
        ["bash", str(SCRIPT), "--dry-run"],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "GPU_CHECK_OUT": str(tmp_path / "out")},
    )
    assert result.returncode == 0, result.stderr
    for name in ("vllm-engine", "colocated", "server", "ddp", "zero2", "async"):
        assert f"check {name}" in result.stdout
    assert "tests/test_engines_vllm.py" in result.stdout and "train_rl colocated" in result.stdout
    assert "vllm_server: http://127.0.0.1:" in (tmp_path / "out" / "server.yaml").read_text()
    from agentdata.train.settings import train_settings

    for name in ("colocated", "server"):  # the GRPO settings the checks train with are accepted
        path = tmp_path / "out" / f"{name}.yaml"
        config = train_settings(path)["rl"]
        assert config.max_steps == 2 and config.use_vllm == "yes"
        assert bool(config.vllm_server) == (name == "server")
    asynchronous = train_settings(tmp_path / "out" / "async.yaml")["rl"]
    assert (asynchronous.mode, asynchronous.max_staleness, asynchronous.use_vllm) == ("async", 1, "yes")
    assert asynchronous.vllm_server.startswith("http://127.0.0.1:")
    assert not any((tmp_path / "out").glob("*/metrics.jsonl")), "a dry run trains nothing"


@pytest.mark.parametrize("name", ACCELERATE_CONFIGS)
def test_the_accelerate_configs_load(name):
    from accelerate.commands.config.config_args import load_config_from_file

    config = load_config_from_file(str(REPO / "examples" / "accelerate" / f"{name}.yaml"))
    assert config.num_processes >= 1 and config.mixed_precision == "bf16"


@pytest.mark.gpu
@pytest.mark.skipif(
    not torch.cuda.is_available(), reason="gpu_check.sh needs a CUDA GPU (torch.cuda.is_available() is false)"
)
@pytest.mark.skipif(
    importlib.util.find_spec("vllm") is None, reason="gpu_check.sh needs vLLM (pip install agentdata[vllm])"
)
def test_the_gpu_check_passes(tmp_path):
    result = subprocess.run(
        ["bash", str(SCRIPT)],
        capture_output=True,
        text=True,
        timeout=900,
        cwd=REPO,
        env={**os.environ, "GPU_CHECK_OUT": str(tmp_path)},
    )
    assert result.returncode == 0, result.stdout[-4000:] + result.stderr[-4000:]
