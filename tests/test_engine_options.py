"""Engine options of the wrong type are one line naming the option, before the engine is built: every
option a built-in engine's constructor declares, given a value of each wrong JSON type."""

from __future__ import annotations

import contextlib
import io
import json
import typing

import pytest

from agentdata.engines import load_engine
from agentdata.engines.hf import HFEngine
from agentdata.engines.openai_compat import OpenAIEngine
from agentdata.errors import UserError
from tests.cli_helpers import run_cli

JSON_VALUES = {"text": "abc", "whole number": 7, "number": 2.5, "boolean": True, "list": [1], "object": {"a": 1}}
ACCEPTS = {
    str: {"text"},
    int: {"whole number"},
    float: {"whole number", "number"},
    bool: {"boolean"},
    dict: {"object"},
    list: {"list"},
}


def declared(engine_class: type) -> dict[str, set[str]]:
    """option -> the JSON kinds its annotation accepts (options of types the table does not know are skipped)."""
    hints = typing.get_type_hints(engine_class.__init__)
    options = {}
    for name, hint in hints.items():
        arms = [arm for arm in typing.get_args(hint) or (hint,) if arm is not type(None)]
        kinds = set().union(*(ACCEPTS.get(typing.get_origin(arm) or arm, set()) for arm in arms))
        if kinds and name not in ("return", "spec", "urls", "model_dir"):
            options[name] = kinds
    return options


CASES = [
    (spec, name, kind)
    for spec, engine in (("openai:http://127.0.0.1:9/v1", OpenAIEngine), ("smollm2", HFEngine))
    for name, accepted in declared(engine).items()
    for kind in JSON_VALUES
    if kind not in accepted
]


@pytest.mark.parametrize(("spec", "name", "kind"), CASES, ids=[f"{c[0][:6]}-{c[1]}-{c[2]}" for c in CASES])
def test_an_engine_option_of_the_wrong_type_is_named_before_the_engine_is_built(spec, name, kind):
    with pytest.raises(UserError, match=f"option {name}=.*: expected"):
        load_engine(spec, **{name: JSON_VALUES[kind]})


def test_the_command_line_names_the_option(tmp_path):
    problems = tmp_path / "p.jsonl"
    problems.write_text(json.dumps({"question": "q?", "answer": "1"}) + "\n")
    err = io.StringIO()
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(err):
        code = run_cli(["collect", str(problems), "--out", str(tmp_path / "r"), "--teacher", "openai:http://127.0.0.1:9/v1",
                        "--engine-option", "timeout_s=abc"])  # fmt: skip
    assert code == 2 and "option timeout_s='abc': expected a number" in err.getvalue(), err.getvalue()
    assert not (tmp_path / "r").exists()  # refused before the run dir is written


@pytest.mark.parametrize(
    ("teacher", "says"),
    [("hf:{tmp}/no-model", "not a transformers model directory"), ("openai:localhost:8000", "not an http(s) URL")],
)
def test_a_target_that_cannot_be_a_model_is_refused_before_the_run_dir(teacher, says, tmp_path):
    problems = tmp_path / "p.jsonl"
    problems.write_text(json.dumps({"question": "q?", "answer": "1"}) + "\n")
    err = io.StringIO()
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(err):
        code = run_cli(
            ["collect", str(problems), "--out", str(tmp_path / "r"), "--teacher", teacher.format(tmp=tmp_path)]
        )
    assert code == 2 and says in err.getvalue(), err.getvalue()
    assert not (tmp_path / "r").exists()
