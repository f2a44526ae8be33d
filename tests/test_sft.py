"""SFT stage: assistant-only masking for both protocols, training, LoRA, resume, saving."""

from __future__ import annotations

import itertools
import json
from dataclasses import replace
from pathlib import Path

import pytest
import torch

from agentdata.errors import InputFileError
from agentdata.records import CODE_TOOL
from agentdata.settings import build
from agentdata.sft.config import SFTStageConfig
from agentdata.sft.data import plain_conversation
from agentdata.sft.run import run_sft
from agentdata.sft.sft_set import tokenize_sft_set
from agentdata.training.masking import TokenizedConversation, tokenize_conversation
from tests.train_fixtures import tool_conversation, write_sft_set


def masked_pieces(tokenizer, conversation):
    """(trained?, decoded text) for each run of equally-masked tokens."""
    pairs = zip(conversation.input_ids, conversation.assistant_masks)
    return [
        (bool(mask), tokenizer.decode([token for token, _ in run]))
        for mask, run in itertools.groupby(pairs, key=lambda pair: pair[1])
    ]


def trained_and_not(tokenizer, conversation) -> tuple[list[str], str]:
    """The trained runs of text, and all the untrained text joined."""
    pieces = masked_pieces(tokenizer, conversation)
    return [text for trained, text in pieces if trained], "".join(text for trained, text in pieces if not trained)


# What the model wrote in tool_conversation(), as Qwen-family templates and the hermes protocol show it.
CALL_THEN_ANSWER = [
    'Let me compute it.\n<tool_call>\n{"name": "code_interpreter", "arguments": {"code": "print(17 * 23)"}}\n'
    "</tool_call><|im_end|>",
    "The product is \\boxed{391}.<|im_end|>",
]


def test_hermes_masking_trains_only_assistant_turns(tokenizer):
    plain = plain_conversation(tool_conversation(), [], "hermes")
    trained, untrained = trained_and_not(tokenizer, tokenize_conversation(tokenizer, plain))
    assert trained == CALL_THEN_ANSWER
    # System prompt, question and tool output are all in the masked part.
    assert "<|im_start|>system\n" in untrained and "What is 17 * 23?" in untrained
    assert "<tool_response>\n391\n</tool_response>" in untrained


def test_codeblock_masking_cuts_tool_output_out_of_the_assistant_turn(tokenizer):
    plain = plain_conversation(tool_conversation(), [], "codeblock")
    pieces = masked_pieces(tokenizer, tokenize_conversation(tokenizer, plain))
    trained = [text for is_trained, text in pieces if is_trained]
    untrained = [text for is_trained, text in pieces if not is_trained]
    assert trained == ["Let me compute it.\n```python\nprint(17 * 23)\n```\n", "The product is \\boxed{391}.<|im_end|>"]
    assert "```output\n391\n```\n" in untrained


def test_each_token_knows_its_place_in_the_rendered_text(tokenizer):
    # What `agentdata view` marks: the text cut at the token offsets is the whole text, in order.
    plain = plain_conversation(tool_conversation(), [], "codeblock")
    conversation = tokenize_conversation(tokenizer, plain)
    assert len(conversation.offsets) == len(conversation.input_ids)
    assert "".join(conversation.text[start:end] for start, end in conversation.offsets) == conversation.text
    trained = "".join(
        conversation.text[s:e] for (s, e), m in zip(conversation.offsets, conversation.assistant_masks) if m
    )
    assert "print(17 * 23)" in trained and "391\n```" not in trained


def test_masking_works_for_a_template_without_generation_markers(tokenizer):
    # SmolLM2's template has no {% generation %} markers; TRL's own assistant_only_loss would need them.
    assert "{% generation %}" not in tokenizer.chat_template
    messages = [
        {"role": "user", "content": "hi"},
        {"role": "assistant", "content": "hello"},
        {"role": "user", "content": "again"},
        {"role": "assistant", "content": "hello again"},
    ]
    pieces = masked_pieces(tokenizer, tokenize_conversation(tokenizer, messages))
    assert [text for trained, text in pieces if trained] == ["hello<|im_end|>", "hello again<|im_end|>"]


