"""The tool-using default: `smollm2-tir` (SmolLM2 shown a worked codeblock example) and the
`compute` ladder that `collect` and `filter` run when given no problems."""

from __future__ import annotations

import asyncio
import re

import pytest

from agentdata.agent.config import CollectConfig, LoopConfig
from agentdata.engines import load_engine
from agentdata.engines.base import Engine, Generation, GenerationRequest
from agentdata.engines.defaults import DEFAULT_ENGINE, DEFAULT_PROTOCOL
from agentdata.engines.demonstrated import DEMONSTRATION, DemonstratedEngine, demonstrated_policy, with_examples
from agentdata.engines.spec import check_engine
from agentdata.errors import UserError
from agentdata.evaluation.config import EvalConfig
from agentdata.formats import get_protocol
from agentdata.rl.config import GRPOStageConfig
from agentdata.rl.run import load_pool
from agentdata.sft.config import SFTStageConfig
from agentdata.synth.builtin import DEFAULT_SEED, DEV_SEED, HELD_OUT_SEED, default_problems
from agentdata.synth.generators import generate_problems
from agentdata.synth.ladder import LADDER_TEMPLATES
from agentdata.synth.stitch import StitchConfig
from agentdata.training.model import resolve_model_dir
from agentdata.verify import is_correct


class RecordingEngine(Engine):
    def __init__(self):
        self.requests: list[GenerationRequest] = []

    async def generate(self, request: GenerationRequest) -> Generation:
        self.requests.append(request)
        return Generation(text="", stop_reason=None, finish_reason="stop", prompt_tokens=0, completion_tokens=0)


def _request(protocol: str) -> GenerationRequest:
    messages = [{"role": "system", "content": "S"}, {"role": "user", "content": "Q"}]
    return GenerationRequest(
        messages=messages, turn_messages=list(messages), stop=tuple(get_protocol(protocol).stop_strings)
    )


def test_codeblock_requests_get_the_example_between_system_prompt_and_question():
    inner = RecordingEngine()
    engine = DemonstratedEngine(inner, spec="smollm2-tir")
    asyncio.run(engine.generate_many([_request("codeblock")]))
    sent = inner.requests[0]
    for messages in (sent.messages, sent.turn_messages):
        assert messages[0]["content"] == "S" and messages[-1]["content"] == "Q"
        assert messages[1:-1] == list(DEMONSTRATION)


def test_other_protocols_get_the_plain_model():
    inner = RecordingEngine()
    request = _request("hermes")
    asyncio.run(DemonstratedEngine(inner, spec="smollm2-tir").generate(request))
    assert inner.requests == [request]


def test_the_example_is_right_and_written_in_the_default_protocol():
    protocol = get_protocol(DEFAULT_PROTOCOL)
    answers = [message for message in DEMONSTRATION if message["role"] == "assistant"]
    questions = [message["content"] for message in DEMONSTRATION if message["role"] == "user"]
    for question, answer in zip(questions, answers):
        turn = protocol.parse(answer["content"].split("```output")[0])
        code = turn.tool_calls[0].code
        output = re.search(r"```output\n(.*)\n```", answer["content"]).group(1)
        assert str(eval(code.removeprefix("print(")[:-1])) == output  # noqa: S307 (our own constant)
        assert is_correct(answer["content"], output)
        assert question.endswith("Put the final answer in \\boxed{}.")


def test_smollm2_tir_is_a_targetless_engine_and_the_default():
    assert DEFAULT_ENGINE == "smollm2-tir"
    with pytest.raises(UserError, match="takes no target"):
        load_engine("smollm2-tir:/models/x")


def recording_engine(target: str = "", *, spec: str, **options) -> RecordingEngine:
    """A plug-in engine factory (`tests.test_tir_default:recording_engine`) for `tir:SPEC`."""
    return RecordingEngine()


def test_tir_shows_any_engine_the_worked_examples():
    engine = load_engine("tir:tests.test_tir_default:recording_engine")
    assert isinstance(engine, DemonstratedEngine) and engine.spec == "tir:tests.test_tir_default:recording_engine"
    asyncio.run(engine.generate(_request("codeblock")))
    assert engine.inner.requests[0].messages[1:-1] == list(DEMONSTRATION)


@pytest.mark.parametrize(
    "spec,message",
    [
        ("tir:smollm2-tir", "already shown the worked examples"),
        ("tir:tir:smollm2", "already shown the worked examples"),
        ("tir:nosuch:x", "unknown engine 'nosuch:x'"),
        ("tir", "needs a target"),
    ],
)
def test_tir_refuses_an_inner_spec_that_cannot_be_shown_them(spec, message):
    with pytest.raises(UserError, match=message):
        check_engine(spec, {})


