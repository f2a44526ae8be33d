"""Real artifacts of every stage for the viewer's tests, made in seconds without a model.

collect, curate, filter and eval run for real (their own writers), with a scripted engine that
computes the product in the question with the code tool and an in-process sandbox. One problem and
one answer carry XSS payloads; a train stage's metrics.jsonl holds lines as the trainer's MetricsFileCallback
writes them (one JSON object per log, its step first).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path

import pytest

from agentdata.agent.config import CollectConfig, LoopConfig
from agentdata.engines.base import Engine, Generation, GenerationRequest
from agentdata.records import Problem
from tests.fakes import CODEBLOCK_STOP, InProcessSandbox

XSS_QUESTION = (
    'What is 6 * 7? <script>window.__xss = 1</script> <img src=x onerror="window.__xss = 2"> '
    "[a link](javascript:window.__xss=3) <b>raw html</b>"
)
XSS_ANSWER = '<img src=x onerror="window.__xss = 4"><script>window.__xss = 5</script>'


def view_problems() -> list[Problem]:
    problems = [Problem(f"What is {a} * {b}?", str(a * b), source="ladder") for a, b in ((12, 13), (21, 4), (7, 8))]
    problems += [
        Problem(f"Compute {a} * {b}.", str(a * b), source="other", domain="math") for a, b in ((9, 9), (3, 14))
    ]
    return [*problems, Problem(XSS_QUESTION, "42", source="hostile")]


class ProductEngine(Engine):
    """Runs `print(A * B)` for the question's product, then answers with what it printed; a sample
    whose seed falls in `wrong_every` (or whose question holds `wrong_on`) answers one more, so problems
    have pass rates between 0 and 1 (or 0)."""

    def __init__(
        self, spec: str = "scripted:product", wrong_every: int = 3, shift: int = 0, wrong_on: str | None = None
    ):
        self.spec, self.wrong_every, self.shift, self.wrong_on = spec, wrong_every, shift, wrong_on

    async def generate(self, request: GenerationRequest) -> Generation:
        asked = next(number for number, m in enumerate(request.messages) if m["role"] == "user")
        question = request.messages[asked]["content"]
        a, b = map(int, re.search(r"(\d+) \* (\d+)", question).groups())
        codeblock = CODEBLOCK_STOP in request.stop
        seen = [m.get("content") or "" for m in request.messages[asked + 1 :]]  # the system prompt names both
        ran = any("```output" in text or "<tool_response>" in text for text in seen)
        if not ran:
            if codeblock:
                return Generation(f"Let me compute it.\n```python\nprint({a} * {b})", CODEBLOCK_STOP, "stop", 30, 9)
            call = f'<tool_call>\n{{"name": "code_interpreter", "arguments": {{"code": "print({a} * {b})"}}}}\n'
            return Generation("Let me compute it.\n" + call, "</tool_call>", "stop", 30, 9)
        hard = self.wrong_on is not None and self.wrong_on in question
        wrong = hard or (request.seed or 0) % self.wrong_every == self.shift
        value = a * b + (1 if wrong else 0)
        extra = XSS_ANSWER + " " if "onerror" in question else ""
        return Generation(f"{extra}So the product is \\boxed{{{value}}}.", None, "stop", 40, 12)


@dataclass
class Workspace:
    root: Path
    run: Path  # collect, codeblock, 4 samples per problem
    other_run: Path  # the same problems, another engine (hermes): for compare
    sft: Path
    rejects: Path
    pool: Path
    eval_dir: Path
    train: Path
    problems: Path


def build_workspace(root: Path) -> Workspace:
    from agentdata.agent.runner import collect
    from agentdata.curate import CurateConfig, curate
    from agentdata.evaluation.config import EvalConfig
    from agentdata.evaluation.runner import run_eval
    from agentdata.filter.build import PoolConfig
    from agentdata.filter.run import run_filter
    from agentdata.records import write_records

    problems = view_problems()
    sandbox = InProcessSandbox()
    problems_file = write_records(problems, root / "problems.jsonl", Problem)
    run = root / "runs" / "a"
    collect(problems, run, CollectConfig(samples=4, model="scripted:a"), engine=ProductEngine(), sandbox=sandbox)
    other = root / "runs" / "b"
    hermes = CollectConfig(samples=4, model="scripted:b", loop=LoopConfig(protocol="hermes"))
    engine = ProductEngine("scripted:b", wrong_every=2, wrong_on="Compute")  # never solves the two "Compute" ones
    collect(problems, other, hermes, engine=engine, sandbox=sandbox)
    sft, rejects = root / "sft.parquet", root / "rejects.parquet"
    curate([run], sft, CurateConfig(), rejects=rejects)
    pool = root / "pool" / "pool.parquet"
    profiling = CollectConfig(samples=4, model="scripted:student")
    profile = root / "pool" / "profile" / "student"
    collect(problems, profile, profiling, engine=ProductEngine("scripted:student", wrong_every=2), sandbox=sandbox)
    run_filter(problems, pool, PoolConfig(embedding="tfidf", band=(0.3, 0.9)), profiling, profile_dir=profile)
    eval_dir = root / "eval"
    engines = {
        "scripted:base": ProductEngine("scripted:base", 2),
        "scripted:trained": ProductEngine("scripted:trained", 5),
    }
    run_eval(list(engines), [problems_file], eval_dir, EvalConfig(samples=2), engines.__getitem__, sandbox)
    train = root / "train" / "rl"
    train.mkdir(parents=True)
    lines = []
    for step in range(1, 6):
        lines.append(
            {"step": step, "reward": -1 + 0.3 * step, "entropy": 1.5 - 0.1 * step, "tools/call_frequency": 1.0}
        )
        if step % 2:
            lines.append({"step": step, "eval/avg@4": 0.1 * step, "eval/seconds": 0.5})
    (train / "metrics.jsonl").write_text("".join(json.dumps(line) + "\n" for line in lines), encoding="utf-8")
    return Workspace(root, run, other, sft, rejects, pool, eval_dir, train, problems_file)


@pytest.fixture(scope="session")
def view_workspace(tmp_path_factory) -> Workspace:
    """The artifacts above, built once for the viewer's tests."""
    return build_workspace(tmp_path_factory.mktemp("view"))
