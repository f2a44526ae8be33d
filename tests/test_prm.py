"""The process reward model step: tiny randomly initialised PRMs of the public architectures, built here
(a token-classification head, Qwen2.5-Math-PRM's custom reward head, a Math-Shepherd style causal LM),
read the way their model cards read them; the pooling endpoint against a stand-in copying vLLM's."""

from __future__ import annotations

import asyncio
import copy
import json
import textwrap
from pathlib import Path

import polars as pl
import pytest

from agentdata.curate import CurateConfig, curate
from agentdata.errors import UserError
from agentdata.judge.config import ScoringConfig
from agentdata.judge.prm import ScoreFailure, StepsInput, aggregate, load_prm
from agentdata.judge.prm_hf import HFProcessRewardModel
from agentdata.judge.runner import ScorerBroken
from agentdata.judge.steps import PRMStep
from agentdata.judge.transcript import trajectory_steps
from agentdata.records import ToolCall, assistant_message, tool_message
from tests.curate_fixtures import trajectory, write_run
from tests.pooling_server_standin import PoolingServer

SEP = "<extra_0>"
SYSTEM = "Please reason step by step, and put your final answer within \\boxed{}."
ITEMS = [
    StepsInput(
        "What is 6 times 7?", ["Let me compute it.\n```python\nprint(6 * 7)\n```", "```output\n42\n```\nSo 42."]
    ),
    StepsInput("What is 2 + 2?", ["Two and two make four, so the answer is \\boxed{4}."]),
    StepsInput("Name a prime above 10.", ["11 is prime.", "It has no divisor but 1 and itself.", "\\boxed{11}"]),
]
REMOTE_CODE = '''
import torch.nn as nn
from transformers import PreTrainedModel, Qwen2Config, Qwen2Model


class TinyProcessRewardModel(PreTrainedModel):
    """Qwen2.5-Math-PRM's shape: a Qwen2 body and a two-layer score head giving two labels per token."""

    config_class = Qwen2Config
    base_model_prefix = "model"

    def __init__(self, config):
        super().__init__(config)
        self.model = Qwen2Model(config)
        width = config.hidden_size
        self.score = nn.Sequential(nn.Linear(width, width), nn.ReLU(), nn.Linear(width, config.num_labels))
        self.post_init()

    def forward(self, input_ids=None, attention_mask=None, **kwargs):
        hidden = self.model(input_ids=input_ids, attention_mask=attention_mask).last_hidden_state
        return (self.score(hidden),)
'''


@pytest.fixture(scope="module")
def prm_tokenizer(tokenizer):
    """SmolLM2's tokenizer (the session's, read once from the GGUF) with Qwen's step separator added."""
    prm_tokenizer = copy.deepcopy(tokenizer)
    prm_tokenizer.add_special_tokens({"additional_special_tokens": [SEP]})
    return prm_tokenizer


def tiny_config(tokenizer, **extra):
    from transformers import Qwen2Config

    shape = dict(
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=256,
    )
    return Qwen2Config(
        vocab_size=len(tokenizer),
        pad_token_id=tokenizer.pad_token_id,
        bos_token_id=tokenizer.bos_token_id,
        eos_token_id=tokenizer.eos_token_id,
        **{**shape, **extra},
    )


@pytest.fixture(scope="module")
def token_classification_dir(tmp_path_factory, prm_tokenizer) -> Path:
    import torch
    from transformers import Qwen2ForTokenClassification

    torch.manual_seed(1)
    path = tmp_path_factory.mktemp("tiny-token-prm")
    Qwen2ForTokenClassification(tiny_config(prm_tokenizer, num_labels=2)).save_pretrained(path)
    prm_tokenizer.save_pretrained(path)
    return path


