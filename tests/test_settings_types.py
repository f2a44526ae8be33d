"""Every settings field of every command, given a value of each JSON type it cannot take, is refused as the
user's mistake (a UserError naming the field and the file), never a TypeError deep inside the work: built
through each command's own settings path, as its --config file would be. TRL pass-through fields of
train's sections are checked against TRL's own types. A few cases go through the console script to show
the one line and exit code 2."""

from __future__ import annotations

import contextlib
import io
import json
import typing

import pytest

from agentdata.errors import UserError
from agentdata.settings import Band, CountBand, value_type
from tests.cli_helpers import run_cli
from tests.test_settings import COMMANDS, section_fields

JSON_VALUES = {
    "string": "abc",
    "integer": 7,
    "float": 2.5,
    "boolean": True,
    "list": [1],
    "object": {"a": 1},
    "null": None,
}
# What a value of each base type can never be (whatever its range or choices).
NEVER = {
    int: {"string", "boolean", "list", "object", "float"},
    float: {"string", "boolean", "list", "object"},
    str: {"boolean", "list", "object"},
    bool: {"string", "integer", "float", "list", "object"},
    list: {"integer", "float", "boolean", "object"},
    tuple: {"integer", "float", "boolean", "object"},
    dict: {"string", "integer", "float", "boolean", "list"},
    Band: {"string", "integer", "float", "boolean", "object"},
    CountBand: {"string", "integer", "float", "boolean", "object"},
}


def wrong_kinds(annotation: typing.Any) -> set[str]:
    kind, optional = value_type(annotation)
    never = set(NEVER.get(typing.get_origin(kind) or kind, ()))
    return never if optional else never | {"null"}


def cases():
    """(command, its callback, section, field name) of every field once: a field several commands share
    (the agent loop's) is built through the first command that has it."""
    seen = set()
    for path, callback in COMMANDS:
        for section, name, item in section_fields(callback):
            if id(item) not in seen:
                seen.add(id(item))
                yield " ".join(path), callback, section, name


CASES = list(cases())


@pytest.mark.parametrize(
    ("command", "callback", "section", "name"), CASES, ids=[f"{c[0]}-{c[2]}.{c[3]}" for c in CASES]
)
def test_a_setting_of_a_wrong_json_type_is_refused_naming_it(command, callback, section, name):
    sections = callback.sections
    kinds = wrong_kinds(sections.sections[section].fields[name][1])
    for kind in sorted(kinds):
        written = {name: JSON_VALUES[kind]} if sections.single else {section: {name: JSON_VALUES[kind]}}
        layer, _ = sections.layer(written, "c.json")
        with pytest.raises(UserError) as caught:
            sections.build([layer])
        message = str(caught.value)
        assert "c.json" in message and name in message and "\n" not in message, (kind, message)


def test_the_cases_reach_every_command_and_type():
    assert {case[0] for case in CASES} >= {"collect", "curate", "filter", "train", "eval", "synth problems"}
    kinds = [
        kind
        for _, callback, section, name in CASES
        for kind in wrong_kinds(callback.sections.sections[section].fields[name][1])
    ]
    assert len(CASES) > 140 and len(kinds) > 500 and set(kinds) == set(JSON_VALUES)


@pytest.mark.parametrize(
    ("section", "name", "value", "says"),
    [
        ("rl", "max_grad_norm", "big", "max_grad_norm big: expected a number (TRL's GRPOConfig)"),
        ("sft", "max_grad_norm", [1], "max_grad_norm [1]: expected a number (TRL's SFTConfig)"),
        ("sft", "lr_scheduler_type", 5, "lr_scheduler_type 5: expected one of 'linear'"),
        ("rl", "num_iterations", 1.5, "num_iterations 1.5: expected a whole number"),
        ("rl", "report_to", {"a": 1}, "report_to"),
    ],
)
def test_trl_pass_through_fields_are_checked_against_trls_types(section, name, value, says):
    callback = dict(COMMANDS)[("train",)]
    layer, _ = callback.sections.layer({section: {name: value}}, "t.yaml")
    with pytest.raises(UserError, match="t.yaml " + section) as caught:
        callback.sections.build([layer])
    assert says in str(caught.value)
    layer, _ = callback.sections.layer({section: {name: 0.5 if name == "max_grad_norm" else None}}, "t.yaml")
    if name == "max_grad_norm":
        assert callback.sections.build([layer])[section].trl == {"max_grad_norm": 0.5}  # a right one passes


