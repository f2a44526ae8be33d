"""TRL's server mode: rollouts through TRL's own VLLMClient against a stand-in of `trl vllm-serve`,
and the settings that select it."""

from __future__ import annotations

import asyncio
import json
from types import SimpleNamespace

import pytest

from agentdata.agent.config import LoopConfig
from agentdata.agent.loop import solve
from agentdata.engines.base import GenerationRequest
from agentdata.errors import UserError
from agentdata.records import Problem
from agentdata.rl.config import GRPOStageConfig
from agentdata.rl.vllm_server_policy import ServerVLLMEngine, server_client
from agentdata.sandbox import Sandbox
from tests.vllm_server_standin import VLLMServerStandIn


@pytest.fixture
def client_factory(monkeypatch):
    """TRL's VLLMClient checks that vLLM is importable (it is on a GPU machine, not here); nothing else
    of vLLM is used by its HTTP calls."""
    import trl.generation.vllm_client as vllm_client

    monkeypatch.setattr(vllm_client, "is_vllm_available", lambda *args, **kwargs: True)
    return lambda url: server_client(
        SimpleNamespace(vllm_server_base_url=url, vllm_server_timeout=5.0, vllm_server_host="", vllm_server_port=0)
    )


def ask(text: str, **fields) -> GenerationRequest:
    return GenerationRequest(messages=[{"role": "user", "content": text}], **fields)


def run(engine, coroutine_factory):
    async def go():
        try:
            return await coroutine_factory()
        finally:
            await engine.aclose()

    return asyncio.run(go())


def test_rollouts_go_through_trls_client_one_call_per_setting_each_row_cut_to_its_budget(tokenizer, client_factory):
    with VLLMServerStandIn(tokenizer, lambda prompt: "one two three four five six seven eight nine ten") as server:
        engine = ServerVLLMEngine(client_factory(server.base_url), tokenizer)
        requests = [
            ask("a", max_new_tokens=3),
            ask("b", max_new_tokens=40),
            ask("c", max_new_tokens=40, temperature=0.0),
        ]
        results = run(engine, lambda: asyncio.gather(*(engine.generate(r) for r in requests)))
    assert len(server.requests) == 2  # temperature 0.7 (two rows) and 0.0: one HTTP call each
    warm = next(body for body in server.requests if body["temperature"] == 0.7)
    assert warm["max_tokens"] == 40 and len(warm["prompt"]) == 2 and "seed" not in warm
    expected_prompt = tokenizer(
        tokenizer.apply_chat_template([{"role": "user", "content": "a"}], tokenize=False, add_generation_prompt=True),
        add_special_tokens=False,
    )
    assert warm["prompt"][0] == expected_prompt["input_ids"]  # rendered here, sent as token ids
    assert (results[0].finish_reason, results[0].completion_tokens) == ("length", 3)
    assert results[1].finish_reason == "stop" and results[1].text == "one two three four five six seven eight nine ten"
    assert results[0].prompt_tokens == len(expected_prompt["input_ids"])


def test_agentdatas_client_sends_a_seeded_request_a_prompt_each_with_its_seed_and_budget(tokenizer):
    """The CPU path (rl/vllm_completions.CompletionsClient): a GRPO group's members share a prompt, so one call with
    one seed would give them one completion; each is sent alone with its own seed (a rerun samples them again),
    and unseeded requests still go as one call."""
    from agentdata.rl.vllm_completions import CompletionsClient

    with VLLMServerStandIn(tokenizer, lambda prompt: "one two three four five six") as server:
        engine = ServerVLLMEngine(CompletionsClient(server.base_url), tokenizer)
        seeded = [ask("same", seed=seed, max_new_tokens=budget) for seed, budget in ((11, 3), (12, 5), (13, 40))]
        unseeded = [ask("x"), ask("y")]
        results = run(engine, lambda: asyncio.gather(*(engine.generate(r) for r in seeded + unseeded)))
    with_seed = sorted(
        (body["seed"], body["max_tokens"], len(body["prompt"])) for body in server.requests if "seed" in body
    )
    assert with_seed == [(11, 3, 1), (12, 5, 1), (13, 40, 1)]
    assert [len(body["prompt"]) for body in server.requests if "seed" not in body] == [2]
    assert [result.completion_tokens for result in results[:2]] == [3, 5] and results[2].finish_reason == "stop"


def test_agent_rollouts_against_the_server_run_code_and_finish(tokenizer, client_factory):
    def respond(prompt):
        if "```output\n42" in prompt:
            return "So the answer is \\boxed{42}."
        return "Let me compute.\n```python\nprint(6 * 7)\n```\nignored"

    config = LoopConfig(protocol="codeblock", max_new_tokens=64, temperature=1.0)
    problems = [Problem(question=f"What is 6 * 7? ({i})", answer="42") for i in range(4)]
    with VLLMServerStandIn(tokenizer, respond) as server, Sandbox(workers=2, prefork=1) as sandbox:
        engine = ServerVLLMEngine(client_factory(server.base_url), tokenizer)
        trajectories = run(
            engine,
            lambda: asyncio.gather(
                *(solve(problem, engine, sandbox, config, sample_index=0, seed=i) for i, problem in enumerate(problems))
            ),
        )
    assert all(t.correct and t.num_tool_calls == 1 and t.finish_reason == "answer" for t in trajectories)
    assert server.most_active == 1  # one consumer: never two HTTP calls at once
    assert sum(len(body["prompt"]) for body in server.requests) == 8 and len(server.requests) < 8
    assert all(body["stop"] == ["\n```\n"] for body in server.requests)


