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
import json

from agentdata.engines import smollm2
from agentdata.engines.base import Engine, Generation, GenerationRequest
from agentdata.engines.smollm2 import SMOLLM2_TIR_SPEC
from agentdata.errors import UserError

# formats.codeblock's stop string (engines import no protocol): a request that stops there is codeblock.
CODEBLOCK_STOP = "\n```\n"

# The worked examples: (question, program, what it prints, the answer).
EXAMPLES = (
    ("What is 3817 * 2269? Put the final answer in \\boxed{}.", "print(3817 * 2269)", "8660773", "8660773"),
    (
        "How many integers from 1 to 500 are divisible by 4 or by 6? Put the final answer in \\boxed{}.",
        "print(sum(1 for k in range(1, 501) if k % 4 == 0 or k % 6 == 0))",
        "167",
        "167",
    ),
)
# As codeblock turns (ZeroTIR's fences), for the agent loop's codeblock requests.
DEMONSTRATION = tuple(
    message
    for question, code, output, answer in EXAMPLES
    for message in (
        {"role": "user", "content": question},
        {
            "role": "assistant",
            "content": f"```python\n{code}\n```\n```output\n{output}\n```\nThe answer is \\boxed{{{answer}}}.",
        },
    )
)
ANSWER_TOOL = "final_answer"  # a harness's tool that ends the run with the answer (smolagents' ToolCallingAgent)


def code_tool(tools: list[dict] | None) -> str | None:
    """The name of the request's tool that runs a program: a function whose one required argument is a
    string `code` (qwen-agent's and agentdata's MCP sandbox's `code_interpreter`); None when it has none."""
    for tool in tools or []:
        function = tool.get("function") if isinstance(tool, dict) else None
        parameters = (function or {}).get("parameters") or {}
        code = (parameters.get("properties") or {}).get("code") if isinstance(parameters, dict) else None
        if isinstance(code, dict) and code.get("type", "string") == "string" and function.get("name"):
            return str(function["name"])
    return None


def tool_demonstration(tools: list[dict]) -> list[dict]:
    """The worked examples as native calls of the request's own code tool: the call, its output as the tool's
    result, then the answer (a call of the request's `final_answer` tool when it has one)."""
    name = code_tool(tools)
    answer_argument = _answer_argument(tools)
    messages: list[dict] = []
    for number, (question, code, output, answer) in enumerate(EXAMPLES, 1):
        call_id = f"call_example_{number}"
        messages += [
            {"role": "user", "content": question},
            {"role": "assistant", "content": "", "tool_calls": [_call(call_id, name, {"code": code})]},
            {"role": "tool", "content": f"{output}\n", "tool_call_id": call_id, "name": name},
        ]
        if answer_argument is None:
            messages.append({"role": "assistant", "content": f"The answer is \\boxed{{{answer}}}."})
        else:
            final = _call(f"call_example_{number}_answer", ANSWER_TOOL, {answer_argument: answer})
            messages.append({"role": "assistant", "content": "", "tool_calls": [final]})
    return messages


def _call(call_id: str, name: str, arguments: dict) -> dict:
    return {"id": call_id, "type": "function", "function": {"name": name, "arguments": json.dumps(arguments)}}


def _answer_argument(tools: list[dict]) -> str | None:
    """The argument of the request's `final_answer` tool (its first required one), or None without one."""
    for tool in tools:
        function = tool.get("function") if isinstance(tool, dict) else None
        if function and function.get("name") == ANSWER_TOOL:
            parameters = function.get("parameters") or {}
            names = list(parameters.get("required") or []) or list(parameters.get("properties") or {})
            return str(names[0]) if names else None
    return None


class DemonstratedEngine(Engine):
    """Wraps an engine: codeblock requests get `demonstration` inserted after the system prompt, and requests
    that offer a code tool (a harness's, through the recording gateway) the same examples as calls of it.
    Any other request goes to the inner engine as it is, and its answer says so (`answered_by`)."""

    def __init__(self, inner: Engine, demonstration: tuple[dict, ...] = DEMONSTRATION, *, spec: str):
        self.inner = inner
        self.demonstration = [dict(message) for message in demonstration]
        self.spec = spec
        self.tokenizer = getattr(inner, "tokenizer", None)  # a server's engine has none

    def demonstrate(self, request: GenerationRequest) -> GenerationRequest:
        if CODEBLOCK_STOP in request.stop:
            examples = self.demonstration
        elif code_tool(request.tools):
            examples = tool_demonstration(request.tools)
        else:
            return request
        changes = {"messages": _with_examples(request.messages, examples)}
        if request.turn_messages is not None:
            changes["turn_messages"] = _with_examples(request.turn_messages, examples)
        return dataclasses.replace(request, **changes)

    def _answered(self, request: GenerationRequest, generation: Generation) -> Generation:
        """A request shown no example was answered by the inner engine alone: the generation says so."""
        if self.demonstrate(request) is request and generation.answered_by is None:
            generation.answered_by = self.inner.spec
        return generation

    async def generate(self, request: GenerationRequest) -> Generation:
        return self._answered(request, await self.inner.generate(self.demonstrate(request)))

    async def generate_many(self, requests: list[GenerationRequest]) -> list[Generation]:
        generations = await self.inner.generate_many([self.demonstrate(request) for request in requests])
        return [self._answered(request, generation) for request, generation in zip(requests, generations)]

    async def ready(self) -> None:  # a server behind it that cannot be reached stops the run before any work
        await self.inner.ready()

    def waiting_on(self) -> str | None:
        return self.inner.waiting_on()

    def tools_refusal(self) -> str | None:
        return self.inner.tools_refusal()

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


def _with_examples(messages: list[dict], examples: list[dict]) -> list[dict]:
    start = 1 if messages and messages[0].get("role") == "system" else 0
    return [*messages[:start], *examples, *messages[start:]]


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