def test_native_sft_trains_on_the_tool_calls_the_template_writes(tmp_path, tokenizer):
    """A native row's calls are rendered by the chat template (TRL's Qwen2.5, which supports tools) and trained."""
    import trl

    path = tmp_path / "native.jsonl"
    path.write_text(
        json.dumps({"messages": tool_conversation(), "tools": json.dumps([CODE_TOOL]), "format": "native"}) + "\n",
        encoding="utf-8",
    )
    original = tokenizer.chat_template
    tokenizer.chat_template = (Path(trl.__file__).parent / "chat_templates" / "qwen2_5.jinja").read_text()
    try:
        [row] = tokenize_sft_set(path, tokenizer, "native")
    finally:
        tokenizer.chat_template = original
    trained, untrained = trained_and_not(
        tokenizer, TokenizedConversation(row["input_ids"], row["assistant_masks"], "", 0)
    )
    assert trained == CALL_THEN_ANSWER  # the template wrote the call as the hermes protocol does
    assert "<tools>" in untrained and '"name": "code_interpreter"' in untrained  # the template lists the tools
    assert "<tool_response>\n391\n</tool_response>" in untrained


def test_a_bad_sft_row_names_file_and_row(tmp_path, tokenizer):
    path = tmp_path / "bad.jsonl"
    rows = [{"messages": tool_conversation(), "tools": "[]"}, {"messages": [{"role": "user", "content": "q"}]}]
    path.write_text("".join(json.dumps(row) + "\n" for row in rows))
    with pytest.raises(InputFileError, match=r"bad.jsonl, row 2: .*no assistant message"):
        tokenize_sft_set(path, tokenizer, "hermes")


def test_config_refuses_packing_that_mixes_conversations():
    with pytest.raises(ValueError, match="wrapped"):
        SFTStageConfig(packing=True, packing_strategy="wrapped")
    with pytest.raises(ValueError, match="max_steps"):
        SFTStageConfig(max_steps=0)


def _weights(model_dir):
    from transformers import AutoModelForCausalLM

    return {name: value.clone() for name, value in AutoModelForCausalLM.from_pretrained(model_dir).state_dict().items()}


@pytest.mark.parametrize("lora", [False, pytest.param(True, marks=pytest.mark.slow)])
def test_sft_trains_saves_and_resumes(tmp_path, tiny_model_dir, lora):
    data = write_sft_set(tmp_path / "sft.jsonl", count=6)
    config = build(
        SFTStageConfig,
        dict(
            model=f"hf:{tiny_model_dir}",
            sft_data=str(data),
            out=str(tmp_path / "out"),
            max_steps=2,
            batch_size=2,
            learning_rate=1e-2,
            save_steps=2,
            lora=lora,
            max_length=512,
        ),
    )
    result = run_sft(config)
    assert result.steps == 2 and result.final_loss is not None
    before, after = _weights(tiny_model_dir), _weights(result.model_dir)
    assert before.keys() == after.keys()  # a LoRA adapter is merged: the saved model is a plain one
    assert any(not torch.equal(before[name], after[name]) for name in before)
    assert (result.model_dir / "tokenizer_config.json").is_file()
    assert (result.model_dir / "adapter").is_dir() == lora
    history = [json.loads(line) for line in result.metrics_file.read_text().splitlines()]
    assert any("loss" in entry for entry in history)
    # Only assistant tokens carry labels: fewer trained tokens than tokens.
    assert 0 < result.trained_tokens
    if not lora:
        resumed = run_sft(replace(config, max_steps=3, resume_from_checkpoint="last"))
        assert resumed.steps == 3


def test_a_dir_converted_from_gguf_loads_as_a_trainable_model(tmp_path, tiny_model_dir):
    """The embedded SmolLM2 dir keeps the GGUF `quantization_config` over float weights; training must accept it."""
    import shutil

    from transformers.trainer_utils import validate_quantization_for_training

    from agentdata.training.model import load_model

    converted = tmp_path / "converted"
    shutil.copytree(tiny_model_dir, converted)
    config = json.loads((converted / "config.json").read_text())
    config["quantization_config"] = {"dequantize": False, "gguf_file": "model.gguf", "quant_method": "gguf"}
    (converted / "config.json").write_text(json.dumps(config))
    model = load_model(converted)
    validate_quantization_for_training(model)  # raises "purely quantized models" without the fix
    assert not getattr(model, "is_quantized", False)


