"""Settings: one LoopConfig composed everywhere, flags generated from the fields, files, ranges, --json, events."""

from __future__ import annotations

import dataclasses
import json
import math
from pathlib import Path

import pytest
import typer
from typer.testing import CliRunner

from agentdata.agent.config import CollectConfig, LoopConfig
from agentdata.cli.app import app
from agentdata.cli.options import parse_key_values, settings_command
from agentdata.cli.settings_docs import DOCUMENTED, settings_markdown
from agentdata.curate.config import CurateConfig
from agentdata.errors import UserError
from agentdata.evaluation.config import EvalConfig
from agentdata.events import listening
from agentdata.filter.config import PoolConfig
from agentdata.records import Problem
from agentdata.rl.config import GRPOStageConfig
from agentdata.settings import Range, SettingError, build, flatten, leaf_fields
from agentdata.steps.config import DedupConfig
from tests.cli_helpers import run_cli
from tests.curate_fixtures import trajectory, write_run
from tests.fakes import InProcessSandbox, ScriptedEngine

REPO = Path(__file__).resolve().parents[1]
# Positional arguments a command needs before its settings are read (none of them is opened before).
REQUIRED_ARGS = {
    ("eval",): ["smollm2", "bench.jsonl"],
    ("curate",): ["run_dir"],
    ("regrade",): ["run_dir"],
    ("validate",): ["problems.jsonl"],
    ("synth", "stitch"): ["s.jsonl"],
    ("sandbox", "run"): ["-c", "print(1)"],
    ("import", "atif"): ["traces"],
    ("import", "inspect"): ["logs"],
    ("import", "sts"): ["sessions"],
}


def settings_commands(typer_app: typer.Typer = app, prefix: tuple[str, ...] = ()):
    """(command path, the function behind it) of every command with generated settings options."""
    for info in typer_app.registered_commands:
        if hasattr(info.callback, "generated_options"):
            yield (*prefix, info.name), info.callback
    for group in typer_app.registered_groups:
        yield from settings_commands(group.typer_instance, (*prefix, group.name))


COMMANDS = list(settings_commands())


def section_fields(callback):
    """(section, setting name, field) of every field of the command's settings path."""
    for section in callback.sections.sections.values():
        for name, (item, _) in section.fields.items():
            yield section.name, name, item


def click_options(path: tuple[str, ...], listed: bool = False) -> set[str]:
    """The command's options; `listed`: only those --help lists (not the hidden old spellings)."""
    command = typer.main.get_command(app)
    for name in path:
        command = command.commands[name]
    params = [param for param in command.params if not (listed and getattr(param, "hidden", False))]
    return {opt for param in params for opt in [*param.opts, *param.secondary_opts]}


def test_every_command_that_prints_a_summary_has_config_and_json():
    names = {path for path, _ in COMMANDS}
    assert {
        ("collect",),
        ("curate",),
        ("filter",),
        ("eval",),
        ("inspect",),
        ("regrade",),
        ("validate",),
        ("synth", "problems"),
        ("synth", "stitch"),
        ("sandbox", "run"),
    } <= names
    for path, _ in COMMANDS:
        assert {"--config", "--json"} <= click_options(path), path
    assert "--json" in click_options(("train",))


@pytest.mark.parametrize("path,callback", COMMANDS, ids=lambda v: " ".join(v) if isinstance(v, tuple) else "")
def test_every_field_is_a_flag_or_an_override(path, callback):
    """A field added to a settings dataclass is a setting of each command using it, with no other change: a flag
    where one flag means it (a name one section has, or one every section has alike), else an override."""
    from agentdata.cli.overrides import known_keys

    setting = {(section, o.name): o for o in callback.generated_options if not o.hidden for section in o.targets}
    options, keys = click_options(path), known_keys(callback.sections)
    for section, name, item in section_fields(callback):
        if item.metadata.get("cli") is False or (path, name) in ((("eval",), "max_tool_calls"), (("train",), "out")):
            continue
        key = name if callback.sections.single else f"{section}.{name}"
        assert (section, name) in setting or key in keys, f"{' '.join(path)}: no flag or override for {key}"
        if (section, name) in setting:
            assert setting[section, name].flag in options


def documented_fields():
    for config_type, _ in DOCUMENTED:
        for item in dataclasses.fields(config_type):
            yield config_type, item


