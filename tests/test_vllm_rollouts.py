"""The colocated vLLM rollout engine: concurrent rollouts share one `LLM.generate` call at a time.

vLLM needs a GPU, so `FakeLLM` copies the part of `vllm.LLM` the engine uses:
`generate(prompts, sampling_params, *, use_tqdm)` -> one RequestOutput per prompt with
`.prompt_token_ids` and `.outputs[0].text / .token_ids / .finish_reason / .stop_reason`
(vLLM leaves a matched stop string out of the text and names it in `stop_reason`). It fails
if it is entered while another call runs, as the real engine would misbehave, and, given a
`max_model_len`, refuses the whole call when one prompt is longer (vLLM's ValueError wording;
its prompt length here is its number of words).
"""

from __future__ import annotations

import asyncio
import re
import threading
from dataclasses import dataclass, field

import pytest

from agentdata.agent.config import LoopConfig
from agentdata.agent.loop import solve
from agentdata.engines.base import GenerationRequest
from agentdata.records import Problem
from agentdata.rl.vllm_policy import ColocatedVLLMEngine
from agentdata.sandbox import Sandbox


@dataclass
class SamplingParams:  # vllm.SamplingParams' fields that the engine sets
    max_tokens: int = 16
    temperature: float = 1.0
    top_p: float = 1.0
    stop: list[str] = field(default_factory=list)
    seed: int | None = None


@dataclass
class CompletionOutput:
    text: str
    token_ids: list[int]
    finish_reason: str
    stop_reason: str | int | None = None
    index: int = 0


@dataclass
class RequestOutput:
    prompt: str
    prompt_token_ids: list[int]
    outputs: list[CompletionOutput]


class FakeLLM:
    """Answers with `respond(prompt) -> (text, finish_reason, stop_reason)`; records each call's batch."""

    def __init__(self, respond, hold_first_call: bool = False, max_model_len: int | None = None):
        self.respond = respond
        self.max_model_len = max_model_len
        self.calls: list[list[SamplingParams]] = []
        self.prompts: list[list[str]] = []
        self._busy = threading.Lock()
        self.in_call = threading.Event()
        self.release = threading.Event()
        if not hold_first_call:
            self.release.set()

    def generate(self, prompts, sampling_params=None, *, use_tqdm=True, lora_request=None):
        if not self._busy.acquire(blocking=False):
            raise RuntimeError("LLM.generate called while another call is running")
        try:
            self.in_call.set()
            self.release.wait(timeout=30)
            assert isinstance(sampling_params, list) and len(sampling_params) == len(prompts)
            for prompt in prompts:
                if self.max_model_len is not None and len(prompt.split()) > self.max_model_len:
                    raise ValueError(
                        f"The decoder prompt (length {len(prompt.split())}) is longer than the maximum model "
                        f"length of {self.max_model_len}. Make sure that `max_model_len` is no smaller than the "
                        "number of text tokens."
                    )
            self.calls.append(list(sampling_params))
            self.prompts.append(list(prompts))
            outputs = []
            for prompt in prompts:
                text, finish, stop = self.respond(prompt)
                outputs.append(
                    RequestOutput(
                        prompt,
                        list(range(len(prompt.split()))),
                        [CompletionOutput(text, list(range(len(text.split()) + 1)), finish, stop)],
                    )
                )
            return outputs
        finally:
            self._busy.release()


def ask(text: str, **fields) -> GenerationRequest:
    return GenerationRequest(messages=[{"role": "user", "content": text}], **fields)


def test_requests_that_arrive_during_a_call_wait_and_form_the_next_one(tokenizer):
    llm = FakeLLM(lambda prompt: (f"echo {re.findall(r'q[0-9]+', prompt)[-1]}", "stop", None), hold_first_call=True)
    engine = ColocatedVLLMEngine(llm, tokenizer, sampling_params=SamplingParams)

    async def go():
        first = [asyncio.create_task(engine.generate(ask(f"q{i} ?", max_new_tokens=10 + i, seed=i))) for i in range(3)]
        while not llm.in_call.is_set():
            await asyncio.sleep(0.01)
        second = [
            asyncio.create_task(engine.generate(ask(f"q{i} ?", max_new_tokens=10 + i, seed=i))) for i in range(3, 8)
        ]
        for _ in range(5):  # let the second wave reach the queue while the first call is still held
            await asyncio.sleep(0)
        llm.release.set()
        results = await asyncio.gather(*first, *second)
        await engine.aclose()
        return results

    results = asyncio.run(go())
    assert [len(call) for call in llm.calls] == [3, 5]
    # Each request kept its own sampling settings and got its own answer back.
    assert [(p.max_tokens, p.seed) for call in llm.calls for p in call] == [(10 + i, i) for i in range(8)]
    assert all(result.finish_reason == "stop" for result in results)
    assert [result.text for result in results] == [f"echo q{i}" for i in range(8)]