def test_metrics_callback_writes_every_log_but_prints_only_lines_with_numbers(tmp_path):
    from types import SimpleNamespace

    from rich.console import Console

    from agentdata.cli.progress import rendering
    from agentdata.training.metrics import MetricsFileCallback

    console = Console(record=True, width=200)
    callback = MetricsFileCallback(tmp_path / "metrics.jsonl", "SFT")
    state = SimpleNamespace(global_step=3, max_steps=10, is_world_process_zero=True)
    with rendering(console=console):
        callback.on_log(None, state, None, logs={"loss": 0.5})
        callback.on_log(None, state, None, logs={"train_runtime": 12.0})
    lines = (tmp_path / "metrics.jsonl").read_text().splitlines()
    assert len(lines) == 2 and '"train_runtime": 12.0' in lines[1]
    assert console.export_text().splitlines() == ["SFT step 3/10: loss=0.5"]  # how far, not only the loss


def _rows(*lengths):
    return [{"input_ids": [1] * length, "assistant_masks": [1] * length} for length in lengths]


def test_rows_longer_than_max_length_are_dropped_and_counted_not_cut():
    from agentdata.sft.data import handle_long_rows

    kept, long = handle_long_rows(_rows(10, 40, 20), max_length=32)
    assert [len(row["input_ids"]) for row in kept] == [10, 20] and long == 1
    kept, long = handle_long_rows(_rows(10, 40), max_length=32, policy="truncate")
    assert len(kept) == 2 and long == 1  # kept whole: TRL cuts them, as asked
    with pytest.raises(InputFileError, match=r"data.jsonl, row 2: 40 tokens, over max_length 32"):
        handle_long_rows(_rows(10, 40), max_length=32, policy="error", path="data.jsonl")
    with pytest.raises(InputFileError, match="every row is longer than max_length 8"):
        handle_long_rows(_rows(10, 40), max_length=8)


def test_the_sft_trainer_leaves_out_a_conversation_longer_than_max_length(tmp_path, tiny_model_dir):
    import json

    from agentdata.sft.run import build_sft_trainer

    data = write_sft_set(tmp_path / "sft.jsonl", count=3)
    long = {"messages": tool_conversation("What is 99 * 23?", "2277 " + "and so on " * 300)}
    with data.open("a", encoding="utf-8") as file:
        file.write(json.dumps(long) + "\n")
    config = SFTStageConfig(model=f"hf:{tiny_model_dir}", sft_data=str(data), out=str(tmp_path / "out"), max_length=512)
    prepared = build_sft_trainer(config)
    assert len(prepared.trainer.train_dataset) == 3 and prepared.long_rows_dropped == 1


def test_a_trl_only_field_reaches_the_sft_trainer(tmp_path, tiny_model_dir):
    from agentdata.sft.run import build_sft_trainer
    from agentdata.train.settings import train_settings

    section = {"max_length": 512, "max_grad_norm": 0.25, "lr_scheduler_type": "constant", "weight_decay": 0.1}
    own = {
        "model": f"hf:{tiny_model_dir}",
        "sft_data": str(write_sft_set(tmp_path / "sft.jsonl", count=2)),
        "out": str(tmp_path / "out"),
    }
    config = train_settings(settings={"sft": {**section, **own}})["sft"]
    trainer = build_sft_trainer(config).trainer
    assert (trainer.args.max_grad_norm, trainer.args.lr_scheduler_type, trainer.args.weight_decay) == (
        0.25,
        "constant",
        0.1,
    )
    assert (trainer.args.max_length, trainer.args.per_device_train_batch_size) == (512, 4)  # the stage's own still set
    with pytest.raises(ValueError, match="set batch_size instead"):
        SFTStageConfig(trl={"per_device_train_batch_size": 8})


