"""Zero RL: a base model (its tokenizer has no chat template) gets the plain-text prompt template
everywhere: the hf engine, GRPO rollouts and a training step, and SFT masking."""

from __future__ import annotations

import asyncio
import json
import shutil

import pytest

from agentdata.engines.base import Engine, Generation, GenerationRequest, cut_at_first_stop
from agentdata.engines.hf_generate import render_prompt
from agentdata.engines.prompt_template import PLAIN_PREAMBLE, PLAIN_TEMPLATE, apply_prompt_template
from agentdata.errors import UserError
from agentdata.events import listening
from agentdata.formats import get_protocol
from agentdata.records import ToolCall, assistant_message, tool_message
from agentdata.training.masking import tokenize_conversation

QUESTION = "What is 17 * 23?"


@pytest.fixture(scope="session")
def base_model_dir(tmp_path_factory, tiny_model_dir):
    """The tiny random Llama with a tokenizer that has no chat template: a base model."""
    from transformers import AutoTokenizer

    model_dir = tmp_path_factory.mktemp("tiny-base")
    for item in tiny_model_dir.iterdir():
        if item.is_file() and item.name != "chat_template.jinja":
            shutil.copy(item, model_dir / item.name)
    tokenizer = AutoTokenizer.from_pretrained(tiny_model_dir)
    tokenizer.chat_template = None
    tokenizer.save_pretrained(model_dir)
    assert AutoTokenizer.from_pretrained(model_dir).chat_template is None
    return model_dir


@pytest.fixture
def base_tokenizer(tokenizer):
    import copy

    plain = copy.deepcopy(tokenizer)
    plain.chat_template = None
    return plain


def codeblock_conversation():
    return [
        {"role": "user", "content": QUESTION},
        assistant_message("Let me compute it.", [ToolCall(code="print(17 * 23)")]),
        tool_message("call_0", "391"),
        assistant_message("The product is \\boxed{391}."),
    ]


def test_auto_gives_a_base_model_the_plain_template_and_says_so(base_tokenizer):
    events = []
    with listening(events.append):
        assert apply_prompt_template(base_tokenizer, "auto", model="base") == "plain"
    assert [event.kind for event in events] == ["log"] and "plain-text template" in events[0].message
    text = base_tokenizer.apply_chat_template(
        [{"role": "system", "content": "Use Python."}, {"role": "user", "content": QUESTION}],
        tokenize=False,
        add_generation_prompt=True,
    )
    assert text == f"{PLAIN_PREAMBLE}\nUse Python.\n\nUser: {QUESTION}\nAssistant:"


def test_chat_refuses_a_base_model_and_a_template_file_is_used(base_tokenizer, tokenizer, tmp_path):
    with pytest.raises(UserError, match="no chat template"):
        apply_prompt_template(base_tokenizer, "chat", model="base")
    with pytest.raises(UserError, match="auto, chat, plain"):
        apply_prompt_template(base_tokenizer, "plian")
    template = tmp_path / "t.jinja"
    template.write_text("{% for m in messages %}<{{ m['role'] }}>{{ m['content'] }}{% endfor %}")
    assert apply_prompt_template(base_tokenizer, str(template)) == str(template)
    assert base_tokenizer.apply_chat_template([{"role": "user", "content": "hi"}], tokenize=False) == "<user>hi"
    chat_template = tokenizer.chat_template
    assert apply_prompt_template(tokenizer, "auto") == "chat" and tokenizer.chat_template == chat_template


def test_sft_masking_on_the_plain_template_trains_the_answer_not_the_tool_output(base_tokenizer):
    apply_prompt_template(base_tokenizer, "plain")
    plain = get_protocol("codeblock").to_plain_messages(codeblock_conversation())
    conversation = tokenize_conversation(base_tokenizer, plain)
    assert conversation.text.startswith(f"{PLAIN_PREAMBLE}\n\nUser: {QUESTION}\nAssistant: Let me compute it.")
    trained = base_tokenizer.decode([i for i, bit in zip(conversation.input_ids, conversation.assistant_masks) if bit])
    assert "print(17 * 23)" in trained and "\\boxed{391}" in trained and trained.endswith(base_tokenizer.eos_token)
    assert "391\n```" not in trained.replace("print(17 * 23)", "")  # the ```output block is masked
    assert "User:" not in trained and PLAIN_PREAMBLE not in trained


def test_the_hf_engine_serves_a_base_model_with_the_plain_template(base_model_dir):
    from agentdata.engines import GenerationRequest, load_engine
    from agentdata.engines.hf_generate import render_prompt

    async def go():
        engine = load_engine(f"hf:{base_model_dir}", device="cpu")
        try:
            request = GenerationRequest(
                messages=[{"role": "user", "content": QUESTION}], max_new_tokens=4, temperature=0.0
            )
            return render_prompt(engine.tokenizer, request), await engine.generate(request)
        finally:
            await engine.aclose()

    prompt, generation = asyncio.run(go())
    assert prompt.endswith(f"User: {QUESTION}\nAssistant:") and generation.finish_reason in ("stop", "length")
    with pytest.raises(UserError, match="no chat template"):
        load_engine(f"hf:{base_model_dir}", device="cpu", prompt_template="chat")