@pytest.fixture(scope="module")
def remote_code_dir(tmp_path_factory, prm_tokenizer) -> Path:
    """A reward-head PRM as custom code beside its weights, as Qwen2.5-Math-PRM ships (`auto_map`)."""
    import importlib.util

    import torch

    path = tmp_path_factory.mktemp("tiny-qwen-prm")
    (path / "modeling_tiny_prm.py").write_text(REMOTE_CODE)
    spec = importlib.util.spec_from_file_location("modeling_tiny_prm", path / "modeling_tiny_prm.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    torch.manual_seed(2)
    module.TinyProcessRewardModel(tiny_config(prm_tokenizer, num_labels=2)).save_pretrained(path)
    config = json.loads((path / "config.json").read_text())
    config["architectures"] = ["Qwen2ForProcessRewardModel"]
    config["auto_map"] = {"AutoModel": "modeling_tiny_prm.TinyProcessRewardModel"}
    (path / "config.json").write_text(json.dumps(config))
    prm_tokenizer.save_pretrained(path)
    return path


@pytest.fixture(scope="module")
def causal_lm_dir(tmp_path_factory, prm_tokenizer) -> Path:
    import torch
    from transformers import Qwen2ForCausalLM

    torch.manual_seed(3)
    path = tmp_path_factory.mktemp("tiny-shepherd")
    Qwen2ForCausalLM(tiny_config(prm_tokenizer)).save_pretrained(path)
    prm_tokenizer.save_pretrained(path)
    return path


def reference_scores(path: Path, items: list[StepsInput], chat: bool, read) -> list[list[float]]:
    """The model card's reading: the whole conversation tokenized at once, the score at every separator."""
    from transformers import AutoModel, AutoModelForCausalLM, AutoModelForTokenClassification, AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(path)
    kind = {"softmax": AutoModelForTokenClassification, "remote": AutoModel, "pair": AutoModelForCausalLM}[read[0]]
    model = kind.from_pretrained(path, trust_remote_code=read[0] == "remote").eval()
    return [_reference(model, tokenizer, item, chat, read) for item in items]


def _reference(model, tokenizer, item: StepsInput, chat: bool, read) -> list[float]:
    import torch

    steps = SEP.join(item.steps) + SEP
    if chat:
        conversation = [
            {"role": "system", "content": SYSTEM},
            {"role": "user", "content": item.question},
            {"role": "assistant", "content": steps},
        ]
        ids = tokenizer.encode(tokenizer.apply_chat_template(conversation, tokenize=False), add_special_tokens=False)
    else:
        ids = [tokenizer.bos_token_id] + tokenizer.encode(f"{item.question}\n{steps}", add_special_tokens=False)
    with torch.no_grad():
        output = model(input_ids=torch.tensor([ids]))
    logits = (output.logits if hasattr(output, "logits") else output[0])[0]
    at = logits[torch.tensor(ids) == tokenizer.convert_tokens_to_ids(SEP)]
    if read[0] == "pair":
        good, bad = (tokenizer.encode(token, add_special_tokens=False)[0] for token in ("+", "-"))
        return at[:, [good, bad]].softmax(-1)[:, 0].tolist()
    return at.softmax(-1)[:, 1].tolist()


def scores_of(prm, items=ITEMS):
    return asyncio.run(prm.score(items))


@pytest.mark.parametrize("head", ["token-classification", "reward", "lm"])
def test_each_architecture_is_read_at_its_step_separators_as_its_model_card_reads_it(
    head, token_classification_dir, remote_code_dir, causal_lm_dir
):
    path, options, read, chat = {
        "token-classification": (token_classification_dir, {}, ("softmax",), False),
        "reward": (remote_code_dir, {"trust_remote_code": True}, ("remote",), True),
        "lm": (causal_lm_dir, {"step_token": SEP}, ("pair",), False),
    }[head]
    prm = load_prm(f"hf:{path}", **options)
    assert prm.head == head and prm.step_token == SEP  # the head from the architecture, <extra_0> from the vocabulary
    scores = scores_of(prm)
    for item, got, expected in zip(ITEMS, scores, reference_scores(path, ITEMS, chat, read)):
        assert len(got) == len(item.steps) and got == pytest.approx(expected, abs=1e-5)
        assert all(0.0 <= score <= 1.0 for score in got)
    one_at_a_time = [scores_of(prm, [item])[0] for item in ITEMS]  # batched rows are padded: same numbers
    assert scores == [pytest.approx(single, abs=1e-5) for single in one_at_a_time]


def test_custom_code_runs_only_when_asked_and_bad_options_are_one_line(remote_code_dir, token_classification_dir):
    with pytest.raises(UserError, match='"trust_remote_code": true'):
        load_prm(f"hf:{remote_code_dir}")
    with pytest.raises(UserError, match="good_token 'not one token at all'"):
        load_prm(f"hf:{token_classification_dir}", head="lm", good_token="not one token at all")
    with pytest.raises(UserError, match="positive_label 'happy'"):
        load_prm(f"hf:{token_classification_dir}", positive_label="happy")
    with pytest.raises(UserError, match="unknown process reward model"):
        load_prm("nope:x")
    with pytest.raises(UserError, match="not a transformers model directory"):
        load_prm(f"hf:{remote_code_dir / 'missing'}")


def test_a_trajectory_longer_than_the_model_is_a_failure_not_a_score(token_classification_dir):
    prm = HFProcessRewardModel(str(token_classification_dir), spec="hf:tiny", max_tokens=40)
    long = StepsInput("What is 6 times 7?", ["word " * 60])
    short, failed = scores_of(prm, [ITEMS[1], long])
    assert isinstance(failed, ScoreFailure) and "more than the PRM reads (40)" in failed
    assert not isinstance(short, ScoreFailure)


def test_aggregates():
    assert aggregate([0.9, 0.2, 0.6], "min") == 0.2
    assert aggregate([0.9, 0.2, 0.7], "mean") == pytest.approx(0.6)
    assert aggregate([0.9, 0.2, 0.6], "last") == 0.6


def test_steps_are_the_assistant_turns_with_the_outputs_they_led_to():
    messages = [
        {"role": "user", "content": "What is 6 times 7?"},
        assistant_message("Let me compute it.", [ToolCall("print(6 * 7)")]),
        tool_message("call_0", "42"),
        assistant_message("First part.\n\nSo the answer is \\boxed{42}."),
    ]
    assert trajectory_steps(messages, "codeblock") == [
        "Let me compute it.\n```python\nprint(6 * 7)\n```",
        "```output\n42\n```\nFirst part.\n\nSo the answer is \\boxed{42}.",
    ]
    assert trajectory_steps(messages, "codeblock", "paragraph")[1:] == [
        "```output\n42\n```\nFirst part.",
        "So the answer is \\boxed{42}.",
    ]
    hermes = trajectory_steps(messages, "hermes")
    assert hermes[0].startswith("Let me compute it.\n<tool_call>") and hermes[1].startswith("<tool_response>\n42")


def crafted_run(tmp_path: Path, count: int = 6) -> Path:
    rows = []
    for number in range(count):
        words = ["alpha", "bravo", "charlie", "delta", "echo", "foxtrot", "golf", "hotel"][number]
        text = "This step is wrong." if number % 2 else "This step is right."
        rows.append(
            trajectory(
                f"t{number}",
                problem_id=f"p{number}",
                question=f"Question {words}: how many {words}s fit in a box of size {number + 3}?",
                answer_text=f"{text} The answer is \\boxed{{129}}.",
            )
        )
    return write_run(tmp_path / "run", rows)


def test_curate_drops_exactly_the_rows_below_the_minimum_and_stores_the_scores(tmp_path, token_classification_dir):
    run = crafted_run(tmp_path)
    spec = f"hf:{token_classification_dir}"
    config = CurateConfig(scoring=ScoringConfig(prm=spec, score_cache=str(tmp_path / "cache")))
    scored_only = curate([run], tmp_path / "all.parquet", config)  # no minimum: scores stored, nothing dropped
    scores = pl.read_parquet(tmp_path / "all.parquet").select("problem_id", "prm_score", "prm_step_scores")
    assert scored_only.kept_rows == 6 and scores["prm_score"].null_count() == 0
    assert all(row["prm_score"] == min(row["prm_step_scores"]) for row in scores.to_dicts())
    minimum = sorted(scores["prm_score"])[3]
    below = set(scores.filter(pl.col("prm_score") < minimum)["problem_id"])
    config = CurateConfig(scoring=ScoringConfig(prm=spec, min_prm=minimum, score_cache=str(tmp_path / "cache")))
    result = curate([run], tmp_path / "sft.parquet", config, rejects=tmp_path / "rejects.parquet")
    rejects = pl.read_parquet(tmp_path / "rejects.parquet")
    assert result.counts == {"prm_low": 3} and set(rejects["problem_id"]) == below
    assert rejects["prm_score"].max() < minimum <= pl.read_parquet(tmp_path / "sft.parquet")["prm_score"].min()
    assert result.scoring["prm"] == {"scored": 0, "cached": 6, "retried": 0, "failed": 0, "failures": []}
    assert json.loads(result.report.read_text())["scoring"] == result.scoring


def test_a_rerun_reads_the_journal_and_never_runs_the_model(tmp_path, token_classification_dir, monkeypatch):
    run = crafted_run(tmp_path, 4)
    config = CurateConfig(scoring=ScoringConfig(prm=f"hf:{token_classification_dir}", score_cache=str(tmp_path / "c")))
    first = curate([run], tmp_path / "a.parquet", config)
    assert first.scoring["prm"]["scored"] == 4

    def no_model(self, encoded):
        raise AssertionError("the model ran although every row was in the journal")

    monkeypatch.setattr(HFProcessRewardModel, "_forward", no_model)
    again = curate([run], tmp_path / "b.parquet", config)
    assert again.scoring["prm"]["cached"] == 4
    assert (
        pl.read_parquet(tmp_path / "a.parquet")["prm_score"].to_list()
        == pl.read_parquet(tmp_path / "b.parquet")["prm_score"].to_list()
    )


# --------------------------------------------------------------------------- the pooling endpoint


def test_the_pooling_endpoint_scores_each_step_and_retries_what_fails(tmp_path):
    run = crafted_run(tmp_path)
    with PoolingServer(fail_first=[503, 429, 500]) as server:
        options = {"backoff_s": 0.01}
        scoring = ScoringConfig(
            prm=f"openai:{server.url}", min_prm=0.5, prm_options=options, score_cache=str(tmp_path / "c")
        )
        result = curate([run], tmp_path / "sft.parquet", CurateConfig(scoring=scoring), rejects=tmp_path / "r.parquet")
        assert server.requests[-1]["model"] == "tiny-prm"  # asked of /v1/models, as with vLLM
        assert server.requests[-1]["messages"][-1]["content"].endswith(SEP)
    kept = pl.read_parquet(tmp_path / "sft.parquet")
    assert result.counts == {"prm_low": 3}  # the three "wrong" final steps score 0.1
    assert kept["prm_step_scores"].to_list() == [[0.9, 0.9]] * 3 and kept["prm_score"].to_list() == [0.9] * 3
    assert pl.read_parquet(tmp_path / "r.parquet")["prm_score"].to_list() == [0.1] * 3
    assert result.scoring["prm"]["failed"] == 0


def test_a_reply_that_does_not_fit_the_steps_is_counted_apart_never_a_low_score(tmp_path):
    run = crafted_run(tmp_path)
    with PoolingServer(mismatch_word="bravo") as server:
        scoring = ScoringConfig(prm=f"openai:{server.url}", min_prm=0.5, score_retries=1, score_cache=str(tmp_path))
        result = curate([run], tmp_path / "sft.parquet", CurateConfig(scoring=scoring), rejects=tmp_path / "r.parquet")
    rejects = pl.read_parquet(tmp_path / "r.parquet")
    failed = rejects.filter(pl.col("drop_reason") == "prm_failed")
    assert result.counts == {"prm_low": 2, "prm_failed": 1} and failed["prm_score"].to_list() == [None]
    assert "1 scores for 2 steps" in failed["prm_error"][0]
    assert result.scoring["prm"]["failed"] == 1 and result.scoring["prm"]["retried"] == 1


def test_a_broken_endpoint_stops_the_run_with_its_error(tmp_path):
    run = crafted_run(tmp_path, 8)
    with PoolingServer(fail_first=[404] * 100) as server:
        scoring = ScoringConfig(prm=f"openai:{server.url}", score_retries=0, prm_options={"model": "tiny-prm"})
        with pytest.raises(ScorerBroken, match="HTTP 404"):
            curate([run], tmp_path / "sft.parquet", CurateConfig(scoring=scoring))


def test_the_step_scores_any_frame_that_holds_the_trajectories(tmp_path):
    with PoolingServer() as server:
        prm = load_prm(f"openai:{server.url}", model="tiny-prm")
        frame = pl.DataFrame(
            [
                {"question": "q1", "messages": [{"role": "assistant", "content": "fine"}], "format": "hermes"},
                {"question": "q2", "messages": [{"role": "assistant", "content": "wrong"}], "format": "hermes"},
            ]
        )
        step = PRMStep(prm, min_score=0.5, cache=str(tmp_path))
        assert step.reasons(step.annotate(frame)).to_list() == [None, "prm_low"]


def test_plugin_prms_go_through_the_registry(tmp_path):
    plugin = tmp_path / "myprm.py"
    plugin.write_text(
        textwrap.dedent(
            """
            from agentdata.judge.prm import ProcessRewardModel

            class Constant(ProcessRewardModel):
                def __init__(self, target, *, spec, value=0.5, batch_size=8):
                    self.spec, self.value = spec, float(value)

                async def score(self, inputs):
                    return [[self.value] * len(item.steps) for item in inputs]
            """
        )
    )
    prm = load_prm(f"{plugin}:Constant", value=0.25)
    assert scores_of(prm, ITEMS[:1]) == [[0.25, 0.25]]
    (tmp_path / "notaprm.py").write_text("def factory(target, *, spec, **options):\n    return 1\n")
    with pytest.raises(UserError, match="built int, not a ProcessRewardModel"):
        load_prm(f"{tmp_path / 'notaprm.py'}:factory")
