"""`smollm2-tir`: the embedded SmolLM2 shown one worked example of running code, before every request.

A 135M model does not call a tool from a description, but it copies a demonstration well:
shown one question answered by a ```python block, its ```output and a \\boxed{} answer, it
writes its own `print(...)` for most questions and reads the answer off the output. The
example goes in as one user/assistant exchange between the system prompt and the question,
only inside the engine: the recorded trajectory keeps the protocol's own system prompt and
the question, so SFT data and evaluation prompts are the same as with any other teacher.

The example is in the codeblock protocol (ZeroTIR's fences); with another protocol the
engine adds nothing and is the plain `smollm2`. `tir:SPEC` shows the same examples to any other
engine: a model trained by GRPO from `smollm2-tir`, whose rollouts saw them, is evaluated under
the same prompt as `tir:hf:DIR`. `bench/RESULTS_quickstart.md` has the
measurements (held-out seeds of the `compute` ladder, never the example's own numbers).
"""

from __future__ import annotations

import dataclasses

from agentdata.engines import smollm2
from agentdata.engines.base import Engine, Generation, GenerationRequest, engine_label
from agentdata.engines.smollm2 import SMOLLM2_TIR_SPEC
from agentdata.errors import UserError

# formats.codeblock's stop string (engines import no protocol): a request that stops there is codeblock.
CODEBLOCK_STOP = "\n```\n"

DEMONSTRATION = (
    {"role": "user", "content": "What is 3817 * 2269? Put the final answer in \\boxed{}."},
    {
        "role": "assistant",
        "content": "```python\nprint(3817 * 2269)\n```\n```output\n8660773\n```\nThe answer is \\boxed{8660773}.",
    },
    {
        "role": "user",
        "content": "How many integers from 1 to 500 are divisible by 4 or by 6? Put the final answer in \\boxed{}.",
    },
    {
        "role": "assistant",
        "content": "```python\nprint(sum(1 for k in range(1, 501) if k % 4 == 0 or k % 6 == 0))\n"
        "```\n```output\n167\n```\nThe answer is \\boxed{167}.",
    },
)


class DemonstratedEngine(Engine):
    """Wraps an engine: codeblock requests get `demonstration` inserted after the system prompt."""

    def __init__(self, inner: Engine, demonstration: tuple[dict, ...] = DEMONSTRATION, *, spec: str):
        self.inner = inner
        self.demonstration = [dict(message) for message in demonstration]
        self.spec = spec
        self.tokenizer = getattr(inner, "tokenizer", None)  # a server's engine has none

    @property
    def label(self) -> str:  # type: ignore[override]
        return engine_label(self.inner)

    def demonstrate(self, request: GenerationRequest) -> GenerationRequest:
        if CODEBLOCK_STOP not in request.stop:
            return request
        changes = {"messages": self._with_example(request.messages)}
        if request.turn_messages is not None:
            changes["turn_messages"] = self._with_example(request.turn_messages)
        return dataclasses.replace(request, **changes)

    def _with_example(self, messages: list[dict]) -> list[dict]:
        start = 1 if messages and messages[0].get("role") == "system" else 0
        return [*messages[:start], *self.demonstration, *messages[start:]]

    async def generate(self, request: GenerationRequest) -> Generation:
        return await self.inner.generate(self.demonstrate(request))

    async def generate_many(self, requests: list[GenerationRequest]) -> list[Generation]:
        return await self.inner.generate_many([self.demonstrate(request) for request in requests])

    async def ready(self) -> None:  # a server behind it that cannot be reached stops the run before any work
        await self.inner.ready()

    def waiting_on(self) -> str | None:
        return self.inner.waiting_on()

    def wait_idle(self) -> None:
        self.inner.wait_idle()

    async def aclose(self) -> None:
        await self.inner.aclose()

    async def arelease(self) -> None:
        await self.inner.arelease()

    # GRPO swaps the live policy into its engine before each rollout batch and reads its timings.
    @property
    def model(self):
        return self.inner.model

    @model.setter
    def model(self, value) -> None:
        self.inner.model = value

    @property
    def generation_s(self) -> float:
        return getattr(self.inner, "generation_s", 0.0)


def smollm2_tir_engine(target: str = "", *, spec: str = SMOLLM2_TIR_SPEC, **options) -> DemonstratedEngine:
    """The engine factory of `smollm2-tir`: the embedded SmolLM2 shown the worked examples above."""
    return DemonstratedEngine(smollm2.smollm2_engine(**options), spec=SMOLLM2_TIR_SPEC)  # looked up when called


# Its options go to the plain smollm2 engine, so to HFEngine (engines/option_types.py checks them).
smollm2_tir_engine.options_from = "agentdata.engines.hf:HFEngine"

TIR_KIND = "tir"


def tir_engine(target: str, *, spec: str, **options) -> DemonstratedEngine:
    """`tir:SPEC`: the engine SPEC (its options passed on) shown smollm2-tir's worked examples."""
    from agentdata.engines.spec import load_engine

    check_tir_target(target)
    return DemonstratedEngine(load_engine(target, **options), spec=spec)


def check_tir_target(target: str) -> None:
    """The inner spec is an engine spec that is not already shown the examples."""
    from agentdata.engines.spec import check_engine_spec

    if _shows_examples(target):
        raise UserError(f"engine 'tir:{target}': {target} is already shown the worked examples")
    check_engine_spec(target)


tir_engine.check_target = check_tir_target


def with_examples(spec: str) -> str:
    """The spec of `spec`'s engine shown the worked examples (itself when it already is)."""
    return spec if _shows_examples(spec) else f"{TIR_KIND}:{spec}"


def _shows_examples(spec: str) -> bool:
    """Whether `spec`'s engine already shows the worked examples (smollm2-tir, or tir:...)."""
    from agentdata.engines.spec import parse_spec

    return parse_spec(spec)[0] in (TIR_KIND, SMOLLM2_TIR_SPEC)


def rollouts_show_examples(spec: str) -> bool:
    """Whether GRPO's rollouts from start model `spec` are shown worked examples (only `smollm2-tir`'s are).

    The one answer to "which prompt do this start model's rollouts get": GRPO's rollout engine
    (`demonstrated_policy`) and `train --rl-problems`' profile of the start model
    (`closed_loop.profile_spec`) both ask it, so the band is measured under GRPO's own prompt.
    """
    return spec == SMOLLM2_TIR_SPEC


def demonstrated_policy(spec: str, policy: Engine) -> Engine:
    """GRPO's rollout engine for a start model `spec`: smollm2-tir's rollouts see its worked examples.

    The examples are a prompt, not weights: GRPO from `smollm2-tir` trains SmolLM2's weights,
    samples its rollouts with the examples shown (as `collect` and `filter` ran it), and takes the
    loss on the recorded conversation, which has no example (like SFT data and eval prompts). So
    the saved model is plain SmolLM2 weights meant to run code without being shown how: use it as
    `hf:OUT`, with no examples. Any other start model (e.g. the SFT output) gets no examples.
    """
    return DemonstratedEngine(policy, spec=spec) if rollouts_show_examples(spec) else policy
