"""Giving the memory a training step freed back to the operating system.

On a CPU, PyTorch takes a tensor's memory from the C library's malloc. glibc keeps what is freed in
its heaps for the next allocation (once a few large blocks have come and gone, blocks of several MB
are no longer mapped apart, so freeing them returns nothing), and a rollout thread and the training
thread each grow a heap of their own. A process that trained therefore holds memory it no longer
uses: after a SmolLM2 GRPO stage 4.7 GB, of which a collection and `malloc_trim` gave back 3.9 GB;
between GRPO steps 4.3-5.3 GB, 2.4 GB after it (2026-12-04, bench/RESULTS_train.md "Memory after
training"). An experiment evaluating in the process that just trained, or running arms side by
side, needs that memory back. Elsewhere than glibc there is nothing to trim and this does nothing.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import functools
import gc

from transformers import TrainerCallback


@functools.cache
def _malloc_trim():
    """glibc's malloc_trim, or None where the C library has none (musl, macOS, Windows)."""
    name = ctypes.util.find_library("c")
    if name is None:
        return None
    try:
        return ctypes.CDLL(name).malloc_trim
    except (OSError, AttributeError):
        return None


def release_freed_memory(collect: bool = True) -> bool:
    """Hand the freed parts of the C heaps back to the operating system (after a garbage collection, so
    that cycles holding tensors are freed first). True where the C library could trim."""
    if collect:
        gc.collect()
    trim = _malloc_trim()
    if trim is None:
        return False
    trim(0)
    return True


class ReleaseMemoryCallback(TrainerCallback):
    """After every optimiser step: the step's freed activations and rollouts go back to the system
    (a trim costs 60-90 ms on a SmolLM2 GRPO step of about a minute; no collection, which a step's
    tensors do not need)."""

    def on_step_end(self, args, state, control, **kwargs):
        release_freed_memory(collect=False)