def test_grpo_from_a_base_model_rolls_out_and_trains_on_plain_prompts(tmp_path, base_model_dir):
    from agentdata.rl.config import GRPOStageConfig
    from agentdata.rl.run import run_grpo
    from agentdata.settings import build

    config = build(
        GRPOStageConfig,
        dict(
            model=f"hf:{base_model_dir}",
            out=str(tmp_path / "rl"),
            max_steps=1,
            num_generations=2,
            max_new_tokens=16,
            overlong_buffer=0,
            use_vllm="no",
            protocol="codeblock",
            limit=2,
            plots=False,
        ),
    )
    events = []
    with listening(events.append):
        result = run_grpo(config)
    assert result.steps == 1
    assert any("plain-text template" in event.message for event in events)
    history = [json.loads(line) for line in result.metrics_file.read_text().splitlines()]
    assert any("accuracy" in entry for entry in history)
    from transformers import AutoTokenizer

    saved = AutoTokenizer.from_pretrained(result.model_dir)
    assert saved.chat_template == PLAIN_TEMPLATE  # the trained model keeps the template it was trained with


def test_grpo_rollout_prompts_are_the_plain_template(tmp_path, base_model_dir):
    from agentdata.rl.config import GRPOStageConfig
    from agentdata.rl.run import build_grpo_trainer
    from agentdata.settings import build

    config = build(
        GRPOStageConfig,
        dict(
            model=f"hf:{base_model_dir}",
            out=str(tmp_path),
            max_steps=1,
            num_generations=2,
            max_new_tokens=8,
            overlong_buffer=0,
            use_vllm="no",
            protocol="codeblock",
            limit=2,
        ),
    )
    trainer, rollout, _ = build_grpo_trainer(config, sandbox=None)
    question = rollout.problems[0].question
    output = rollout([[{"role": "user", "content": question}]] * 2, trainer)
    prompt_text = trainer.processing_class.decode(output["prompt_ids"][0])
    assert prompt_text.startswith(PLAIN_PREAMBLE) and prompt_text.endswith(f"User: {question}\nAssistant:")
    assert len(rollout.last_trajectories) == 2


class PlainTemplateEngine(Engine):
    """What the hf engine does with a base model that writes the user's next turn itself: the prompt is
    rendered with the tokenizer's template, the model's tokens decoded, the text cut at the first stop."""

    SCRIPT = "The product is \\boxed{391}.\nUser: What is 2 + 2?\nAssistant: 4"

    def __init__(self, tokenizer):
        self.spec, self.tokenizer, self.requests, self.prompts = "plain-base", tokenizer, [], []

    async def generate(self, request: GenerationRequest) -> Generation:
        self.requests.append(request)
        self.prompts.append(render_prompt(self.tokenizer, request))
        ids = self.tokenizer(self.SCRIPT, add_special_tokens=False)["input_ids"]
        text, matched = cut_at_first_stop(self.tokenizer.decode(ids, skip_special_tokens=True), tuple(request.stop))
        return Generation(text, matched, "stop", 20, len(ids))


def _solve_with(tokenizer):
    from agentdata.agent.loop import LoopConfig, solve
    from agentdata.records import Problem
    from tests.fakes import InProcessSandbox

    engine = PlainTemplateEngine(tokenizer)
    problem = Problem(id="p", question=QUESTION, answer="391")
    trajectory = asyncio.run(solve(problem, engine, InProcessSandbox(), LoopConfig(protocol="codeblock")))
    return engine, trajectory


def test_a_base_model_on_the_plain_template_stops_where_it_starts_the_users_next_turn(base_tokenizer):
    apply_prompt_template(base_tokenizer, "plain")
    engine, trajectory = _solve_with(base_tokenizer)
    [request] = engine.requests
    assert engine.prompts[0].endswith(f"User: {QUESTION}\nAssistant:")
    assert set(get_protocol("codeblock").stop_strings) < set(request.stop) and "\nUser:" in request.stop
    # the turn ends before the invented user turn: it is the answer, recorded without what followed
    assert [m["content"] for m in trajectory.messages if m["role"] == "assistant"] == ["The product is \\boxed{391}."]
    assert trajectory.finish_reason == "answer" and trajectory.correct and trajectory.num_turns == 1


def test_a_chat_template_model_is_not_stopped_at_user_lines(tokenizer):
    engine, trajectory = _solve_with(tokenizer)
    assert engine.requests[0].stop == tuple(get_protocol("codeblock").stop_strings)
    assert "User: What is 2 + 2?" in trajectory.messages[-1]["content"]