def test_a_failing_server_fails_the_requests_not_the_run(tokenizer, client_factory):
    with VLLMServerStandIn(tokenizer, lambda prompt: "hi") as server:
        engine = ServerVLLMEngine(client_factory(server.base_url), tokenizer)
        server.refuse_with = 400  # TRL's client retries 5xx and lost connections itself, for minutes
        failed = run(engine, lambda: engine.generate(ask("a")))
        server.refuse_with = None
        worked = run(engine, lambda: engine.generate(ask("a")))
    assert failed.finish_reason == "error" and "400" in failed.error
    assert (worked.finish_reason, worked.text) == ("stop", "hi")


def test_a_prompt_too_long_ends_as_context_and_the_others_of_its_call_are_served(tokenizer, client_factory):
    with VLLMServerStandIn(tokenizer, lambda prompt: "hi", max_model_len=200) as server:
        engine = ServerVLLMEngine(client_factory(server.base_url), tokenizer)

        async def together():  # one wave: the three wait in the queue and form one call
            return await engine.generate_many([ask("a"), ask("word " * 300), ask("b")])

        short, long, other = run(engine, together)
    assert [short.text, other.text] == ["hi", "hi"]
    assert long.finish_reason == "context" and long.prompt_tokens > 200 and "maximum context length" in long.error
    assert [len(body["prompt"]) for body in server.requests] == [3, 1, 1, 1]


def test_vllm_server_selects_trls_server_mode(tmp_path):
    from agentdata.rl.rollout_engines import plan_rollouts
    from agentdata.rl.run import trl_grpo_config

    config = GRPOStageConfig(vllm_server="http://gpu2:8000")
    arguments = trl_grpo_config(config, tmp_path, use_vllm=True)
    assert (arguments.use_vllm, arguments.vllm_mode, arguments.vllm_server_base_url) == (
        True,
        "server",
        "http://gpu2:8000",
    )
    assert trl_grpo_config(GRPOStageConfig(), tmp_path, use_vllm=True).vllm_mode == "colocate"
    with pytest.raises(ValueError, match="use_vllm"):
        GRPOStageConfig(vllm_server="http://gpu2:8000", use_vllm="no")
    import torch

    if not torch.cuda.is_available():  # without CUDA the server is fed by files, which must be on this machine
        plan = plan_rollouts(config.use_vllm, config.vllm_server)
        assert (plan.kind, plan.server_url, plan.trl_vllm) == ("file-push", "http://gpu2:8000", False)
        from agentdata.rl.vllm_push import check_file_push_server

        with pytest.raises(UserError, match="must run on this machine"):
            check_file_push_server(plan.server_url)


def test_the_engine_follows_the_trainers_vllm_mode(tokenizer, client_factory, monkeypatch):
    from agentdata.rl import rollout_engines
    from agentdata.rl.policy import PolicyEngine
    from agentdata.rl.vllm_policy import ColocatedVLLMEngine

    with VLLMServerStandIn(tokenizer, lambda prompt: "hi") as server:

        def trainer(use_vllm, mode, processes=1, sleep=False):
            args = SimpleNamespace(
                use_vllm=use_vllm,
                vllm_mode=mode,
                vllm_server_base_url=server.base_url,
                vllm_server_timeout=5.0,
                vllm_server_host="",
                vllm_server_port=0,
                vllm_enable_sleep_mode=sleep,
            )
            return SimpleNamespace(
                args=args,
                model=SimpleNamespace(config=None),
                processing_class=tokenizer,
                vllm_generation=SimpleNamespace(llm="LLM"),
                rollout_func=lambda p, t: {},
                accelerator=SimpleNamespace(num_processes=processes),
            )

        rollout = SimpleNamespace(engine=None)
        assert isinstance(
            rollout_engines.attach_rollout_engine(trainer(False, "colocate"), rollout, tokenizer), PolicyEngine
        )
        assert (
            isinstance(
                rollout_engines.attach_rollout_engine(trainer(True, "colocate"), rollout, tokenizer),
                ColocatedVLLMEngine,
            )
            and rollout.engine.llm == "LLM"
        )
        with pytest.raises(UserError, match="vllm_enable_sleep_mode"):
            rollout_engines.attach_rollout_engine(trainer(True, "colocate", sleep=True), rollout, tokenizer)
        served = trainer(True, "server", processes=2)
        engine = rollout_engines.attach_rollout_engine(served, rollout, tokenizer)
        assert isinstance(engine, ServerVLLMEngine) and engine.client.base_url == server.base_url
        assert isinstance(served.rollout_func, rollout_engines.AfterWeightSync)  # others wait for the weight push


def test_grpo_on_a_named_server_pushes_the_policy_before_its_first_rollout(tmp_path, tiny_model_dir, tokenizer):
    """`vllm_server: URL` is a server with weights of its own (it may hold the base model while GRPO starts from
    the SFT output): the policy's go to it before the first rollout, not only after the first step."""
    from agentdata.rl.config import GRPOStageConfig
    from agentdata.rl.run import run_grpo
    from agentdata.settings import build

    problems = tmp_path / "problems.jsonl"
    problems.write_text(json.dumps({"question": "What is 2 + 3?", "answer": "5"}) + "\n")
    with VLLMServerStandIn(tokenizer, lambda prompt: "The answer is \\boxed{5}.") as server:
        settings = dict(model=f"hf:{tiny_model_dir}", rl_pool=str(problems), out=str(tmp_path / "rl"))
        settings |= dict(vllm_server=server.base_url, use_vllm="yes", max_steps=1, prompts_per_step=1)
        settings |= dict(num_generations=2, max_new_tokens=16, overlong_buffer=0, plots=False)
        result = run_grpo(build(GRPOStageConfig, settings))
    assert (result.rollouts, result.weight_pushes) == ("file-push", 2)  # at the start and after the step
    assert server.calls.index("/collective_rpc") < server.calls.index("/v1/completions")