def test_with_examples_wraps_a_spec_once():
    assert with_examples("hf:/models/grpo") == "tir:hf:/models/grpo"
    assert with_examples("smollm2") == "tir:smollm2"
    assert with_examples("smollm2-tir") == "smollm2-tir"
    assert with_examples("tir:hf:/m") == "tir:hf:/m"


def test_ladder_answers_match_an_independent_computation():
    for problem in generate_problems(60, seed=3, kinds=["compute"]):
        params, template = problem.metadata["params"], problem.metadata["template"]
        expected = {
            "big_product": lambda p: p["a"] * p["b"],
            "big_sum": lambda p: sum(p["numbers"]),
            "power": lambda p: pow(p["base"], p["exponent"]),
            "digit_sum_of_power": lambda p: sum(map(int, str(pow(p["base"], p["exponent"])))),
            "remainder": lambda p: p["a"] - p["m"] * (p["a"] // p["m"]),
            "sum_of_squares": lambda p: p["n"] * (p["n"] + 1) * (2 * p["n"] + 1) // 6,
            "count_multiples": lambda p: (
                p["n"] // p["a"] + p["n"] // p["b"] - p["n"] // (p["a"] * p["b"] // _gcd(p["a"], p["b"]))
            ),
            "count_digit": lambda p: len([k for k in range(1, p["n"] + 1) if str(p["digit"]) in str(k)]),
        }[template](params)
        assert problem.answer == str(expected), problem.question


def _digit_sum(value: int) -> int:
    return sum(map(int, str(value)))


CHAIN_ANSWERS = {  # closed forms where the templates enumerate, modular identities where they divide
    "product_then_remainder": lambda p: (p["a"] % p["m"]) * (p["b"] % p["m"]) % p["m"],
    "sum_then_square": lambda p: p["a"] ** 2 + 2 * p["a"] * p["b"] + p["b"] ** 2,
    "digit_sum_then_power": lambda p: pow(_digit_sum(pow(p["base"], p["exponent"])), p["power"]),
    "remainder_then_product": lambda p: (p["a"] - p["m"] * (p["a"] // p["m"])) * p["c"],
    "count_then_digit_sum": lambda p: _digit_sum(
        (p["n"] // p["a"] + p["n"] // p["b"] - p["n"] // (p["a"] * p["b"] // _gcd(p["a"], p["b"]))) * p["c"]
    ),
    "sum_of_squares_then_remainder": lambda p: (p["n"] * (p["n"] + 1) * (2 * p["n"] + 1) // 6) % p["m"],
}


def test_chain_answers_match_an_independent_computation_and_name_the_intermediate_value():
    problems = generate_problems(60, seed=3, kinds=["chain"])
    assert {p.metadata["level"] for p in problems} == {1, 2, 3}
    assert {p.metadata["template"] for p in problems} == set(CHAIN_ANSWERS)
    for problem in problems:
        assert problem.question.startswith("Let "), problem.question  # the value a first call can compute
        expected = CHAIN_ANSWERS[problem.metadata["template"]](problem.metadata["params"])
        assert problem.answer == str(expected), problem.question


def _gcd(a: int, b: int) -> int:
    return a if b == 0 else _gcd(b, a % b)


def test_default_problems_are_the_ladder_at_every_level_apart_from_the_dev_and_held_out_seeds():
    problems = default_problems()
    assert len(problems) == 16 and len({p.id for p in problems}) == 16
    assert {p.metadata["kind"] for p in problems} == {"compute"}
    assert {p.metadata["level"] for p in problems} == set(LADDER_TEMPLATES)
    assert len({DEV_SEED, DEFAULT_SEED, HELD_OUT_SEED}) == 3
    # neither the seed the examples were tried on nor the evaluation seed shares a problem with the defaults
    for other_seed in (DEV_SEED, HELD_OUT_SEED):
        assert not {p.id for p in problems} & {p.id for p in generate_problems(64, seed=other_seed, kinds=["compute"])}


def test_every_stage_defaults_to_the_tool_using_model_and_its_protocol():
    from pathlib import Path

    from agentdata.sft.data import row_format

    # an unset protocol is the model's own (what agentdata train recorded in its dir), else the default
    assert CollectConfig().model == DEFAULT_ENGINE and CollectConfig().for_run().loop.protocol == DEFAULT_PROTOCOL
    assert LoopConfig().protocol is None and LoopConfig().for_model(DEFAULT_ENGINE).protocol == DEFAULT_PROTOCOL
    assert EvalConfig().collect_config(DEFAULT_ENGINE, 4).loop.protocol == DEFAULT_PROTOCOL
    assert StitchConfig().protocol == DEFAULT_PROTOCOL
    sft = SFTStageConfig()  # a row without a `format` column is trained in the default
    assert (sft.model, row_format({}, sft.protocol, Path("set"), 1)) == (DEFAULT_ENGINE, DEFAULT_PROTOCOL)
    assert (GRPOStageConfig().model, GRPOStageConfig().for_run().loop.protocol) == (DEFAULT_ENGINE, DEFAULT_PROTOCOL)
    assert load_pool(GRPOStageConfig()) == default_problems()  # GRPO with no pool: the default problems


def test_collect_and_filter_with_no_problem_file_run_the_default_problems(tmp_path, monkeypatch):
    import agentdata.agent.runner as runner
    import agentdata.filter.run as pool_run
    from tests.cli_helpers import run_cli

    seen = {}

    def recorder(stage):  # records what the stage was given, then stops the command (exit 2)
        def record(problems, out, config, *args, **kwargs):
            seen[stage] = (problems, args[0] if args else config)
            raise UserError("stopped by the test")

        return record

    monkeypatch.setattr(runner, "collect", recorder("collect"))
    monkeypatch.setattr(pool_run, "run_filter", recorder("filter"))  # (problems, out, pool, profiling)
    assert run_cli(["collect", "--out", str(tmp_path / "run")]) == 2
    assert run_cli(["filter", "--out", str(tmp_path / "pool.parquet")]) == 2
    for stage in ("collect", "filter"):
        problems, config = seen[stage]
        assert problems == default_problems(), stage
        assert (config.model, config.for_run().loop.protocol) == (DEFAULT_ENGINE, DEFAULT_PROTOCOL), stage


def test_grpo_from_smollm2_tir_shows_its_rollouts_the_examples_and_trains_the_plain_weights():
    policy = RecordingEngine()
    policy.model = "weights"
    wrapped = demonstrated_policy("smollm2-tir", policy)
    assert isinstance(wrapped, DemonstratedEngine) and wrapped.model == "weights"
    wrapped.model = "live policy"  # what GRPO does before each rollout batch
    assert policy.model == "live policy"
    asyncio.run(wrapped.generate(_request("codeblock")))
    assert policy.requests[0].messages[1:-1] == list(DEMONSTRATION)
    # any other start (the SFT output, the plain model) is not shown them
    for spec in ("hf:/runs/train/sft", "smollm2"):
        assert demonstrated_policy(spec, policy) is policy
    # the weights trained are SmolLM2's own: the saved model needs no example to load
    assert resolve_model_dir("smollm2-tir") == resolve_model_dir("smollm2")


@pytest.mark.slow
def test_smollm2_tir_runs_code_on_held_out_ladder_problems(tmp_path):
    """The real default model, greedy, on a seed no example was tried on: most answers run code."""
    import polars as pl

    from agentdata.agent.runner import collect

    problems = generate_problems(8, seed=1, kinds=["compute"], levels=[1, 2])
    loop = LoopConfig(protocol="codeblock", temperature=0.0, max_new_tokens=96, max_tool_calls=2)
    config = CollectConfig(model="smollm2-tir", loop=loop, concurrency=8)
    collect(problems, tmp_path / "run", config)
    rows = pl.read_parquet(tmp_path / "run" / "trajectories").to_dicts()
    ran = [any(m["role"] == "tool" and "Error" not in (m["content"] or "") for m in row["messages"]) for row in rows]
    assert sum(ran) >= 4, [row["messages"][2:] for row in rows]
    assert sum(row["correct"] for row in rows) >= 2


@pytest.mark.slow  # one GRPO step of the real SmolLM2: 1 group of 4 rollouts, then a backward pass
@pytest.mark.timeout(900)  # minutes on a loaded 2-core machine
def test_grpo_from_the_default_model_runs_real_code_in_its_rollouts(tmp_path):
    """GRPO from the default start model: its rollouts see the worked examples, so the policy's code runs."""
    import json

    from agentdata.records import write_jsonl
    from agentdata.rl.run import run_grpo

    pool = tmp_path / "pool.jsonl"  # held-out level-1 ladder problems (not the default set)
    write_jsonl(generate_problems(1, seed=HELD_OUT_SEED, kinds=["compute"], levels=[1]), pool)
    config = GRPOStageConfig(
        rl_pool=str(pool),
        out=str(tmp_path / "rl"),
        max_steps=1,
        num_generations=4,
        prompts_per_step=1,
        plots=False,
        save_steps=1000,
        loop=LoopConfig(temperature=1.0, max_new_tokens=64, max_tool_calls=1),
    )
    assert config.model == DEFAULT_ENGINE
    result = run_grpo(config)
    [step] = [json.loads(line) for line in result.metrics_file.read_text().splitlines() if '"reward"' in line]
    assert step["tools/call_frequency"] > 0, step  # real code ran in the policy's rollouts
    assert (tmp_path / "rl" / "config.json").is_file()  # plain SmolLM2 weights: loadable as hf:DIR
