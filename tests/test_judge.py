"""The LLM judge step: verdicts read tolerantly, stored on the rows, journaled (a rerun and a run after a kill
pay only for what is new), failures retried then counted apart; through a scripted OpenAI-compatible server
that fails sometimes, a local model (hf:), and the command line. The real `transformers serve` is in
test_conformance_serve.py."""

from __future__ import annotations

import asyncio
import json
import socket
import textwrap

import polars as pl
import pytest

from agentdata.curate import CurateConfig, curate
from agentdata.engines.base import Engine, Generation
from agentdata.judge.config import ScoringConfig
from agentdata.judge.llm import BUILT_IN_RUBRIC, OUTPUT_FORMAT, parse_verdict
from agentdata.judge.runner import ScorerBroken
from agentdata.judge.steps import JudgeStep
from bench.fake_openai_server import FakeOpenAIServer
from tests.cli_helpers import run_cli
from tests.curate_fixtures import trajectory, write_run
from tests.reply_server import ReplyServer, chat_completion, pooling

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
    "reply",
    [
        "",
        "Looks fine to me.",
        "Score: 11",
        "Score: -1",
        "Score: 7/0",
        '{"score": "high"}',
        '{"rationale": "sound", "score": 1',  # cut short: it may have been 10
        '```json\n{"score": 8, "rationale": "the fin',
        '{"score": false}',  # JSON's false is no 0
        '{"score": true}',
        "Score: 1e3",  # not 1
        "Score: 1,000",
        "Score: 15. A 3/10 would be harsh.",  # the labelled score is out of range: no other number stands in
        '{"score": 15} rather than 2/10',
        "I will not score this 0-10.",  # a range, not a score
        "I cannot grade this. Score: N/A. Even 0/10 says too much.",
    ],
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


def test_a_local_model_judges_through_its_engine_and_noise_is_a_failure_never_a_score(tmp_path, tiny_judge_dir):
    """curate --judge hf:DIR: the judge runs in-process through the hf engine (batched, closed at the end); a model
    that writes noise until --judge-max-tokens never reaches the score it was asked to end with: every row is a
    failure (tried again once), never a low score, and a judge that failed every row stops the run, named."""
    judged_run(tmp_path, ("good", "wrong", "good"))
    scoring = ScoringConfig(
        judge=f"hf:{tiny_judge_dir}", judge_max_tokens=12, score_retries=1, score_cache=str(tmp_path / "c")
    )
    with pytest.raises(ScorerBroken, match=rf"judge hf:{tiny_judge_dir}: every row failed \(3\).*cut at --judge-max"):
        curate([tmp_path / "run"], tmp_path / "sft.parquet", CurateConfig(scoring=scoring))
    assert not (tmp_path / "sft.parquet").exists()


@pytest.mark.parametrize("step", ["judge_low", "prm_low", "no_such_step"])
def test_filter_refuses_a_step_it_cannot_run_before_profiling(step, tmp_path, capsys, monkeypatch):
    """filter's extra_steps= takes every registered step; one that reads curate's scoring settings (or none by that
    name) is one line before the student profiles anything, not after its rollouts."""

    def no_profiling(*args, **kwargs):
        raise AssertionError("the student was profiled")

    monkeypatch.setattr("agentdata.filter.run.profile_student", no_profiling)
    problems = tmp_path / "problems.jsonl"
    problems.write_text(json.dumps({"question": "What is 6 * 7?", "answer": "42"}) + "\n")
    code = run_cli(["filter", str(problems), "--out", str(tmp_path / "pool.parquet"), f"extra_steps={step}"])
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


# --------------------------------------------------------------------------- judges that answer wrongly

STEP_TAG = "<extra_0>"


def _steps(body: dict) -> int:
    return body["messages"][-1]["content"].count(STEP_TAG)


