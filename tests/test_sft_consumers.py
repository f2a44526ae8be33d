"""The SFT set against its real readers: every chat template TRL ships, TRL's SFTTrainer, verl's datasets.

The file is loaded as each reader loads it (`datasets` for TRL, pandas inside verl), never
patched first: a row's messages carry Arrow's null-filled keys exactly as a trainer sees them.
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

from tests.test_sft_forms import CODE, crafted, curated

TOOL_OUTPUT = "6 * 7 = 42"
ENCODED = json.dumps(CODE)[1:-1]  # the code inside a JSON string: what a model writes in a call
PYTHON_ENCODED = repr(CODE)[1:-1]  # inside a Python string literal (LFM2's pythonic calls)
DOUBLE_ENCODED = json.dumps(json.dumps(CODE))[1:-1]  # arguments rendered as a JSON string of a JSON string


def trl_templates() -> list[Path]:
    import trl

    return sorted((Path(trl.__file__).parent / "chat_templates").glob("*.jinja"))


@pytest.fixture(scope="module")
def sft_set(tmp_path_factory) -> Path:
    """One hermes row (a real tool call) and one codeblock row (code in plain text), exported as `curate --for trl`
    writes it (`--for verl` writes the same file)."""
    folder = tmp_path_factory.mktemp("sft-set")
    codeblock = crafted("b", "codeblock", problem_id="p2", question="Another, different question about products?")
    return curated(folder, [crafted("a"), codeblock], target="trl").output


@pytest.fixture(scope="module")
def rows(sft_set):
    import datasets

    dataset = datasets.load_dataset("parquet", data_files=str(sft_set), split="train")
    return {row["format"]: row for row in dataset}


def render(tokenizer, template: Path, row: dict) -> str:
    return tokenizer.apply_chat_template(
        row["messages"], tools=row["tools"], chat_template=template.read_text(), tokenize=False
    )


def renders_plain_text(tokenizer, template: Path) -> str | None:
    """Why the template cannot render a plain system/user/assistant conversation of strings (None: it can)."""
    messages = [
        {"role": "system", "content": "s"},
        {"role": "user", "content": "q"},
        {"role": "assistant", "content": CODE},
    ]
    try:
        text = tokenizer.apply_chat_template(messages, chat_template=template.read_text(), tokenize=False)
    except Exception as error:  # noqa: BLE001 - jinja raises TemplateError or UndefinedError
        return f"the template rejects a plain conversation with a system message ({error})"
    if text.count(CODE) != 1:
        return "a multimodal template: message content must be a list of parts (TRL renders it through a processor)"
    return None


def code_appears_once_decoded(text: str) -> bool:
    """The call's code is in the text once, raw or encoded once (JSON or a Python literal), never twice."""
    return text.count(CODE) + text.count(ENCODED) + text.count(PYTHON_ENCODED) == 1 and DOUBLE_ENCODED not in text


@pytest.mark.parametrize("template", trl_templates(), ids=lambda path: path.stem)
def test_every_trl_template_renders_a_codeblock_row_as_plain_fenced_text(tokenizer, rows, template):
    reason = renders_plain_text(tokenizer, template)
    if reason:
        pytest.skip(reason)
    text = render(tokenizer, template, rows["codeblock"])
    assert text.count(f"```python\n{CODE}\n```") == 1 and ENCODED not in text
    assert rows["codeblock"]["tools"] == []  # so the template adds no calling instructions of its own
    assert "<tool_call>" not in text and "code_interpreter" not in text


@pytest.fixture(scope="module")
def codeblock_set(tmp_path_factory) -> Path:
    """A set in which no row lists a tool: every row codeblock (the default protocol's), exported for verl."""
    folder = tmp_path_factory.mktemp("codeblock-set")
    rows = [
        crafted("b", "codeblock", problem_id="p2", question="Another, different question about products?"),
        crafted("c", "codeblock", problem_id="p3", question="A third question, on sums of digits?"),
    ]
    return curated(folder, rows, target="verl").output


FUNCTION_CALL_INSTRUCTIONS = ("Environment: ipython", "function call")  # what Llama 3.1 / 3.2 add for tools=[]


def test_a_set_with_no_tool_gives_every_trl_template_no_tools(tokenizer, codeblock_set):
    """TRL's SFTTrainer passes `example.get("tools")` to the template: with no column, that is None, and no
    template adds calling instructions (with `tools: []`, Llama 3.1 / 3.2's added theirs)."""
    import datasets

    dataset = datasets.load_dataset("parquet", data_files=str(codeblock_set), split="train")
    assert "tools" not in dataset.column_names and len(dataset) == 2
    rendered = 0
    for template in trl_templates():
        if renders_plain_text(tokenizer, template):
            continue
        for row in dataset:
            as_trl_gives_it = render(tokenizer, template, {**row, "tools": row.get("tools")})
            assert as_trl_gives_it == render(tokenizer, template, {**row, "tools": None}), template.stem
            assert not any(text in as_trl_gives_it for text in FUNCTION_CALL_INSTRUCTIONS), template.stem
            rendered += 1
    assert rendered >= 2 * 60  # nearly every bundled template, Llama 3.1 / 3.2's among them


