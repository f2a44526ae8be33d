"""Training gives the memory it freed back to the system: between GRPO steps and after every stage."""

from __future__ import annotations

import ctypes
import platform

import pytest

from agentdata.training import memory
from agentdata.training.memory import ReleaseMemoryCallback, release_freed_memory

MB = 1 << 20


def resident_mb() -> int:
    with open("/proc/self/status", encoding="ascii") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) // 1024
    raise AssertionError("no VmRSS")


@pytest.mark.skipif(platform.libc_ver()[0] != "glibc", reason="malloc_trim is glibc's")
def test_freed_heap_blocks_go_back_to_the_system():
    # What training leaves: once a large block has come and gone, glibc keeps blocks of a few MB in its
    # heap, and freeing them (with a live block above them) returns nothing to the system.
    libc = ctypes.CDLL(None)
    libc.malloc.restype, libc.free.argtypes = ctypes.c_void_p, [ctypes.c_void_p]
    libc.free(libc.malloc(16 * MB))  # raises the threshold under which blocks stay in the heap
    blocks = [libc.malloc(MB) for _ in range(300)]
    for block in blocks:
        ctypes.memset(block, 1, MB)
    for block in blocks[:-1]:
        libc.free(block)
    held = resident_mb()
    assert release_freed_memory() is True
    assert held - resident_mb() >= 200  # of the 299 MB freed
    libc.free(blocks[-1])


def test_without_malloc_trim_nothing_is_done(monkeypatch):
    monkeypatch.setattr(memory, "_malloc_trim", lambda: None)  # musl, macOS, Windows
    assert release_freed_memory() is False


def test_grpo_gives_memory_back_between_steps(tmp_path, tiny_model_dir):
    from agentdata.rl.run import build_grpo_trainer
    from agentdata.train.settings import train_settings

    section = {"num_generations": 2, "max_new_tokens": 16, "overlong_buffer": 0, "max_steps": 1, "use_vllm": "no"}
    config = train_settings(settings={"rl": {**section, "model": f"hf:{tiny_model_dir}", "out": str(tmp_path)}})["rl"]
    trainer, _, _ = build_grpo_trainer(config, sandbox=None)
    assert any(isinstance(callback, ReleaseMemoryCallback) for callback in trainer.callback_handler.callbacks)


def test_train_gives_memory_back_after_each_stage(monkeypatch, tmp_path, tiny_model_dir):
    from agentdata.train import run
    from agentdata.train.run import TrainRequest, train

    order = []
    monkeypatch.setattr(memory, "release_freed_memory", lambda: order.append("release"))
    monkeypatch.setattr(run, "_run_sft", lambda config, sft_set: order.append("sft") or "sft done")
    monkeypatch.setattr(run, "_run_grpo", lambda config, server: order.append("rl") or "rl done")
    monkeypatch.setattr(run, "pool_for_grpo", lambda config, closed_loop, out, server: config)
    sft_set = tmp_path / "sft.jsonl"
    sft_set.write_text('{"messages": [{"role": "user", "content": "1+1?"}, {"role": "assistant", "content": "2"}]}\n')
    model = f"hf:{tiny_model_dir}"
    settings = {"sft": {"model": model, "sft_data": str(sft_set)}, "rl": {"max_new_tokens": 16, "use_vllm": "no"}}
    result = train(TrainRequest(stage="all", out=tmp_path / "out", settings=settings))
    assert [stage for stage, _ in result] == ["sft", "rl"]
    assert order == ["sft", "release", "rl", "release"]