GOOD = {
    "judge": lambda body: chat_completion("Sound and supported.\nScore: 9"),
    "prm": lambda body: pooling([[0.1, 0.9]] * _steps(body)),
}
# Issue 41's probes: each answer was read as a low score (or, failing every row, ended in advice about curate's
# rules instead of naming the judge).
PROBES = {
    "judge-truncated-json": ("judge", lambda body: chat_completion('{"rationale": "sound", "score": 1')),
    "judge-empty-body": ("judge", lambda body: ""),
    "judge-score-out-of-range": ("judge", lambda body: chat_completion("Score: 15. A 3/10 would be harsh.")),
    "judge-refusal": ("judge", lambda body: chat_completion("I'm sorry, I can't grade this. Score: N/A")),
    "judge-score-false": ("judge", lambda body: chat_completion('{"score": false, "rationale": "no"}')),
    "judge-cut-at-max-tokens": ("judge", lambda body: chat_completion("The first step. Score: 1", "length")),
    "prm-step-scores-false": ("prm", lambda body: pooling([[False, False]] * _steps(body))),
    "prm-body-false": ("prm", lambda body: "false"),
}


def _curate_against(tmp_path, flag: str, url: str, *more: str) -> list[str]:
    args = ["curate", str(tmp_path / "run"), "--out", str(tmp_path / "sft.parquet"), f"--{flag}", f"openai:{url}"]
    if flag == "judge":
        args += ["--judge-option", "model=m", "--judge-option", "max_retries=0"]
    else:  # the PRM's engine options are an override since 0.5 (CHANGELOG.md)
        args.append('prm_options={"model": "m", "max_retries": 0}')
    args += [f"--min-{flag}", "0.5", "score_retries=0"]
    return args + [f"score_cache={tmp_path / 'c'}", *more]


@pytest.mark.parametrize("probe", PROBES)
def test_a_judge_that_answers_wrongly_is_a_failure_counted_apart_never_a_low_score(probe, tmp_path, capsys):
    flag, bad = PROBES[probe]
    judged_run(tmp_path, ("good", "probe", "good"))
    with ReplyServer(lambda body: bad(body) if "probe" in json.dumps(body) else GOOD[flag](body)) as server:
        code = run_cli(_curate_against(tmp_path, flag, server.url))
    err = capsys.readouterr().err
    assert code == 0, err
    report = json.loads((tmp_path / "sft.report.json").read_text())
    assert report["dropped"] == {f"dropped_{flag}_failed": 1} and report["scoring"][flag]["failed"] == 1
    assert report["kept_rows"] == 2


@pytest.mark.parametrize("probe", PROBES)
def test_a_judge_that_failed_every_row_stops_the_run_in_one_line_naming_it(probe, tmp_path, capsys):
    flag, bad = PROBES[probe]
    judged_run(tmp_path, ("probe",) * 3)
    with ReplyServer(bad) as server:
        code = run_cli(_curate_against(tmp_path, flag, server.url))
    err = capsys.readouterr().err
    assert code == 2 and len(err.strip().splitlines()) == 1, err
    assert f"openai:{server.url}" in err and "every row failed (3)" in err and "loosen" not in err, err
    assert not (tmp_path / "sft.parquet").exists()


@pytest.mark.parametrize("flag", ["judge", "prm"])
def test_a_judge_that_cannot_be_reached_is_named(flag, tmp_path, capsys):
    with socket.socket() as closed:  # a loopback port nothing listens on
        closed.bind(("127.0.0.1", 0))
        url = f"http://127.0.0.1:{closed.getsockname()[1]}/v1"
    judged_run(tmp_path, ("good",) * 3)
    code = run_cli(_curate_against(tmp_path, flag, url))
    err = capsys.readouterr().err
    assert code == 2 and len(err.strip().splitlines()) == 1, err
    assert f"openai:{url}" in err and "loosen" not in err, err


@pytest.mark.parametrize("flag", ["judge", "prm"])
def test_a_score_cache_that_is_a_file_is_one_line_before_any_row_is_read(flag, tmp_path, capsys, monkeypatch):
    """Issue 41: --score-cache FILE, a regular file, was a traceback when the first score was kept."""

    def no_rows(*args, **kwargs):
        raise AssertionError("the rows were read")

    judged_run(tmp_path, ("good",))
    (tmp_path / "c").write_text("a file\n")
    monkeypatch.setattr("agentdata.curate.passes.scalar_table", no_rows)
    code = run_cli(_curate_against(tmp_path, flag, "http://127.0.0.1:9/v1"))
    err = capsys.readouterr().err
    assert code == 2 and len(err.strip().splitlines()) == 1 and f"score_cache={tmp_path / 'c'}: not a folder" in err
