"""How the asynchronous GRPO stage publishes the policy's weights to the engine that rolls out: TRL's
`WeightTransferProtocol` (pause, send the weights, resume), which `AsyncGRPOTrainer` calls at the start and after
every `weight_sync_steps` optimiser steps, then tells the rollout worker the new version.

TRL's own transfer streams the weights into vLLM over NCCL (CUDA only). agentdata has two others:

- `FileWeightTransfer`: into a vLLM server on this machine through files, the synchronous stage's push
  (rl/vllm_push.py: safetensors in a staging folder, vLLM's `reload_weights`, then its prefix cache reset);
- `CopyWeightTransfer`: into the rollout engine's copy of the policy in this process (rl/async_engines.py),
  between two of its generation batches.

Neither pauses vLLM: requests in flight go on with the new weights from the next token (as TRL's `keep` pause
mode does), which the staleness tag (the version a batch started from) already counts against them.
"""

from __future__ import annotations

from collections.abc import Iterator

import torch


class FileWeightTransfer:
    """TRL's weight transfer, done as the synchronous stage's file push to a vLLM server on this machine."""

    def __init__(self, pusher):
        self.pusher = pusher  # rl.vllm_push.FileWeightPush

    def init_weight_transfer(self) -> None:
        return None

    def pause(self) -> None:
        return None

    def send_weights(self, iterator: Iterator[tuple[str, torch.Tensor]]) -> None:
        self.pusher.push_tensors({name: tensor.detach().contiguous() for name, tensor in iterator})

    def resume(self) -> None:
        return None

    def destroy(self) -> None:
        self.pusher.close()


class CopyWeightTransfer:
    """TRL's weight transfer into the rollout engine's copy of the policy: the engine's lock is held from pause to
    resume, so no generation or scoring sees half a swap."""

    def __init__(self, engine):
        self.engine = engine  # rl.async_engines.CopyEngine
        self.parameters = dict(engine.copy.named_parameters())
        self.pushes = 0

    def init_weight_transfer(self) -> None:
        return None

    def pause(self) -> None:
        self.engine.lock.acquire()

    def send_weights(self, iterator: Iterator[tuple[str, torch.Tensor]]) -> None:
        with torch.no_grad():
            for name, tensor in iterator:
                self.parameters[name].copy_(tensor)
        self.pushes += 1

    def resume(self) -> None:
        self.engine.lock.release()

    def destroy(self) -> None:
        return None
