"""The LLM judge step: verdicts read tolerantly, stored on the rows, journaled (a rerun and a run after a kill
pay only for what is new), failures retried then counted apart; through a scripted OpenAI-compatible server
that fails sometimes, a local model (hf:), and the command line. The real `transformers serve` is in
test_conformance_serve.py."""

from __future__ import annotations

import asyncio
import json
import textwrap

import polars as pl
import pytest

from agentdata.curate import CurateConfig, curate
from agentdata.engines.base import Engine, Generation
from agentdata.judge.config import ScoringConfig
from agentdata.judge.llm import BUILT_IN_RUBRIC, OUTPUT_FORMAT, parse_verdict
from agentdata.judge.steps import JudgeStep
from bench.fake_openai_server import FakeOpenAIServer
from tests.cli_helpers import run_cli
from tests.curate_fixtures import trajectory, write_run

WORDS = ["alpha", "bravo", "charlie", "delta", "echo", "foxtrot", "golf", "hotel"]


@pytest.mark.parametrize(
    "reply, score",
    [
        ("The reasoning holds.\nScore: 8", 0.8),
        ("**Score:** 7/10", 0.7),
        ("Rating: 3 out of 5", 0.6),
        ('```json\n{"score": 9, "rationale": "clean"}\n```', 0.9),
        ('{"rating": 0.25}', 0.25),
        ("score = 0.7", 0.7),
        ("I would give it 6/10.", 0.6),
        ("Score: 2. Then again... Final score: 10", 1.0),  # the last one counts
        ("Score: 0", 0.0),
    ],
)
def test_verdicts_are_read_in_the_forms_models_write_them(reply, score):
    assert parse_verdict(reply).score == pytest.approx(score)


@pytest.mark.parametrize(
    "reply", ["", "Looks fine to me.", "Score: 11", "Score: -1", "Score: 7/0", '{"score": "high"}']
)
def test_a_reply_without_a_readable_score_is_no_verdict(reply):
    assert parse_verdict(reply) is None


def test_the_rationale_is_what_precedes_the_score():
    verdict = parse_verdict("Each call was needed and the output is used truthfully.\nScore: 9")
    assert verdict.rationale == "Each call was needed and the output is used truthfully."
    assert parse_verdict('{"score": 4, "reason": "one call repeated"}').rationale == "one call repeated"


class GradingEngine(Engine):
    """A judge that reads the transcript: a solution holding "wrong" gets 2, one holding "unreadable" gets prose
    with no score (every time), one holding "flaky" no score on the first try only; the rest 8."""

    spec = "grading"

    def __init__(self, stop_after: int | None = None):
        self.requests = []
        self.stop_after = stop_after
        self.answered = 0

    async def generate(self, request):
        number = len(self.requests)
        self.requests.append(request)
        if self.stop_after is not None and number >= self.stop_after:
            while self.answered < self.stop_after:
                await asyncio.sleep(0)
            for _ in range(100):  # turns of the loop, not time: the verdicts given reach the scorer
                await asyncio.sleep(0)
            raise KeyboardInterrupt  # Ctrl-C while this one is being judged
        self.answered += 1
        text = request.messages[-1]["content"]
        solution = text.split("## Solution")[1]
        if "unreadable" in solution:
            reply = "I cannot decide."
        elif "flaky" in solution and request.temperature == 0.0:
            reply = "Hmm."
        elif "wrong" in solution:
            reply = "The final step contradicts the tool output.\nScore: 2"
        else:
            reply = "Sound and supported.\nScore: 8"
        return Generation(reply, None, "stop", 100, 10)


def judged_run(tmp_path, kinds=("good", "wrong", "good", "unreadable", "flaky", "wrong")):
    rows = [
        trajectory(
            f"t{number}",
            problem_id=f"p{number}",
            question=f"Question {WORDS[number]}: how many {WORDS[number]}s fit in a box of size {number + 3}?",
            answer_text=f"This is {kind}. The answer is \\boxed{{129}}.",
        )
        for number, kind in enumerate(kinds)
    ]
    return write_run(tmp_path / "run", rows)


def judge_step(tmp_path, engine, minimum=0.5, retries=2):
    return JudgeStep(
        "grading", rubric=BUILT_IN_RUBRIC, min_score=minimum, retries=retries, cache=str(tmp_path / "c"), engine=engine
    )


def curate_with(tmp_path, step, name="sft.parquet"):
    config = CurateConfig(extra_steps=[step])  # a Step instance, as a plug-in would give one
    return curate([tmp_path / "run"], tmp_path / name, config, rejects=tmp_path / f"rejects-{name}")


