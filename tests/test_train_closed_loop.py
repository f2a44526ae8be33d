"""The closed loop: `train --rl-problems` profiles the SFT model (not the base) between the stages with
GRPO's loop settings, keeps the band, caches the profile, and GRPO trains on that pool."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from types import SimpleNamespace

import polars as pl
import pytest

from agentdata.engines.base import Engine, Generation, GenerationRequest
from agentdata.engines.defaults import DEFAULT_ENGINE
from agentdata.events import listening
from tests.train_fixtures import write_sft_set

# question -> how many of its k=4 rollouts the scripted student gets right
CORRECT_OF_FOUR = {"What is 10 + 1?": 0, "What is 20 + 1?": 1, "What is 30 + 1?": 2, "What is 40 + 1?": 4}


class CountingStudent(Engine):
    """Answers each question right its first CORRECT_OF_FOUR[question] times, wrong after that."""

    def __init__(self, spec: str):
        self.spec, self.requests, self.seen = spec, [], {}

    async def generate(self, request: GenerationRequest) -> Generation:
        self.requests.append(request)
        question = next(q for q in CORRECT_OF_FOUR if any(q in str(m["content"]) for m in request.messages))
        times = self.seen[question] = self.seen.get(question, 0) + 1
        right = int(question.split()[2]) + 1
        answer = right if times <= CORRECT_OF_FOUR[question] else right + 1000
        return Generation(f"The answer is \\boxed{{{answer}}}.", None, "stop", 10, 8)


@pytest.fixture
def student(monkeypatch):
    """The profile's engine, whatever spec it is asked for (the spec is recorded, the model is not loaded)."""
    import agentdata.engines as engines

    made: list[CountingStudent] = []

    def load_engine(spec, **options):
        made.append(CountingStudent(spec))
        return made[-1]

    monkeypatch.setattr(engines, "load_engine", load_engine)
    return made


@pytest.fixture
def grpo_runs(monkeypatch):
    """GRPO itself is tested elsewhere (test_train_cli): here, the settings `train` would run it with."""
    import agentdata.rl.run

    runs: list = []

    def run_grpo(config, rollout_server=None):
        runs.append(config)
        return SimpleNamespace(
            history=[], steps=0, seconds=0.0, model_dir=Path(config.out), rollouts="policy", weight_pushes=0
        )

    monkeypatch.setattr(agentdata.rl.run, "run_grpo", run_grpo)  # the stage's entry point, as train calls it
    return runs


def write_problems(path: Path) -> Path:
    path.write_text(
        "".join(json.dumps({"question": q, "answer": str(int(q.split()[2]) + 1)}) + "\n" for q in CORRECT_OF_FOUR)
    )
    return path


def test_train_profiles_the_sft_model_with_grpos_loop_and_trains_grpo_on_the_band(
    tmp_path, tiny_model_dir, student, grpo_runs
):
    from tests.cli_helpers import run_cli

    sft_data, problems = write_sft_set(tmp_path / "sft.jsonl", count=4), write_problems(tmp_path / "problems.jsonl")
    config = tmp_path / "train.yaml"
    config.write_text("sft:\n  batch_size: 2\n  max_length: 512\n  max_steps: 1\nrl:\n  max_tool_calls: 1\n")
    out = tmp_path / "out"
    command = [
        "train",
        "--model",
        f"hf:{tiny_model_dir}",
        "--sft-data",
        str(sft_data),
        "--rl-problems",
        str(problems),
        "--out",
        str(out),
        "--max-new-tokens",
        "64",
        "overlong_buffer=8",
        "--config",
        str(config),
    ]
    assert run_cli(command) == 0
    [engine] = student
    assert engine.spec == f"hf:{out / 'sft'}"  # the SFT output, not the base model
    assert len(engine.requests) == 16 and {r.temperature for r in engine.requests} == {1.0}
    assert {r.max_new_tokens for r in engine.requests} == {64}
    [profile_dir] = [path for path in (out / "profile").iterdir() if path.is_dir()]
    settings = json.loads((profile_dir / "manifest.json").read_text())["settings"]
    assert (settings["teacher"], settings["temperature"], settings["max_new_tokens"], settings["max_tool_calls"]) == (
        f"hf:{out / 'sft'}",
        1.0,
        64,
        1,
    )
    pool = pl.read_parquet(out / "pool.parquet")  # the default band 0.05-0.8 keeps 1/4 and 2/4, not 0/4 or 4/4
    assert sorted(pool["pass_rate"].to_list()) == [0.25, 0.5]
    assert (out / "pool.report.json").is_file() and (out / "pool.pass_rate.png").is_file()
    [grpo] = grpo_runs
    assert grpo.rl_pool == str(out / "pool.parquet") and grpo.model == f"hf:{out / 'sft'}"

    # the same command again: the SFT model is retrained to the same weights, and its profile is reused
    assert run_cli(command) == 0
    assert len(student) == 1 and len(grpo_runs) == 2
    assert json.loads((out / "pool.report.json").read_text())["generated_rollouts"] == 0