@pytest.mark.parametrize(
    "config_type,item", list(documented_fields()), ids=lambda v: v.__name__ if isinstance(v, type) else v.name
)
def test_every_setting_has_help_and_every_number_a_range(config_type, item):
    assert item.metadata.get("help"), f"{config_type.__name__}.{item.name} has no help"
    annotation = [a for p, i, a in leaf_fields(config_type) if i is item]
    if not annotation:  # a composed settings dataclass
        return
    text = str(annotation[0])
    if any(kind in text for kind in ("int", "float")) and "bool" not in text:
        assert item.metadata.get("range"), (
            f"{config_type.__name__}.{item.name}: add metadata range "
            "(an interval such as [1, inf)) — see agentdata/settings.py"
        )
        Range.parse(item.metadata["range"])


def test_docs_settings_table_is_up_to_date():
    assert (REPO / "docs" / "settings.md").read_text(encoding="utf-8") == settings_markdown(), (
        "regenerate: python -m agentdata.cli.settings_docs > docs/settings.md"
    )


# ------------------------------------------------------------------ one LoopConfig, composed
def test_loop_config_is_composed_with_one_set_of_defaults():
    loop_fields = {f.name for f in dataclasses.fields(LoopConfig)}
    for config_type in (CollectConfig, EvalConfig, GRPOStageConfig):
        own = {f.name for f in dataclasses.fields(config_type)}
        assert not own & loop_fields, f"{config_type.__name__} copies loop fields {own & loop_fields}"
        assert {f.name: f.type for f in dataclasses.fields(config_type)}["loop"] in (LoopConfig, "LoopConfig")
    grpo = GRPOStageConfig().for_run().loop  # as it runs: the start model's protocol, else codeblock (for_model)
    assert dataclasses.replace(grpo, temperature=LoopConfig().temperature) == LoopConfig().for_model(None)  # only T


# near_dup_ngram= and decontam_ngram= are overrides, and in filter near_dup_threshold= too
DEDUP_FLAGS = {"curate": {"--near-dup-threshold", "--decontam"}, "filter": {"--decontam"}}


@pytest.mark.parametrize("config_type,command", [(CurateConfig, "curate"), (PoolConfig, "filter")])
def test_dedup_settings_are_composed_once_and_keep_their_flat_flags_and_keys(config_type, command):
    dedup_fields = {f.name for f in dataclasses.fields(DedupConfig)}
    own = {f.name for f in dataclasses.fields(config_type)}
    assert not own & dedup_fields, f"{config_type.__name__} copies dedup fields {own & dedup_fields}"
    assert DEDUP_FLAGS[command] <= click_options((command,), listed=True)
    config = build(config_type, {"near_dup_threshold": 0, "decontam_files": ["bench.jsonl"]})
    assert config.dedup == DedupConfig(near_dup_threshold=None, decontam_files=["bench.jsonl"])
    assert {"near_dup_threshold": None, "decontam_ngram": 13}.items() <= flatten(config).items()  # records stay flat


def test_build_routes_flat_names_and_records_them_flat():
    config = build(CollectConfig, {"model": "x", "max_turns": 3, "loop": {"top_p": 0.5}})
    assert config.loop.max_turns == 3 and config.loop.top_p == 0.5
    flat = flatten(config)
    assert flat["max_turns"] == 3 and "loop" not in flat and flat["model"] == "x"
    with pytest.raises(UserError, match="unknown setting"):
        build(CollectConfig, {"max_turn": 3})
    grpo = build(GRPOStageConfig, {"max_turns": 2})
    assert grpo.loop.temperature == 1.0 and grpo.loop.max_turns == 2  # the stage's own loop default is kept


# ------------------------------------------------------------------ ranges: generated bad values
def bad_values(option) -> list[str]:
    """Values just outside the option's documented range, plus NaN and infinity for real numbers."""
    bounds = Range.parse(option.help.split("Range ")[1].rstrip("."))
    is_float = "float" in str(option.field_type)
    step = 0.5 if is_float else 1
    values = []
    if math.isfinite(bounds.low):
        values.append(bounds.low if bounds.low_open else bounds.low - step)
    if math.isfinite(bounds.high):
        values.append(bounds.high if bounds.high_open else bounds.high + step)
    text = [str(int(v)) if not is_float else str(v) for v in values] + (["nan", "inf"] if is_float else [])
    if option.kind == "parsed" and "dict" in str(option.field_type):  # a mapping's values: --domain-mix math=-0.5
        return [f"math={value}" for value in text]
    return text