def test_lora_settings_follow_the_rank_and_the_learning_rate_follows_lora_unless_set():
    def optimiser(**values):
        return build(SFTStageConfig, values).optimiser  # the stages' shared block, set by its flat names

    assert (SFTStageConfig().optimiser.learning_rate, optimiser(lora=True).learning_rate) == (2e-5, 2e-4)
    assert optimiser(lora=True, lora_r=64).lora_alpha == 128
    assert (
        optimiser(lora=True, lora_r=64, lora_alpha=16, learning_rate=1e-4).lora_alpha,
        optimiser(lora=True, learning_rate=1e-4).learning_rate,
    ) == (16, 1e-4)


def _set_with_one_long_row(tmp_path):
    data = write_sft_set(tmp_path / "sft.jsonl", count=3)
    long = {"messages": tool_conversation("What is 99 * 23?", "2277 " + "and so on " * 100)}
    with data.open("a", encoding="utf-8") as file:
        file.write(json.dumps(long) + "\n")
    return data


def _longest(tokenizer, data):
    # rendered as SFT renders it by default
    return max(len(row["input_ids"]) for row in tokenize_sft_set(data, tokenizer, SFTStageConfig().protocol))


def test_the_default_max_length_covers_the_longest_row_and_is_reported(tmp_path, tiny_model_dir, tokenizer):
    from agentdata.events import listening
    from agentdata.sft.run import build_sft_trainer

    data = _set_with_one_long_row(tmp_path)
    events = []
    with listening(events.append):
        prepared = build_sft_trainer(
            SFTStageConfig(model=f"hf:{tiny_model_dir}", sft_data=str(data), out=str(tmp_path / "o"))
        )
    trainer, longest = prepared.trainer, _longest(tokenizer, data)
    assert 512 < longest < 4096 and trainer.args.max_length == longest
    assert len(trainer.train_dataset) == 4 and prepared.long_rows_dropped == 0  # the long answer is kept whole
    assert max(len(ids) for ids in trainer.train_dataset["input_ids"]) == longest
    assert any(
        f"max_length {longest} tokens (unset: the longest of 4 conversations)" in event.message for event in events
    )


def test_the_default_max_length_stops_at_the_cap():
    from agentdata.sft.data import MAX_LENGTH_CAP, fitting_max_length

    assert fitting_max_length(_rows(10, 300)) == (300, 300)
    assert fitting_max_length(_rows(10, MAX_LENGTH_CAP + 5)) == (MAX_LENGTH_CAP, MAX_LENGTH_CAP + 5)


def test_long_rows_truncate_cuts_them_with_a_warning_that_counts_them(tmp_path, tiny_model_dir):
    from agentdata.events import listening
    from agentdata.sft.run import build_sft_trainer

    data = _set_with_one_long_row(tmp_path)
    events = []
    with listening(events.append):
        prepared = build_sft_trainer(
            SFTStageConfig(
                model=f"hf:{tiny_model_dir}",
                sft_data=str(data),
                out=str(tmp_path / "o"),
                max_length=512,
                long_rows="truncate",
            )
        )
    trainer = prepared.trainer
    assert len(trainer.train_dataset) == 4 and prepared.long_rows_truncated == 1 and prepared.long_rows_dropped == 0
    assert max(len(ids) for ids in trainer.train_dataset["input_ids"]) == 512  # cut at max_length
    assert any("warning: 1 of 4 conversations are longer than max_length 512" in event.message for event in events)


def test_long_rows_error_stops_naming_the_first_long_row_exit_2(tmp_path, tiny_model_dir, tokenizer, capsys):
    from tests.cli_helpers import run_cli

    data = _set_with_one_long_row(tmp_path)
    config = tmp_path / "c.yaml"
    config.write_text("sft:\n  max_length: 512\n")
    args = [
        "train",
        "--stage",
        "sft",
        "--model",
        f"hf:{tiny_model_dir}",
        "--sft-data",
        str(data),
        "--out",
        str(tmp_path / "out"),
        "--config",
        str(config),
    ]
    assert run_cli([*args, "long_rows=error"]) == 2
    assert f"{data}, row 4: {_longest(tokenizer, data)} tokens, over max_length 512" in capsys.readouterr().err
    assert run_cli([*args, "long_rows=cut"]) == 2
    assert "error: long_rows=cut: must be one of drop, truncate, error" in capsys.readouterr().err  # names the key