def test_stage_rl_profiles_the_start_model_with_the_band_and_k_from_the_config(
    tmp_path, tiny_model_dir, student, grpo_runs
):
    from agentdata.train.run import TrainRequest, train

    config = tmp_path / "train.yaml"
    config.write_text(f"rl:\n  rl_problems: {write_problems(tmp_path / 'p.jsonl')}\n  band: 0.3,1.0\n  profile_k: 2\n")
    train(TrainRequest(stage="rl", out=tmp_path / "rl", config_file=config, settings={"model": f"hf:{tiny_model_dir}"}))
    assert student[0].spec == f"hf:{tiny_model_dir}" and len(student[0].requests) == 8
    [profile_dir] = [path for path in (tmp_path / "rl" / "profile").iterdir() if path.is_dir()]
    # all 4 problems × k=2 rollouts in flight at once: one batch for an in-memory engine
    assert json.loads((profile_dir / "manifest.json").read_text())["settings"]["concurrency"] == 8
    # k=2: pass rates 0, 0.5, 1, 1; the band 0.3-1.0 keeps only the half-solved one
    assert pl.read_parquet(grpo_runs[0].rl_pool)["pass_rate"].to_list() == [0.5]


def test_an_empty_band_trains_on_all_problems_with_a_warning(tmp_path, tiny_model_dir, student, grpo_runs):
    from agentdata.train.run import TrainRequest, train

    problems = write_problems(tmp_path / "p.jsonl")
    out = tmp_path / "rl"
    out.mkdir()
    (out / "pool.parquet").write_bytes(b"an earlier run's pool")
    messages: list[str] = []
    with listening(lambda event: messages.append(event.message)):
        train(
            TrainRequest(
                stage="rl",
                out=out,
                settings={"rl_problems": str(problems), "model": f"hf:{tiny_model_dir}", "band": "0.6,0.7"},
            )
        )
    [warning] = [m for m in messages if m.startswith("warning:")]
    assert "keeps none of the 4 problems" in warning and "1 never solved, 1 always solved" in warning
    assert grpo_runs[0].rl_pool == str(problems) and not (out / "pool.parquet").exists()


def test_a_given_pool_profiled_otherwise_is_trained_on_with_warnings(tmp_path, tiny_model_dir, student, grpo_runs):
    from agentdata.agent.config import CollectConfig, LoopConfig
    from agentdata.filter.build import PoolConfig
    from agentdata.filter.run import run_filter
    from agentdata.problems import load_problems
    from agentdata.train.run import TrainRequest, train

    pool = tmp_path / "pool.parquet"
    profiling = CollectConfig(samples=4, loop=LoopConfig(temperature=0.7))  # filter's default student, at 0.7
    run_filter(load_problems(write_problems(tmp_path / "p.jsonl")), pool, PoolConfig(embedding="tfidf"), profiling)
    messages: list[str] = []
    with listening(lambda event: messages.append(event.message)):
        train(
            TrainRequest(
                stage="rl", out=tmp_path / "rl", settings={"rl_pool": str(pool), "model": f"hf:{tiny_model_dir}"}
            )
        )
    warnings = [m for m in messages if m.startswith("warning:")]
    assert len(warnings) == 2 and all("\n" not in w for w in warnings)
    assert "temperature 0.7 (GRPO: 1.0)" in warnings[0]
    assert f"profiled with {DEFAULT_ENGINE}, GRPO starts from hf:" in warnings[1] and "--rl-problems" in warnings[1]
    assert grpo_runs[0].rl_pool == str(pool)


def test_a_pool_and_raw_problems_together_are_refused(tmp_path):
    from agentdata.errors import UserError
    from agentdata.train.run import TrainRequest, train

    with pytest.raises(UserError, match="not both"):
        train(
            TrainRequest(
                stage="rl",
                out=tmp_path,
                settings={
                    "rl_pool": str(tmp_path / "pool.parquet"),
                    "rl_problems": str(write_problems(tmp_path / "p.jsonl")),
                },
            )
        )