def range_cases():
    for path, callback in COMMANDS:
        for option in callback.generated_options:
            if "Range " in option.help and not option.hidden:  # an old spelling says so first (its own test)
                for value in bad_values(option):
                    yield path, option.flag, value


@pytest.mark.parametrize(
    "path,flag,value", list(range_cases()), ids=lambda v: " ".join(v) if isinstance(v, tuple) else str(v)
)
def test_out_of_range_values_are_refused_in_one_line_naming_the_flag(path, flag, value, tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    code = run_cli([*path, *REQUIRED_ARGS.get(path, []), flag, value])
    err = capsys.readouterr().err.strip()
    assert code == 2, err
    assert err.startswith((f"error: {flag} ", f"error: {flag}:")) and "\n" not in err and "Traceback" not in err


def test_settings_refuse_nan_in_the_library_too():
    with pytest.raises(SettingError, match="top_p nan: not a number"):
        LoopConfig(top_p=math.nan)
    with pytest.raises(ValueError):
        LoopConfig(temperature=math.inf)


# ------------------------------------------------------------------ files and flags
probe = typer.Typer()


@probe.command()
@settings_command(defaults={"samples": 3})
def show(*, config: CollectConfig, as_json: bool = False) -> None:
    print(json.dumps(flatten(config)))


def run_probe(args):
    result = CliRunner().invoke(probe, args)
    return result.exit_code, result.output


def test_flags_override_the_file_which_overrides_the_defaults(tmp_path):
    path = tmp_path / "collect.yaml"
    path.write_text("max_turns: 3\ntemperature: 0.5\nloop:\n  top_p: 0.9\nmodel: hf:/m\n")
    code, output = run_probe(["--config", str(path), "--temperature", "0.2"])
    assert code == 0, output
    settings = json.loads(output)
    assert (settings["max_turns"], settings["temperature"], settings["top_p"], settings["model"]) == (
        3,
        0.2,
        0.9,
        "hf:/m",
    )
    assert settings["samples"] == 3 and settings["max_new_tokens"] == LoopConfig().max_new_tokens


def test_json_config_files_and_their_mistakes(tmp_path):
    good = tmp_path / "c.json"
    good.write_text(json.dumps({"samples": 5, "engine_options": {"dtype": "float32"}}))
    code, output = run_probe(["--config", str(good)])
    assert code == 0 and json.loads(output)["samples"] == 5
    for text, message in [
        ("max_turn: 3\n", "unknown setting 'max_turn'; did you mean max_turns?"),
        ("top_p: 2\n", "top_p 2: must be in (0, 1]"),
        ("max_turns: [1\n", "not valid YAML"),
        ("- 1\n", "expected a mapping"),
    ]:
        bad = tmp_path / "bad.yaml"
        bad.write_text(text)
        code, output = run_probe(["--config", str(bad)])
        assert code == 2 and message in output, output


def test_synth_problems_reads_a_config_file_and_prints_json(tmp_path, capsys):
    config = tmp_path / "problems.yaml"
    config.write_text("n: 3\nkinds: [arithmetic]\nseed: 4\n")
    out = tmp_path / "p.jsonl"
    assert run_cli(["synth", "problems", "--config", str(config), "--out", str(out), "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["problems"] == 3 and list(data["counts"]) == ["arithmetic"]
    assert run_cli(["synth", "problems", "--config", str(config), "--n", "5", "--out", str(out), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["problems"] == 5 and len(out.read_text().splitlines()) == 5


def test_curate_and_inspect_print_json(tmp_path, capsys):
    run = write_run(tmp_path / "run", [trajectory("a"), trajectory("b", problem_id="p2", question="Other?")])
    assert run_cli(["curate", str(run), "--out", str(tmp_path / "sft.parquet"), "--json"]) == 0
    curated = json.loads(capsys.readouterr().out)
    assert curated["input_rows"] == 2 and curated["kept_rows"] + sum(curated["dropped"].values()) == 2
    assert run_cli(["inspect", str(run), "--json"]) == 0
    inspected = json.loads(capsys.readouterr().out)
    assert inspected["trajectories"] == 2 and inspected["accuracy"] == 1.0


def test_collect_prints_json_and_records_the_effective_settings(tmp_path, monkeypatch, capsys):
    import agentdata.engines
    import agentdata.sandbox

    monkeypatch.setattr(agentdata.engines, "load_engine", lambda spec, **options: ScriptedEngine(spec))
    monkeypatch.setattr(agentdata.sandbox, "open_sandbox", lambda spec, **options: InProcessSandbox())
    config = tmp_path / "c.yaml"
    config.write_text("max_turns: 5\nlimit: 2\n")
    out = tmp_path / "run"
    assert run_cli(["collect", "--out", str(out), "--config", str(config), "top_p=0.9", "--json"]) == 0
    captured = capsys.readouterr()
    summary = json.loads(captured.out)
    assert summary["total"] == 2 and summary["finish_reasons"] == {"answer": 2}
    settings = json.loads((out / "manifest.json").read_text())["settings"]
    assert (settings["max_turns"], settings["top_p"], settings["limit"]) == (5, 0.9, 2)


# ------------------------------------------------------------------ engine options
@pytest.mark.parametrize(
    "pair,expected",
    [
        ('extra_body={"a": 1}', {"extra_body": {"a": 1}}),
        ("n=2", {"n": 2}),
        ("tensor-parallel-size=2", {"tensor_parallel_size": 2}),  # a flag's spelling is the option's name
        ("x=True", {"x": True}),
        ("dtype=bfloat16", {"dtype": "bfloat16"}),
        ('stop=["a"]', {"stop": ["a"]}),
        ("t=0.5", {"t": 0.5}),
    ],
)
def test_engine_options_take_json_values(pair, expected):
    assert parse_key_values([pair]) == expected


@pytest.mark.parametrize("pair,message", [("extra_body={a", "not valid JSON"), ("novalue", "expected KEY=VALUE")])
def test_bad_engine_options_are_one_line(pair, message):
    with pytest.raises(UserError, match=message):
        parse_key_values([pair])


def test_bad_engine_option_values_are_user_errors(tmp_path):
    from agentdata.engines.hf_model import torch_dtype
    from agentdata.engines.openai_compat import OpenAIEngine

    with pytest.raises(UserError, match="not a torch dtype"):
        torch_dtype("notatype")
    with pytest.raises(UserError, match="must be a JSON object"):
        OpenAIEngine("http://127.0.0.1:9/v1", extra_body="notjson")


# ------------------------------------------------------------------ presentation stays in cli/
def test_a_library_collect_draws_nothing_and_reports_events(tmp_path, capfd):
    from agentdata.agent.runner import collect

    events = []
    problems = [Problem(f"What is 6 times 7? ({i})", "42") for i in range(3)]
    with listening(events.append):
        collect(
            problems,
            tmp_path / "run",
            CollectConfig(model="scripted", concurrency=2),
            engine=ScriptedEngine(),
            sandbox=InProcessSandbox(),
        )
    collect(
        problems,
        tmp_path / "run2",
        CollectConfig(model="scripted"),
        engine=ScriptedEngine(),
        sandbox=InProcessSandbox(),
    )
    captured = capfd.readouterr()
    assert captured.out == "" and captured.err == ""
    kinds = [event.kind for event in events]
    assert kinds[0] == "start" and kinds[-1] == "end" and kinds.count("advance") == 3
    assert events[-2].stats["accuracy"] == 1.0


def test_only_cli_imports_rich():
    offenders = [
        str(path.relative_to(REPO))
        for path in (REPO / "agentdata").rglob("*.py")
        if "cli" not in path.parts and ("import rich" in path.read_text() or "from rich" in path.read_text())
    ]
    assert offenders == []


@pytest.mark.parametrize("path", [path for path, _ in COMMANDS], ids=" ".join)
def test_every_settings_command_takes_key_value_overrides(path):
    """One key space: every command with settings takes `KEY=VALUE` (import took --config only)."""
    from agentdata.cli.options import SettingsCommand

    command = typer.main.get_command(app)
    for name in path:
        command = command.commands[name]
    assert isinstance(command, SettingsCommand)


def test_the_docs_show_every_command_in_the_one_key_space():
    text = (REPO / "docs" / "settings.md").read_text(encoding="utf-8")
    key_space = text.split("## One key space", 1)[1].split("\n## ", 1)[0]
    for path, _ in COMMANDS:
        assert f"| `agentdata {' '.join(path)}` |" in key_space
    assert "`rl.NAME` | `agentdata train rl.NAME=...`" in key_space and "| `agentdata experiment` |" in key_space