def test_scores_and_rationales_are_stored_low_ones_dropped_failures_counted_apart(tmp_path):
    judged_run(tmp_path)
    engine = GradingEngine()
    step = judge_step(tmp_path, engine)
    result = curate_with(tmp_path, step)
    assert result.counts == {"judge_low": 2, "judge_failed": 1}
    kept = pl.read_parquet(tmp_path / "sft.parquet")
    assert kept["judge_score"].to_list() == [0.8] * 3 and kept["judge_rationale"][0] == "Sound and supported."
    rejects = pl.read_parquet(tmp_path / "rejects-sft.parquet")
    failed = rejects.filter(pl.col("drop_reason") == "judge_failed")
    assert failed["judge_score"].to_list() == [None] and "no score in the judge's reply" in failed["judge_error"][0]
    assert step.counts.as_dict() | {"failures": []} == {
        "scored": 5,
        "cached": 0,
        "retried": 3,
        "failed": 1,
        "failures": [],
    }  # unreadable: tried 3 times; flaky: once more
    first = engine.requests[0]
    assert first.temperature == 0.0 and BUILT_IN_RUBRIC in first.messages[-1]["content"]
    assert OUTPUT_FORMAT in first.messages[-1]["content"] and "print(sum(" in first.messages[-1]["content"]


def test_without_a_minimum_nothing_is_dropped(tmp_path):
    judged_run(tmp_path)
    result = curate_with(tmp_path, judge_step(tmp_path, GradingEngine(), minimum=None))
    kept = pl.read_parquet(tmp_path / "sft.parquet")
    assert result.counts == {} and kept["judge_score"].null_count() == 1 and kept["judge_error"].null_count() == 5


def test_a_rerun_costs_nothing_and_a_killed_run_keeps_what_it_judged(tmp_path):
    judged_run(tmp_path, ("good", "wrong", "good", "wrong", "good", "good"))
    with pytest.raises(KeyboardInterrupt):
        curate_with(tmp_path, judge_step(tmp_path, GradingEngine(stop_after=4)))
    (journal,) = (tmp_path / "c").glob("*.jsonl")
    assert len(journal.read_text().splitlines()) == 1 + 4  # a header, then the four verdicts made before it
    engine = GradingEngine()
    curate_with(tmp_path, step := judge_step(tmp_path, engine))
    assert len(engine.requests) == 2 and step.counts.cached == 4  # only what the kill left undone
    again = GradingEngine()
    curate_with(tmp_path, step := judge_step(tmp_path, again), "again.parquet")
    assert again.requests == [] and step.counts.cached == 6
    other_rubric = GradingEngine()
    curate_with(
        tmp_path, JudgeStep("grading", rubric="Only the answer.", cache=str(tmp_path / "c"), engine=other_rubric)
    )
    assert len(other_rubric.requests) == 6  # another rubric is another judge


def server_judge(body: dict) -> str:
    solution = body["messages"][-1]["content"].split("## Solution")[1]
    return "Grounded in the outputs.\nScore: 3" if "wrong" in solution else "All supported.\nScore: 9"


def test_through_a_server_that_fails_sometimes(tmp_path):
    judged_run(tmp_path, ("good", "wrong") * 4)
    with FakeOpenAIServer(script=server_judge, fail_first=[500, 503, 429, 502]) as server:
        scoring = ScoringConfig(
            judge=f"openai:{server.url}",
            min_judge=0.5,
            judge_options={"model": "fake-model", "backoff_s": 0.01},
            score_cache=str(tmp_path / "c"),
        )
        result = curate([tmp_path / "run"], tmp_path / "sft.parquet", CurateConfig(scoring=scoring))
        assert len(server.requests) == 8 + 4  # each failure asked again
    assert result.counts == {"judge_low": 4} and result.scoring["judge"]["failed"] == 0
    assert pl.read_parquet(tmp_path / "sft.parquet")["judge_score"].to_list() == [0.9] * 4


def test_a_server_that_always_fails_is_counted_apart_and_stops_the_run(tmp_path):
    judged_run(tmp_path, ("good",) * 8)
    with FakeOpenAIServer(script=server_judge, fail_always=500) as server:
        options = {"model": "fake-model", "backoff_s": 0.01, "max_retries": 1}
        scoring = ScoringConfig(judge=f"openai:{server.url}", judge_options=options, score_cache=str(tmp_path))
        with pytest.raises(Exception, match="the first 8 rows all failed.*HTTP 500"):
            curate([tmp_path / "run"], tmp_path / "sft.parquet", CurateConfig(scoring=scoring))


JUDGE_PLUGIN = """
from agentdata.engines.base import Engine, Generation


class Judge(Engine):
    def __init__(self, target="", *, spec, score=8):
        self.spec, self.score = spec, score

    async def generate(self, request):
        assert "Reward brevity." in request.messages[-1]["content"]
        return Generation(f"Fine.\\nScore: {self.score}", None, "stop", 1, 1)
"""