@pytest.fixture
def embedded_student(monkeypatch, tiny_model_dir):
    """`smollm2`'s factory answers as a CountingStudent (so `smollm2-tir` is the real DemonstratedEngine
    around it); the embedded weights are the tiny model, so nothing is converted."""
    import agentdata.engines as engines
    import agentdata.engines.smollm2 as smollm2

    made: list[CountingStudent] = []

    def smollm2_engine(target: str = "", *, spec: str = "smollm2", **options):
        made.append(CountingStudent(spec))
        return made[-1]

    monkeypatch.setattr(smollm2, "smollm2_engine", smollm2_engine)
    monkeypatch.setattr(engines, "smollm2_model_dir", lambda: tiny_model_dir)
    return made


def test_stage_rl_from_smollm2_tir_profiles_under_the_worked_examples_grpo_rollouts_see(
    tmp_path, embedded_student, grpo_runs
):
    from agentdata.engines.demonstrated import DEMONSTRATION, rollouts_show_examples
    from agentdata.train.closed_loop import pool_warnings
    from agentdata.train.run import TrainRequest, train

    out = tmp_path / "rl"
    train(
        TrainRequest(
            stage="rl",
            out=out,
            settings={
                "rl_problems": str(write_problems(tmp_path / "p.jsonl")),
                "model": "smollm2-tir",
                "max_new_tokens": 64,
            },
        )
    )
    [engine] = embedded_student
    # the profile's prompt is GRPO's: the worked examples between the system prompt and the question
    assert len(engine.requests) == 16
    assert all(request.messages[1:-1] == list(DEMONSTRATION) for request in engine.requests)
    [grpo] = grpo_runs
    assert grpo.model == "smollm2-tir" and rollouts_show_examples(grpo.model)
    assert sorted(pl.read_parquet(out / "pool.parquet")["pass_rate"].to_list()) == [0.25, 0.5]
    # the pool records smollm2-tir: right for GRPO from smollm2-tir, not for the plain model
    assert grpo.rl_pool == str(out / "pool.parquet") and pool_warnings(grpo) == []
    [warning] = pool_warnings(dataclasses.replace(grpo, model="smollm2"))
    assert "profiled with smollm2-tir, GRPO starts from smollm2" in warning


def test_a_pool_of_the_plain_weights_is_not_taken_for_smollm2_tir(tmp_path, tiny_model_dir, embedded_student, student):
    """Same weights, other prompt: a pool profiled without the worked examples is measured under another prompt."""
    from agentdata.agent.config import CollectConfig, rollout_loop
    from agentdata.filter.build import PoolConfig
    from agentdata.filter.run import run_filter
    from agentdata.problems import load_problems
    from agentdata.rl.config import GRPOStageConfig
    from agentdata.train.closed_loop import pool_warnings

    pool = tmp_path / "pool.parquet"
    profiling = CollectConfig(model=f"hf:{tiny_model_dir}", samples=4, loop=rollout_loop())
    run_filter(load_problems(write_problems(tmp_path / "p.jsonl")), pool, PoolConfig(embedding="tfidf"), profiling)
    [warning] = pool_warnings(GRPOStageConfig(model="smollm2-tir", rl_pool=str(pool)))
    assert f"profiled with hf:{tiny_model_dir}, GRPO starts from smollm2-tir" in warning
    assert pool_warnings(GRPOStageConfig(model="smollm2", rl_pool=str(pool))) == []  # the plain weights: same run


class CountedServer:
    """Plays the vLLM server GRPO starts (`start_rollout_server`): a stand-in of its endpoints, its starts and stops
    counted in `log`."""

    def __init__(self, tokenizer, respond, log: list[str]):
        from tests.vllm_server_standin import VLLMServerStandIn

        self.standin, self.log = VLLMServerStandIn(tokenizer, respond).__enter__(), log
        self.base_url = self.standin.base_url

    def stop(self) -> None:
        self.log.append("stop")
        self.standin.__exit__(None, None, None)


