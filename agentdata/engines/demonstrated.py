"""`smollm2-tir`: the embedded SmolLM2 shown one worked example of running code, before every request.

A 135M model does not call a tool from a description, but it copies a demonstration well:
shown one question answered by a ```python block, its ```output and a \\boxed{} answer, it
writes its own `print(...)` for most questions and reads the answer off the output. The
example goes in as one user/assistant exchange between the system prompt and the question,
only inside the engine: the recorded trajectory keeps the protocol's own system prompt and
the question, so SFT data and evaluation prompts are the same as with any other teacher.

The example is in the codeblock protocol (ZeroTIR's fences). A request that offers a code tool
(a harness's `code_interpreter`, through the recording gateway) is written in that protocol too,
and the model's block given back as a call of the tool (`codeblock_request`, `tool_answer`):
shown JSON calls instead, the model writes no call. With another protocol the engine adds
nothing and is the plain `smollm2`, and its answers say so (`Generation.answered_by`).
`tir:SPEC` shows the same examples to any other engine: a model trained by GRPO from
`smollm2-tir`, whose rollouts saw them, is evaluated under the same prompt as `tir:hf:DIR`.
`bench/RESULTS_quickstart.md` has the measurements (held-out seeds of the `compute` ladder,
never the example's own numbers).
"""

from __future__ import annotations

import dataclasses
import json
import uuid

from agentdata.engines import smollm2
from agentdata.engines.base import Engine, Generation, GenerationRequest, engine_label
from agentdata.engines.smollm2 import SMOLLM2_TIR_SPEC
from agentdata.errors import UserError
from agentdata.records import TOOL_NAME

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


def codeblock_request(request: GenerationRequest, name: str, examples: list[dict]) -> GenerationRequest | None:
    """A request that offers the code tool `name`, as the model is shown its worked examples: the conversation
    in the codeblock protocol (calls of `name` as ```python blocks, their results as ```output blocks in the same
    assistant turn, which the model then continues), the examples after the system prompt (the codeblock
    protocol's where the request has none), and the closing fence as a stop string. None when the conversation
    cannot be written so (a result with no call before it)."""
    from agentdata.formats.codeblock import CodeblockProtocol

    try:
        plain = CodeblockProtocol().to_plain_messages([_code_calls_only(message, name) for message in request.messages])
    except ValueError:
        return None
    plain = [{key: value for key, value in message.items() if key != "env_spans"} for message in plain]
    if plain[0]["role"] != "system":  # a harness that says nothing of how to run code: the agent loop's words
        plain.insert(0, {"role": "system", "content": CodeblockProtocol().system_prompt([])})
    return dataclasses.replace(
        request,
        messages=_with_examples(plain, examples),
        turn_messages=None,
        tools=None,
        stop=(*request.stop, CODEBLOCK_STOP),
        continue_final=plain[-1]["role"] == "assistant",  # after an output block the model goes on with its turn
    )


def _code_calls_only(message: dict, name: str) -> dict:
    """The message with its calls of the code tool `name` as the codeblock protocol's code calls, and any
    other call written into its text (hermes JSON), so every call the conversation made is shown."""
    if message.get("role") == "tool":  # an output ends its block as in the examples: no blank line before ```
        return {**message, "content": (message.get("content") or "").rstrip("\n")}
    if not message.get("tool_calls"):
        return message
    code, other = [], []
    for call in message["tool_calls"]:
        function = call.get("function") or {}
        (code if function.get("name") == name else other).append(call)
    text = [message.get("content") or ""] + [
        f"<tool_call>\n{json.dumps({'name': (c.get('function') or {}).get('name'), 'arguments': _arguments(c)})}"
        "\n</tool_call>"
        for c in other
    ]
    calls = [{**c, "function": {"name": TOOL_NAME, "arguments": json.dumps(_arguments(c))}} for c in code]
    return {**message, "content": "\n".join(part for part in text if part), "tool_calls": calls}


def _arguments(call: dict) -> dict:
    arguments = (call.get("function") or {}).get("arguments")
    if isinstance(arguments, str):
        try:
            arguments = json.loads(arguments)
        except ValueError:
            return {"code": arguments}
    return arguments if isinstance(arguments, dict) else {}


def tool_answer(generation: Generation, tools: list[dict]) -> Generation:
    """A generation for a codeblock request made of a tool request, answered in the request's tools: its
    ```python block as a call of the code tool; else, where the request has a `final_answer` tool, its answer
    as a call of that (the way such a harness ends its run): the \\boxed{} part, or the whole text where nothing
    is boxed (a model that read its result in a harness's own words may answer without the box)."""
    from agentdata.formats.codeblock import CodeblockProtocol
    from agentdata.verify.extract import last_boxed

    closed = generation.text + ("\n```" if generation.stop_reason == CODEBLOCK_STOP else "")
    parsed = CodeblockProtocol().parse(closed)
    if parsed.tool_calls:
        generation.text = parsed.content
        generation.tool_calls = [_call(code_tool(tools), {"code": call.code}) for call in parsed.tool_calls[:1]]
        return generation
    argument, answer = _answer_argument(tools), last_boxed(generation.text) or generation.text.strip()
    if argument is not None and answer:
        generation.tool_calls = [_call(ANSWER_TOOL, {argument: answer})]
    return generation


def _call(name: str, arguments: dict) -> dict:
    call_id = f"call_{uuid.uuid4().hex[:12]}"
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

    @property
    def label(self) -> str:  # type: ignore[override]
        return engine_label(self.inner)

    def demonstrate(self, request: GenerationRequest) -> GenerationRequest:
        """The request with the examples shown: a codeblock request's after its system prompt, a request with
        a code tool as a codeblock request (`codeblock_request`); any other as it is."""
        if CODEBLOCK_STOP in request.stop:
            changes = {"messages": _with_examples(request.messages, self.demonstration)}
            if request.turn_messages is not None:
                changes["turn_messages"] = _with_examples(request.turn_messages, self.demonstration)
            return dataclasses.replace(request, **changes)
        name = code_tool(request.tools)
        return (codeblock_request(request, name, self.demonstration) if name else None) or request

    def _answered(self, request: GenerationRequest, shown: GenerationRequest, generation: Generation) -> Generation:
        """A tool request's answer in its tools; one shown no example says it was the inner engine's alone."""
        if shown is request:
            generation.answered_by = generation.answered_by or self.inner.spec
        elif request.tools and shown.tools is None and generation.finish_reason in ("stop", "length"):
            generation = tool_answer(generation, request.tools)
        return generation

    async def generate(self, request: GenerationRequest) -> Generation:
        shown = self.demonstrate(request)
        return self._answered(request, shown, await self.inner.generate(shown))

    async def generate_many(self, requests: list[GenerationRequest]) -> list[Generation]:
        shown = [self.demonstrate(request) for request in requests]
        generations = await self.inner.generate_many(shown)
        return [self._answered(*triple) for triple in zip(requests, shown, generations)]

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
    from agentdata.engines.spec import ModelSpec

    return ModelSpec.parse(spec).shows_examples


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