def test_the_command_line(tmp_path, capsys):
    judged_run(tmp_path, ("good", "good"))
    (tmp_path / "judge.py").write_text(textwrap.dedent(JUDGE_PLUGIN))
    (tmp_path / "rubric.txt").write_text("Reward brevity.\n")

    def agentdata(*args):
        code = run_cli(["curate", str(tmp_path / "run"), *args])
        captured = capsys.readouterr()
        return code, captured.out, captured.err

    flags = ["--judge", f"{tmp_path / 'judge.py'}:Judge", "--judge-rubric", str(tmp_path / "rubric.txt")]
    flags += [f"score_cache={tmp_path / 'c'}", "--out", str(tmp_path / "sft.parquet")]
    code, out, err = agentdata(*flags, "--judge-option", "score=3", "--min-judge", "0.5")
    assert code == 2 and "empty" in err and "judge: 2 scored" in out  # both scored 0.3
    code, out, err = agentdata(*flags, "--min-judge", "0.5", "--json")
    assert code == 0, err
    assert json.loads(out)["scoring"]["judge"]["scored"] == 2
    code, out, err = agentdata("--min-judge", "0.5", "--out", str(tmp_path / "x.parquet"))
    assert code == 2 and "--min-judge needs a judge" in err and len(err.strip().splitlines()) == 1
    code, out, err = agentdata(*flags[:2], "--judge-rubric", str(tmp_path / "none.txt"))
    assert code == 2 and "no such rubric file" in err


@pytest.fixture(scope="module")
def tiny_judge_dir(tmp_path_factory, tokenizer):
    """A tiny random causal LM with SmolLM2's tokenizer and chat template: a local judge that writes noise."""
    import torch
    from transformers import Qwen2ForCausalLM

    from tests.test_prm import tiny_config

    torch.manual_seed(4)
    path = tmp_path_factory.mktemp("tiny-judge")
    Qwen2ForCausalLM(tiny_config(tokenizer, max_position_embeddings=2048)).save_pretrained(path)
    tokenizer.save_pretrained(path)
    return path


def test_a_local_model_judges_through_its_engine_and_noise_is_a_failure_counted_apart(tmp_path, tiny_judge_dir):
    """curate --judge hf:DIR: the judge runs in-process through the hf engine (batched, closed at the end); what a
    model that writes noise answers is a failure counted apart, never a low score (whatever its replies: some
    noise may hold a readable score), and no row is dropped without --min-judge."""
    judged_run(tmp_path, ("good", "wrong", "good"))
    scoring = ScoringConfig(
        judge=f"hf:{tiny_judge_dir}", judge_max_tokens=12, score_retries=1, score_cache=str(tmp_path / "c")
    )
    result = curate([tmp_path / "run"], tmp_path / "sft.parquet", CurateConfig(scoring=scoring))
    counts = result.scoring["judge"]
    assert counts["scored"] + counts["failed"] == 3 and result.kept_rows == 3
    assert counts["retried"] >= counts["failed"]  # each failure was asked once more (score_retries=1)
    rows = pl.read_parquet(tmp_path / "sft.parquet")
    for score, error in rows.select("judge_score", "judge_error").iter_rows():
        assert (score is None) == (error is not None)
        if error is not None:
            assert "no score in the judge's reply" in error or "the judge failed" in error


@pytest.mark.parametrize("step", ["judge_low", "prm_low", "no_such_step"])
def test_filter_refuses_a_step_it_cannot_run_before_profiling(step, tmp_path, capsys, monkeypatch):
    """filter --step takes every registered step; one that reads curate's scoring settings (or none by that name)
    is one line before the student profiles anything, not after its rollouts."""

    def no_profiling(*args, **kwargs):
        raise AssertionError("the student was profiled")

    monkeypatch.setattr("agentdata.filter.run.profile_student", no_profiling)
    problems = tmp_path / "problems.jsonl"
    problems.write_text(json.dumps({"question": "What is 6 * 7?", "answer": "42"}) + "\n")
    code = run_cli(["filter", str(problems), "--out", str(tmp_path / "pool.parquet"), "--step", step])
    err = capsys.readouterr().err
    assert code == 2 and len(err.strip().splitlines()) == 1 and step in err, err


@pytest.mark.parametrize(
    "flags, says",
    [
        (["--judge", "nosuch:x"], "unknown engine 'nosuch:x'"),
        (["--judge", "openai:"], "needs a target"),
        (["--judge", "openai:http://127.0.0.1:9", "--judge-option", "concurrency=abc"], "--judge-option KEY=VALUE"),
        (["--judge", "hf:/no/such/model"], "not a transformers model directory"),
    ],
)
def test_a_wrong_judge_is_one_line_before_any_row_is_read(flags, says, tmp_path, capsys, monkeypatch):
    def no_rows(*args, **kwargs):
        raise AssertionError("the rows were read")

    monkeypatch.setattr("agentdata.curate.passes.scalar_table", no_rows)
    judged_run(tmp_path, ("good",))
    code = run_cli(["curate", str(tmp_path / "run"), "--out", str(tmp_path / "sft.parquet"), *flags])
    err = capsys.readouterr().err
    assert code == 2 and len(err.strip().splitlines()) == 1 and says in err, err
