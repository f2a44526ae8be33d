"""`ModelSpec`: an engine spec read once, and every question about it answered the same way everywhere
(training's weights dir, a fingerprint's dir, GRPO's profile spec, eval's label, a dry run's inputs)."""

from __future__ import annotations

import pytest

from agentdata.engines.fingerprint import local_model_dir, model_fingerprint
from agentdata.engines.spec import ModelSpec
from agentdata.errors import UserError
from agentdata.evaluation.runner import default_label
from agentdata.experiment.dry_run import spec_path
from agentdata.train.closed_loop import profile_spec
from agentdata.training.model import resolve_model_dir


@pytest.fixture
def model_dir(tmp_path):
    folder = tmp_path / "ckpt"
    folder.mkdir()
    (folder / "config.json").write_text("{}")
    return folder


@pytest.mark.parametrize(
    "text, kind, target, shows_examples, served",
    [
        ("hf:/models/x", "hf", "/models/x", False, False),
        ("auto:/models/x", "auto", "/models/x", False, False),
        ("tir:hf:/models/x", "tir", "hf:/models/x", True, False),
        ("smollm2-tir", "smollm2-tir", "", True, False),
        ("smollm2", "smollm2", "", False, False),
        ("openai:http://127.0.0.1:8000/v1", "openai", "http://127.0.0.1:8000/v1", False, True),
        ("plugins/engine.py:Factory:/models/x", "plugins/engine.py:Factory", "/models/x", False, False),
    ],
)
def test_a_spec_is_read_into_its_kind_and_target_and_keeps_its_text(text, kind, target, shows_examples, served):
    spec = ModelSpec.parse(text)
    assert (spec.kind, spec.target, spec.shows_examples, spec.served) == (kind, target, shows_examples, served)
    assert str(spec) == text and ModelSpec.parse(spec) is spec  # the text is what manifests record


def test_every_local_kind_names_its_dir_for_training_fingerprints_and_profiles(model_dir):
    for kind in ("hf", "vllm", "auto"):  # `auto:DIR` was "not a transformers model dir" to training
        assert resolve_model_dir(f"{kind}:{model_dir}") == model_dir
        assert local_model_dir(f"{kind}:{model_dir}") == model_dir
    assert model_fingerprint(f"auto:{model_dir}") == model_fingerprint(f"hf:{model_dir}") is not None
    assert profile_spec(f"auto:{model_dir}") == f"hf:{model_dir}"  # GRPO loads exactly these weights
    assert profile_spec(f"hf:{model_dir}") == f"hf:{model_dir}"
    # profiled on GRPO's vLLM server: the same weights under the engine they ran on, a cache of their own
    assert profile_spec(f"auto:{model_dir}", on_vllm=True) == profile_spec(f"hf:{model_dir}", on_vllm=True)
    assert profile_spec(f"hf:{model_dir}", on_vllm=True) == f"vllm:{model_dir}"
    assert model_fingerprint(f"vllm:{model_dir}") == model_fingerprint(f"hf:{model_dir}")
    assert profile_spec("smollm2-tir", on_vllm=True) == "tir:vllm:smollm2"
    with pytest.raises(UserError, match="a served model has no weights here"):
        resolve_model_dir("openai:http://127.0.0.1:8000/v1")
    with pytest.raises(UserError, match="--tokenizer tir:hf:"):
        resolve_model_dir(f"tir:hf:{model_dir}", flag="--tokenizer")


def test_labels_and_dry_run_inputs_read_the_same_spec():
    assert default_label("tir:hf:/ckpts/sft/") == "sft"
    assert default_label("plugins/engine.py:Factory") == "Factory"  # never a label holding a slash
    assert spec_path("tir:vllm:./ckpt") == "./ckpt" and spec_path("hf:models/sft") == "models/sft"
    assert spec_path("openai:http://127.0.0.1:8000/v1") is None and spec_path("smollm2-tir") is None
    assert spec_path("./engine.py:Factory") is None  # a plug-in file is no model dir
