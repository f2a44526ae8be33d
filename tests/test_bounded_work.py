"""Bounded work on the local engine: a prompt beyond the model's context is refused per trajectory,
and SIGTERM stops a collect run in the middle of a generation, keeping what finished.

Both use tiny random Llamas with SmolLM2's real tokenizer (see tests/train_fixtures.py).
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import psutil
import pytest

from agentdata.agent.config import CollectConfig
from agentdata.agent.rundir import RunDir
from agentdata.agent.runner import collect
from agentdata.engines import load_engine
from agentdata.records import Problem
from agentdata.settings import build
from tests.fakes import InProcessSandbox

ROOT = Path(__file__).resolve().parents[1]
# Generous for a loaded machine: at load 11 collect was gone 6 s after the signal, half of it the interpreter's
# last garbage collection (torch's objects); the generation the signal interrupts would run for minutes, and what
# the run dir keeps (below) shows it was interrupted, not finished.
STOP_WITHIN_S = 60.0
HUGE_QUESTION = "What is 2+2? " * 80_000  # about 1 MB, as in the report: far beyond any context here


def test_a_question_beyond_the_context_is_refused_and_counted(tmp_path, tiny_model_dir):
    engine = load_engine(f"hf:{tiny_model_dir}")
    problems = [Problem(HUGE_QUESTION, "4"), Problem("What is 2+2?", "4")]
    config = build(CollectConfig, dict(model="tiny", max_new_tokens=8, temperature=0.0, concurrency=1))
    summary = collect(problems, tmp_path / "run", config, engine=engine, sandbox=InProcessSandbox())
    by_question = {t.question: t for t in RunDir(tmp_path / "run").trajectories()}
    refused, answered = by_question[HUGE_QUESTION], by_question["What is 2+2?"]
    assert (refused.finish_reason, refused.completion_tokens, refused.num_turns) == ("context", 0, 1)
    assert "longer than the model's context of 4,096 tokens" in refused.error
    assert answered.finish_reason != "context" and answered.completion_tokens > 0
    assert summary.finish_reasons["context"] == 1 and summary.total == 2
    assert engine.generate_calls == 1  # the refused question never reached the model


@pytest.fixture(scope="module")
def endless_model_dir(tmp_path_factory, tokenizer) -> Path:
    """A tiny Llama that never ends a turn: its final norm is zero, so every logit ties and greedy
    decoding repeats token 0 (not an end-of-turn token) up to its long context."""
    import torch
    from transformers import LlamaForCausalLM

    from bench.arms import tiny_llama_config

    model = LlamaForCausalLM(tiny_llama_config(tokenizer, max_position_embeddings=32_768))
    with torch.no_grad():
        model.model.norm.weight.zero_()
    assert 0 not in (tokenizer.eos_token_id, tokenizer.pad_token_id)
    model_dir = tmp_path_factory.mktemp("endless-llama")
    model.save_pretrained(model_dir)
    tokenizer.save_pretrained(model_dir)
    return model_dir


class _Output:
    """Collects a pipe's bytes in a thread, so the test can wait for a text to appear."""

    def __init__(self, stream):
        self.data = b""
        self.thread = threading.Thread(target=self._read, args=(stream,), daemon=True)
        self.thread.start()

    def _read(self, stream) -> None:
        for chunk in iter(lambda: stream.read1(4096), b""):
            self.data += chunk

    def wait_for(self, pattern: bytes, process: subprocess.Popen, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while not re.search(pattern, self.data):
            if process.poll() is not None or time.monotonic() > deadline:
                raise AssertionError(f"never saw {pattern!r}; output: {self.data[-2000:]!r}")
            time.sleep(0.05)


def test_sigterm_mid_generation_stops_collect_within_seconds_and_keeps_finished_work(tmp_path, endless_model_dir):
    problems = tmp_path / "problems.jsonl"
    # One at a time: the huge question is refused at once (finished work), then the second one
    # generates for minutes (a 32k-token budget on the endless model) until the signal comes.
    rows = [{"question": "What is 2+2? " * 250_000, "answer": "4"}, {"question": "Count to a million.", "answer": "1"}]
    problems.write_text("".join(json.dumps(row) + "\n" for row in rows))
    out = tmp_path / "run"
    command = [
        sys.executable,
        "-m",
        "agentdata.cli.app",
        "collect",
        str(problems),
        "--out",
        str(out),
        "--teacher",
        f"hf:{endless_model_dir}",
        "--temperature",
        "0",
        "--max-new-tokens",
        "30000",
        "--concurrency",
        "1",
    ]
    # TTY_COMPATIBLE makes the progress bar draw into the pipe, so the test sees "1/2" done.
    env = {**os.environ, "PYTHONPATH": str(ROOT), "TTY_COMPATIBLE": "1", "COLUMNS": "200"}
    process = subprocess.Popen(command, cwd=tmp_path, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    output = _Output(process.stdout)
    try:
        output.wait_for(rb"(?<![0-9/])1/2(?![0-9])", process, timeout=180)  # not the "21/21" of loading
        time.sleep(1.0)  # well inside the second trajectory's generation
        assert process.poll() is None
        children = psutil.Process(process.pid).children(recursive=True)  # the sandbox's template
        process.send_signal(signal.SIGTERM)
        process.wait(timeout=STOP_WITHIN_S)  # raises if the run is still going then
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
    assert process.returncode != 0, output.data[-2000:]
    trajectories = RunDir(out).trajectories()
    assert [t.finish_reason for t in trajectories] == ["context"]  # kept; the interrupted one is redone on resume
    _, alive = psutil.wait_procs(children, timeout=5)
    assert alive == []