def test_with_vllm_rollouts_the_profile_runs_on_the_server_grpo_then_trains_with(
    tmp_path, tiny_model_dir, tokenizer, monkeypatch
):
    """One server start for both: the profile's requests reach the server GRPO's rollouts then come from, before any
    weight push (the start weights), and the profile records the engine it ran on (`vllm:DIR`, its own cache)."""
    import sys

    import agentdata.rl.run
    import agentdata.rl.stage_inputs
    from agentdata.engines.vllm_server import PYTHON_ENV
    from agentdata.rl.config import GRPOStageConfig
    from agentdata.settings import build
    from agentdata.train.closed_loop import pool_warnings
    from agentdata.train.run import TrainRequest, train

    answered: dict[str, int] = {}

    def respond(prompt: str) -> str:  # CountingStudent's answers, from the prompt's last question
        question = max(CORRECT_OF_FOUR, key=prompt.rfind)
        times = answered[question] = answered.get(question, 0) + 1
        right = int(question.split()[2]) + 1
        return f"The answer is \\boxed{{{right if times <= CORRECT_OF_FOUR[question] else right + 1000}}}."

    log: list[str] = []
    servers: list[CountedServer] = []

    def start_rollout_server(config):
        log.append(f"start {config.model}")
        servers.append(CountedServer(tokenizer, respond, log))
        return servers[-1]

    monkeypatch.setenv(PYTHON_ENV, sys.executable)  # vLLM "installed": GRPO's rollouts are the file push
    monkeypatch.setattr(agentdata.rl.stage_inputs, "start_rollout_server", start_rollout_server)
    monkeypatch.setattr(agentdata.rl.run, "start_rollout_server", start_rollout_server)
    out = tmp_path / "rl"
    settings = {
        "rl_problems": str(write_problems(tmp_path / "p.jsonl")),
        "model": f"hf:{tiny_model_dir}",
        **dict(use_vllm="yes", max_steps=1, prompts_per_step=1, num_generations=2, max_new_tokens=32),
        **dict(overlong_buffer=0, plots=False),
    }
    [(_, result)] = train(TrainRequest(stage="rl", out=out, settings=settings))
    assert log == [f"start hf:{tiny_model_dir}", "stop"]  # one server, stopped once GRPO is done
    [server] = servers
    prompts = [len(body["prompt"]) for body in server.standin.requests]
    calls = server.standin.calls
    profiled = sum(prompts[: calls[: calls.index("/collective_rpc")].count("/v1/completions")])
    assert profiled == 16 + 2  # the profile's 4 problems x 4, then GRPO's first group of 2, all at the start weights
    assert (result.rollouts, result.weight_pushes) == ("file-push", 1)
    [profile_dir] = [path for path in (out / "profile").iterdir() if path.is_dir()]
    assert profile_dir.name.startswith("vllm_")
    assert json.loads((profile_dir / "manifest.json").read_text())["settings"]["teacher"] == f"vllm:{tiny_model_dir}"
    report = json.loads((out / "pool.report.json").read_text())
    assert report["student"] == f"vllm:{tiny_model_dir}" and report["generated_rollouts"] == 16
    assert sorted(pl.read_parquet(out / "pool.parquet")["pass_rate"].to_list()) == [0.25, 0.5]
    # the pool given back with --rl-pool to GRPO from the same weights: no warning that another model profiled it
    given = {"model": f"hf:{tiny_model_dir}", "rl_pool": str(out / "pool.parquet"), "max_new_tokens": 32}
    assert pool_warnings(build(GRPOStageConfig, given)) == []


@pytest.mark.parametrize(
    "settings, shared",
    [
        ({"use_vllm": "yes"}, True),  # the file push: the server GRPO would start, started for the profile too
        ({"use_vllm": "yes", "mode": "async"}, True),
        ({"use_vllm": "no"}, False),  # rollouts from the policy: the profile on transformers
        ({"use_vllm": "yes", "vllm_server": "http://127.0.0.1:8000"}, False),  # a given server: its own weights
    ],
)
def test_the_profile_shares_grpos_server_only_where_grpo_starts_one(settings, shared, monkeypatch):
    import sys

    from agentdata.engines.vllm_server import PYTHON_ENV
    from agentdata.rl.config import GRPOStageConfig
    from agentdata.rl.stage_inputs import stage_starts_server

    monkeypatch.setenv(PYTHON_ENV, sys.executable)
    monkeypatch.setattr("torch.cuda.is_available", lambda: False)  # on a GPU with vLLM here, TRL drives vLLM
    assert stage_starts_server(GRPOStageConfig(**settings)) is shared