@pytest.mark.parametrize(
    ("args", "text", "says"),
    [
        (["collect"], "temperature: {a: 1}\n", 'temperature {"a": 1}: expected a number'),
        (["collect"], "engine_options: [1, 2]\n", "engine_options [1, 2]: expected a mapping"),
        (["collect"], "engine_options: abc\n", "engine_options abc: expected a mapping"),
        (["filter"], "domain_mix: {math: high}\n", "domain_mix.math high: expected a number"),
        (["train"], "rl:\n  max_grad_norm: big\n", "rl: max_grad_norm big: expected a number"),
        (["synth", "problems"], "kinds: {math: 1}\n", "kinds"),
    ],
)
def test_the_console_script_says_it_in_one_line_before_any_work(args, text, says, tmp_path):
    config = tmp_path / "c.yaml"
    config.write_text(text)
    err = io.StringIO()
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(err):
        code = run_cli([*args, "--config", str(config), "--out", str(tmp_path / "out")])
    lines = [line for line in err.getvalue().splitlines() if line.strip()]
    assert code == 2 and len(lines) == 1 and says in lines[0] and "unexpected" not in lines[0], lines
    assert not (tmp_path / "out").exists()


def test_a_mapping_setting_takes_its_values_typed():
    callback = dict(COMMANDS)[("filter",)]
    layer, _ = callback.sections.layer({"domain_mix": {"math": 1, "code": "0.5"}}, "c.json")
    built = callback.sections.build([layer])
    assert built["pool"].domain_mix == {"math": 1.0, "code": 0.5}
    assert json.dumps(built["pool"].domain_mix)


NUMBER_CASES = [
    case
    for case in CASES
    if value_type(case[1].sections.sections[case[2]].fields[case[3]][1])[0] in (int, float, Band, CountBand)
]


@pytest.mark.parametrize(
    ("command", "callback", "section", "name"), NUMBER_CASES, ids=[f"{c[0]}-{c[2]}.{c[3]}" for c in NUMBER_CASES]
)
def test_a_whole_number_no_float_holds_is_refused_naming_it(command, callback, section, name):
    """10**400 is checked against the range as the int it is (float(10**400) is an OverflowError), and a whole
    number past int64 is too large wherever the range would let it in."""
    sections = callback.sections
    kind, _ = value_type(sections.sections[section].fields[name][1])
    for huge in (10**400, -(10**400), "9" * 5000):
        value = [huge, 1] if kind in (Band, CountBand) else huge
        written = {name: value} if sections.single else {section: {name: value}}
        layer, _ = sections.layer(written, "c.json")
        with pytest.raises(UserError) as caught:
            sections.build([layer])
        assert name in str(caught.value) and "\n" not in str(caught.value)


def test_the_number_cases_reach_the_commands():
    assert {case[0] for case in NUMBER_CASES} >= {"collect", "curate", "filter", "train", "eval", "view", "regrade"}


@pytest.mark.parametrize(
    "args",
    [
        ["train", f"rl.max_steps={10**400}"],
        ["train", f"rl.learning_rate={10**400}"],
        ["collect", f"max_turns={'9' * 5000}"],
        ["curate", "runs/x", f"max_per_problem={10**400}"],
    ],
)
def test_a_huge_override_is_one_line_and_writes_nothing(args, tmp_path):
    err = io.StringIO()
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(err):
        code = run_cli([*args, "--out", str(tmp_path / "out")])
    lines = [line for line in err.getvalue().splitlines() if line.strip()]
    assert code == 2 and len(lines) == 1 and "unexpected" not in lines[0], lines
    assert "too large" in lines[0] or "must be" in lines[0]
    assert not (tmp_path / "out").exists()