def test_trl_sft_trainer_tokenizes_a_codeblock_set_without_calling_instructions(
    tmp_path, tiny_model_dir, codeblock_set
):
    import datasets
    import trl
    from transformers import AutoModelForCausalLM, AutoTokenizer
    from trl import SFTConfig, SFTTrainer

    tokenizer = AutoTokenizer.from_pretrained(tiny_model_dir)
    args = SFTConfig(
        output_dir=str(tmp_path / "out"),
        max_steps=1,
        report_to=[],
        save_strategy="no",
        use_cpu=True,
        max_length=None,
        chat_template_path=str(Path(trl.__file__).parent / "chat_templates" / "llama3_1.jinja"),
    )
    trainer = SFTTrainer(
        model=AutoModelForCausalLM.from_pretrained(tiny_model_dir),
        args=args,
        processing_class=tokenizer,
        train_dataset=datasets.load_dataset("parquet", data_files=str(codeblock_set), split="train"),
    )
    for example in trainer.train_dataset:
        text = tokenizer.decode(example["input_ids"])
        assert f"```python\n{CODE}\n```" in text
        assert not any(instruction in text for instruction in FUNCTION_CALL_INSTRUCTIONS), text


@pytest.mark.parametrize("template", trl_templates(), ids=lambda path: path.stem)
def test_every_trl_template_renders_the_tool_call_once_decoded(tokenizer, rows, template):
    from trl.chat_template_utils import supports_tool_calling

    reason = renders_plain_text(tokenizer, template)
    if reason:
        pytest.skip(reason)
    original = tokenizer.chat_template
    tokenizer.chat_template = template.read_text()
    try:
        supported = supports_tool_calling(tokenizer)
    finally:
        tokenizer.chat_template = original
    if not supported:
        pytest.skip("TRL's supports_tool_calling: this template cannot render a tool-calling conversation")
    if template.stem == "deepseekv3":
        # The model's own template concatenates `arguments` as a string (transformers#45419); TRL ships
        # deepseekv3_training.jinja, which reads mappings, and the OpenAI form (strings) renders here.
        with pytest.raises(TypeError):
            render(tokenizer, template, rows["hermes"])
        return
    text = render(tokenizer, template, rows["hermes"])
    assert code_appears_once_decoded(text), template.stem
    assert text.count(TOOL_OUTPUT) == 1


def test_the_check_catches_arguments_stored_as_a_json_string(tokenizer, rows):
    """The old form (arguments as a JSON string) double-encodes under Qwen2.5's template: the check sees it."""
    import trl

    row = json.loads(json.dumps(rows["hermes"]))
    call = row["messages"][2]["tool_calls"][0]["function"]
    call["arguments"] = json.dumps(call["arguments"])
    template = Path(trl.__file__).parent / "chat_templates" / "qwen2_5.jinja"
    assert not code_appears_once_decoded(render(tokenizer, template, row))
    assert code_appears_once_decoded(render(tokenizer, template, rows["hermes"]))


@pytest.mark.parametrize("template_name", ["qwen3_training", pytest.param("qwen2_5_training", marks=pytest.mark.slow)])
def test_trl_sft_trainer_trains_on_the_file_unchanged_with_assistant_only_loss(
    tmp_path, tiny_model_dir, sft_set, template_name
):
    import datasets
    import trl
    from transformers import AutoModelForCausalLM, AutoTokenizer
    from trl import SFTConfig, SFTTrainer

    tokenizer = AutoTokenizer.from_pretrained(tiny_model_dir)
    dataset = datasets.load_dataset("parquet", data_files=str(sft_set), split="train")
    args = SFTConfig(
        output_dir=str(tmp_path / "out"),
        max_steps=1,
        per_device_train_batch_size=2,
        report_to=[],
        assistant_only_loss=True,
        save_strategy="no",
        use_cpu=True,
        max_length=None,
        chat_template_path=str(Path(trl.__file__).parent / "chat_templates" / f"{template_name}.jinja"),
    )
    trainer = SFTTrainer(
        model=AutoModelForCausalLM.from_pretrained(tiny_model_dir),
        args=args,
        train_dataset=dataset,
        processing_class=tokenizer,
    )
    for example in trainer.train_dataset:
        trained = tokenizer.decode([label for label in example["labels"] if label != -100])  # the loss mask
        assert (CODE in trained or ENCODED in trained) and "boxed{42}" in trained
        assert TOOL_OUTPUT not in trained  # tool output is never trained on
    assert trainer.train().training_loss > 0


# --------------------------------------------------------------------------- verl, in its own venv


