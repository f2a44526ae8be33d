"""TRL's asynchronous GRPO trainer (`trl.experimental.async_grpo.AsyncGRPOTrainer`), able to train on a CPU.

`AgentAsyncGRPOTrainer` is the one subclass of it, and it changes one thing: the attention kernel. TRL packs a
step's samples into a prefix tree (`packing.TreeRow`: the shared prompt of a group is forwarded once) and
registers an attention function, `tree_fa3`, that runs the tree through flash-attention 3 kernels fetched by the
`kernels` package: CUDA (or ROCm) only, and asks `torch.cuda` for the device's name to compute its MFU metrics.
On any other device the subclass's `tree_attention` computes the same
attention with torch's `scaled_dot_product_attention`, one tree segment at a time (each segment's queries against
the keys of its root-to-segment path, causal with the path's end aligned to the segment's end, as flash-attention's
varlen kernel does); on CUDA it hands over to TRL's kernel. Off CUDA the MFU metrics stay off (no known peak
FLOPs; TRL's throughput and timing metrics remain). Everything else — the rollout queue, the staleness
bound, the token-packed loss, the weight-sync schedule, the metrics — is TRL's, unchanged: agentdata plugs its
rollout worker (`rl.async_worker`) and weight transfer (`rl.weight_transfer`) into the two protocols TRL made for
that (`rollout_worker=`, `weight_transfer=`).

Pinned to TRL 1.16 (`trl==1.16.*` in pyproject): the names `TREE_ATTENTION` and `tree_attention` of
`trl.experimental.async_grpo.packing`, the keyword arguments TRL's `compute_loss` passes the model (`tree_kv_index`,
`tree_cu_seqlens_q`, `tree_cu_seqlens_k`, `tree_max_seqlen_q`, `tree_max_seqlen_k`), and the model being built with
`attn_implementation=TREE_ATTENTION` in `AsyncGRPOTrainer.__init__`, which calls its module's
`get_peak_flops_per_device`. tests/test_async_grpo.py checks the packed
tree's log-probabilities against a plain forward of each sample, through the installed TRL.
"""

from __future__ import annotations

from typing import Any

import torch
from trl.experimental.async_grpo import AsyncGRPOTrainer
from trl.experimental.async_grpo import async_grpo_trainer as trl_trainer_module
from trl.experimental.async_grpo import packing as trl_packing
from trl.trainer.utils import get_peak_flops_per_device


def tree_attention(
    module: Any,
    query: torch.Tensor,
    key: torch.Tensor,
    value: torch.Tensor,
    attention_mask: Any,
    *,
    tree_kv_index: torch.Tensor,
    tree_cu_seqlens_q: torch.Tensor,
    tree_cu_seqlens_k: torch.Tensor,
    tree_max_seqlen_q: int,
    tree_max_seqlen_k: int,
    scaling: float | None = None,
    sliding_window: int | None = None,
    softcap: float | None = None,
    **kwargs: Any,
) -> tuple[torch.Tensor, None]:
    """TRL's tree attention: its flash-attention kernel on CUDA, torch's SDPA per tree segment elsewhere."""
    if query.is_cuda:
        return trl_packing.tree_attention(
            module,
            query,
            key,
            value,
            attention_mask,
            tree_kv_index=tree_kv_index,
            tree_cu_seqlens_q=tree_cu_seqlens_q,
            tree_cu_seqlens_k=tree_cu_seqlens_k,
            tree_max_seqlen_q=tree_max_seqlen_q,
            tree_max_seqlen_k=tree_max_seqlen_k,
            scaling=scaling,
            sliding_window=sliding_window,
            softcap=softcap,
            **kwargs,
        )
    if sliding_window or softcap:
        raise NotImplementedError("tree attention off CUDA: sliding-window and soft-capped attention are not supported")
    queries = query[0]  # (heads, tokens, dim): one packed row
    keys = key[0].index_select(1, tree_kv_index)  # each segment's path, laid end to end
    values = value[0].index_select(1, tree_kv_index)
    per_kv_head = queries.shape[0] // keys.shape[0]  # grouped-query attention: kv heads shared by query heads
    keys = keys.repeat_interleave(per_kv_head, dim=0)
    values = values.repeat_interleave(per_kv_head, dim=0)
    query_bounds, key_bounds = tree_cu_seqlens_q.tolist(), tree_cu_seqlens_k.tolist()
    outputs = []
    for q_start, q_end, k_start, k_end in zip(query_bounds, query_bounds[1:], key_bounds, key_bounds[1:]):
        q_len, k_len = q_end - q_start, k_end - k_start
        # The segment is the last q_len positions of its path: query i sees the path up to its own position.
        causal = torch.ones(q_len, k_len, dtype=torch.bool, device=queries.device).tril(k_len - q_len)
        outputs.append(
            torch.nn.functional.scaled_dot_product_attention(
                queries[:, q_start:q_end],
                keys[:, k_start:k_end].to(queries.dtype),
                values[:, k_start:k_end].to(queries.dtype),
                attn_mask=causal,
                scale=scaling,
            )
        )
    return torch.cat(outputs, dim=1).transpose(0, 1).unsqueeze(0), None


def peak_flops_per_device(accelerator: Any, dtype: str) -> float | None:
    """TRL's peak-FLOPs lookup on CUDA; None elsewhere (TRL's asks torch.cuda for the device's name)."""
    if accelerator.device.type != "cuda":
        return None
    return get_peak_flops_per_device(accelerator, dtype)


def register_tree_attention() -> None:
    """Put `tree_attention` under TRL's attention name (TRL registers its CUDA-only kernel there)."""
    from transformers import AttentionInterface

    AttentionInterface.register(trl_packing.TREE_ATTENTION, tree_attention)


class AgentAsyncGRPOTrainer(AsyncGRPOTrainer):
    """AsyncGRPOTrainer whose packed-tree attention also runs off CUDA (see the module's docstring)."""

    def __init__(self, *args: Any, **kwargs: Any):
        trl_trainer_module.get_peak_flops_per_device = peak_flops_per_device
        super().__init__(*args, **kwargs)  # registers TRL's kernel and builds the model with its name
        register_tree_attention()  # looked up by name at every forward, so this one is used from here on