def test_agent_rollouts_in_flight_never_call_generate_at_once(tokenizer):
    """Real multi-turn rollouts (codeblock, local sandbox): turns arrive at different times."""

    def respond(prompt):
        if "```output\n42" in prompt:
            return "So the answer is \\boxed{42}.", "stop", None
        return "Let me compute.\n```python\nprint(6 * 7)", "stop", "\n```\n"

    llm = FakeLLM(respond)
    engine = ColocatedVLLMEngine(llm, tokenizer, sampling_params=SamplingParams)
    config = LoopConfig(protocol="codeblock", max_new_tokens=64, temperature=1.0)
    problems = [Problem(question=f"What is 6 * 7? ({i})", answer="42") for i in range(6)]

    async def go(sandbox):
        try:
            return await asyncio.gather(
                *(solve(problem, engine, sandbox, config, sample_index=0, seed=i) for i, problem in enumerate(problems))
            )
        finally:
            await engine.aclose()

    with Sandbox(workers=2, prefork=1) as sandbox:
        trajectories = asyncio.run(go(sandbox))
    assert all(t.correct and t.num_tool_calls == 1 and t.finish_reason == "answer" for t in trajectories)
    assert sum(len(call) for call in llm.calls) == 12  # two turns per rollout, every one through one queue
    assert len(llm.calls) < 12  # batched, not one call per request


def test_a_failing_generate_call_fails_its_requests_not_the_engine(tokenizer):
    calls = []

    class BrokenOnce(FakeLLM):
        def generate(self, prompts, sampling_params=None, *, use_tqdm=True, lora_request=None):
            calls.append(len(prompts))
            if len(calls) == 1:
                raise RuntimeError("CUDA out of memory")
            return super().generate(prompts, sampling_params, use_tqdm=use_tqdm)

    engine = ColocatedVLLMEngine(
        BrokenOnce(lambda prompt: ("ok", "length", None)), tokenizer, sampling_params=SamplingParams
    )

    async def go():
        failed = await engine.generate(ask("a ?"))
        worked = await engine.generate(ask("b ?"))
        await engine.aclose()
        return failed, worked

    failed, worked = asyncio.run(go())
    assert failed.finish_reason == "error" and "out of memory" in failed.error
    assert (worked.text, worked.finish_reason) == ("ok", "length")


def test_a_prompt_too_long_ends_as_context_and_the_others_of_its_call_are_served(tokenizer):
    llm = FakeLLM(lambda prompt: ("fine", "stop", None), hold_first_call=True, max_model_len=200)
    engine = ColocatedVLLMEngine(llm, tokenizer, sampling_params=SamplingParams)

    async def go():
        blocker = asyncio.create_task(engine.generate(ask("first ?")))
        while not llm.in_call.is_set():
            await asyncio.sleep(0.01)
        # these three wait together and form one call, which the long prompt fails
        batch = [asyncio.create_task(engine.generate(ask(text))) for text in ("a ?", "word " * 300, "b ?")]
        await asyncio.sleep(0.05)
        llm.release.set()
        results = await asyncio.gather(blocker, *batch)
        await engine.aclose()
        return results

    first, short, long, other = asyncio.run(go())
    assert [first.text, short.text, other.text] == ["fine"] * 3
    assert long.finish_reason == "context" and long.prompt_tokens > 200 and "maximum model length" in long.error
    assert [len(call) for call in llm.calls] == [1, 1, 1]  # the failed call of 3, then each alone


@pytest.mark.parametrize("stop_reason", ["\n```\n", None])
def test_the_stop_string_is_named_whether_vllm_reports_it_or_leaves_it_in_the_text(tokenizer, stop_reason):
    text = "print(1)" if stop_reason else "print(1)\n```\nmore"
    engine = ColocatedVLLMEngine(
        FakeLLM(lambda prompt: (text, "stop", stop_reason)), tokenizer, sampling_params=SamplingParams
    )

    async def go():
        result = await engine.generate(ask("x ?", stop=("\n```\n",)))
        await engine.aclose()
        return result

    result = asyncio.run(go())
    assert (result.text, result.stop_reason) == ("print(1)", "\n```\n")