def verl_python() -> Path | None:
    """verl's venv from scripts/peers.sh: $AGENTDATA_VERL_PYTHON, else .peers/verl of this checkout or of /work/main."""
    if os.environ.get("AGENTDATA_VERL_PYTHON"):
        return Path(os.environ["AGENTDATA_VERL_PYTHON"])
    root = Path(__file__).resolve().parents[1]
    for candidate in (root / ".peers/verl/bin/python", root.parent.parent / "main/.peers/verl/bin/python"):
        if candidate.is_file():
            return candidate
    return None


VERL_SCRIPT = r"""
import json, sys
from omegaconf import OmegaConf
from transformers import AutoTokenizer
kind, path, model_dir, template, options = sys.argv[1:6]
tokenizer = AutoTokenizer.from_pretrained(model_dir)
tokenizer.chat_template = open(template).read()
if kind == "sft":
    from verl.utils.dataset.multiturn_sft_dataset import MultiTurnSFTDataset
    config = OmegaConf.create({"messages_key": "messages", "tools_key": "tools", "max_length": 2048,
                               "truncation": "error", **json.loads(options)})
    dataset = MultiTurnSFTDataset([path], tokenizer, config)
    out = []
    for index in range(len(dataset)):
        item = dataset[index]
        ids, mask = item["input_ids"].tolist(), item["loss_mask"].tolist()
        out.append({"trained": tokenizer.decode([t for t, m in zip(ids, mask) if m]),
                    "text": tokenizer.decode([t for t, a in zip(ids, item["attention_mask"].tolist()) if a])})
else:
    from verl.utils.dataset.rl_dataset import RLHFDataset
    config = OmegaConf.create({"prompt_key": "prompt", "max_prompt_length": 1024, "filter_overlong_prompts": False,
                               "return_raw_chat": True})
    dataset = RLHFDataset([path], tokenizer, config)
    out = [{"raw_prompt": dataset[i]["raw_prompt"], "ground_truth": dataset[i]["reward_model"]["ground_truth"],
            "data_source": dataset[i]["data_source"]} for i in range(len(dataset))]
print("RESULT" + json.dumps(out))
"""


def run_verl(kind: str, path: Path, model_dir: Path, template: str, **options) -> list[dict]:
    python = verl_python()
    if python is None:
        pytest.skip("verl is not installed: run `bash scripts/peers.sh verl` (or set AGENTDATA_VERL_PYTHON)")
    import trl

    template_path = Path(trl.__file__).parent / "chat_templates" / f"{template}.jinja"
    env = {**os.environ, "PYTHONPATH": "", "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}
    done = subprocess.run(
        [str(python), "-c", VERL_SCRIPT, kind, str(path), str(model_dir), str(template_path), json.dumps(options)],
        capture_output=True,
        text=True,
        env=env,
        timeout=600,
        cwd=path.parent,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.split("RESULT", 1)[1])


@pytest.mark.slow  # verl's venv starts torch in a subprocess: ~15 s
def test_verl_multiturn_sft_dataset_reads_the_file_unchanged(tiny_model_dir, sft_set):
    items = run_verl("sft", sft_set, tiny_model_dir, "qwen2_5")
    assert len(items) == 2
    for item in items:
        assert code_appears_once_decoded(item["text"]) and item["text"].count(TOOL_OUTPUT) == 1
        assert (CODE in item["trained"] or ENCODED in item["trained"]) and TOOL_OUTPUT not in item["trained"]


@pytest.mark.slow
def test_verl_multiturn_sft_dataset_gives_a_codeblock_set_no_tools(tiny_model_dir, codeblock_set):
    # Llama 3.1's template renders a turn alone differently from in the whole conversation (its date
    # header): verl's check of that is not what is tested here
    items = run_verl("sft", codeblock_set, tiny_model_dir, "llama3_1", ignore_input_ids_mismatch=True)
    assert len(items) == 2
    for item in items:
        assert f"```python\n{CODE}\n```" in item["text"] and CODE in item["trained"]
        assert not any(instruction in item["text"] for instruction in FUNCTION_CALL_INSTRUCTIONS), item["text"]


@pytest.mark.slow
def test_verl_rlhf_dataset_reads_the_rl_pool_export(tmp_path, tiny_model_dir):
    from agentdata.filter.build import PoolConfig, build_pool, problems_table, write_pool
    from tests.test_filter import crafted_problems, rates_for

    problems = crafted_problems(1)
    result = build_pool(
        problems_table(problems), rates_for(problems, [0.25, 0.5, 0.75]), PoolConfig(embedding="tfidf", format="verl")
    )
    pool = write_pool(result, tmp_path / "pool.parquet", "verl")
    items = run_verl("rl", pool, tiny_model_dir, "qwen2_5")
    assert sorted(item["raw_prompt"][0]["content"] for item in items) == sorted(p.question for p in problems)
    assert {item["ground_truth"] for item in items} == {"1"} and {item["data_source"] for item in items} <= {
        "src0",
        "src1",
    }
