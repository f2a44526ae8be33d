"""GRPO's rollouts from a vLLM server that has no NCCL to receive weights by: the new weights go through files.

TRL pushes the policy's weights to vLLM over NCCL (server mode) or into a `vllm.LLM` in the same process
(colocate mode); both need CUDA, and the second needs vLLM in agentdata's own environment. On a CPU, or
with vLLM in an environment of its own (engines/vllm_server.py), this module keeps a vLLM server on-policy
another way, through vLLM's development endpoints (a server started with `VLLM_SERVER_DEV_MODE=1`):

1. the policy is saved as a checkpoint (safetensors) into a staging folder (in `/dev/shm` where there is
   one: memory, not disk);
2. `POST /collective_rpc {"method": "reload_weights", "kwargs": {"weights_path": FOLDER}}` makes every
   worker load it in place (vLLM's `reload_weights`: it copes with the CPU backend's repacked linear
   weights, where `model.load_weights` fails);
3. `POST /reset_prefix_cache`, so no cached prefix from the old weights is reused.

A push follows every optimiser step (`PushWeightsCallback`), so the next rollouts and a validation at that
step see the step's weights. The server must read the staging folder:
it runs on this machine (agentdata starts one itself unless `vllm_server` names a loopback URL).
SmolLM2-135M's push takes about 1 s on 2 CPU cores.
"""

from __future__ import annotations

import shutil
import tempfile
import time
import urllib.error
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

from transformers import TrainerCallback

from agentdata.errors import UserError
from agentdata.rl.vllm_completions import post_json

LOOPBACK_HOSTS = ("127.0.0.1", "localhost", "::1")


def staging_root() -> str | None:
    shm = Path("/dev/shm")
    return str(shm) if shm.is_dir() else None


def check_file_push_server(base_url: str) -> None:
    """One line before training when a server cannot take file pushes: not on this machine, or no dev mode."""
    host = urlparse(base_url).hostname or ""
    if host not in LOOPBACK_HOSTS:
        raise UserError(
            f"vllm_server {base_url}: without CUDA the new weights reach vLLM as files it reads, so the server "
            "must run on this machine (a 127.0.0.1 URL); on GPUs, TRL pushes them over NCCL"
        )
    try:
        post_json(f"{base_url}/reset_prefix_cache", {}, timeout=30)
    except urllib.error.HTTPError as exc:
        if exc.code == 404:
            raise UserError(
                f"vllm_server {base_url}: the server has no development endpoints to receive weights by; "
                "start it with VLLM_SERVER_DEV_MODE=1"
            ) from exc
        raise UserError(f"vllm_server {base_url}: answered HTTP {exc.code} to /reset_prefix_cache") from exc
    except OSError as exc:
        raise UserError(f"vllm_server {base_url}: cannot be reached ({exc})") from exc


class FileWeightPush:
    """Pushes a model's weights to one vLLM server through a staging folder (see the module's docstring)."""

    def __init__(self, base_url: str, staging_dir: str | None = None):
        self.base_url = base_url.rstrip("/")
        self.staging = Path(tempfile.mkdtemp(prefix="agentdata-weights-", dir=staging_dir or staging_root()))
        self.pushes = 0
        self.push_s = 0.0

    def push(self, model: Any) -> None:
        started = time.perf_counter()
        if hasattr(model, "peft_config"):
            raise UserError("LoRA with vLLM rollouts outside CUDA is not supported: train without LoRA or use_vllm no")
        model.save_pretrained(self.staging, safe_serialization=True)
        self._reload(started)

    def push_tensors(self, tensors: dict[str, Any]) -> None:
        """Push named tensors (the asynchronous stage's weight transfer, rl/weight_transfer.py): one safetensors
        file in the staging folder, read by the same `reload_weights`."""
        from safetensors.torch import save_file

        started = time.perf_counter()
        save_file(tensors, str(self.staging / "model.safetensors"))
        self._reload(started)

    def _reload(self, started: float) -> None:
        post_json(
            f"{self.base_url}/collective_rpc",
            {"method": "reload_weights", "kwargs": {"weights_path": str(self.staging)}},
        )
        post_json(f"{self.base_url}/reset_prefix_cache", {})
        self.pushes += 1
        self.push_s += time.perf_counter() - started

    def close(self) -> None:
        shutil.rmtree(self.staging, ignore_errors=True)


class PushWeightsCallback(TrainerCallback):
    """Pushes the policy's weights after every optimiser step, before the next rollouts and before a
    validation that follows the step (add it ahead of the validation callback), and at the start of a
    resumed run, or of any run with `push_at_start` (a server that was not started on the policy's checkpoint).
    A failed push stops training: rollouts from stale weights would be silently off-policy."""

    def __init__(self, pusher: FileWeightPush, push_at_start: bool = False):
        self.pusher, self.push_at_start = pusher, push_at_start

    def on_train_begin(self, args, state, control, model=None, **kwargs):
        # resumed (the server holds the starting checkpoint, not the resumed one), or a server of other weights
        if state.global_step or self.push_at_start:
            self.pusher.push(model)

    def on_step_end(self, args, state, control, model=None, **kwargs):
        self.pusher.push(model)
