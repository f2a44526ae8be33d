"""Registries by name with dotted-path plug-ins: engines, protocols, rewards (tools and filter steps
are tested with their stages)."""

from __future__ import annotations

import sys

import pytest

from agentdata.engines import load_engine
from agentdata.engines.spec import ENGINES, parse_spec
from agentdata.errors import UserError
from agentdata.formats import PROTOCOL_REGISTRY, get_protocol
from agentdata.registry import Registry, is_plugin_path, load_object

ECHO_ENGINE = '''
from agentdata.engines.base import Engine, Generation


class EchoEngine(Engine):
    """Answers every request with its target, boxed."""

    def __init__(self, target, *, spec, answer="7"):
        self.spec, self.target, self.answer = spec, target, answer

    async def generate(self, request):
        return Generation(f"{self.target}: \\\\boxed{{{self.answer}}}", None, "stop", 1, 1)
'''


def test_unknown_names_list_the_known_ones():
    registry: Registry[int] = Registry("widget")
    registry.register("one", 1)
    registry.register("two")(2)
    assert registry.get("two") == 2 and registry.names() == ("one", "two")
    with pytest.raises(UserError, match=r"unknown widget 'three': use one of one, two or a plug-in"):
        registry.get("three")


def test_a_registry_also_has_its_parents_entries_under_its_own():
    shared: Registry[int] = Registry("widget")
    shared.register("one", 1)
    shared.register("two", 2)
    stage: Registry[int] = Registry("widget", parent=shared)
    stage.register("two", 22)
    stage.register("three", 3)
    assert [stage.get(name) for name in ("one", "two", "three")] == [1, 22, 3] and shared.get("two") == 2
    assert stage.names() == ("two", "three", "one") and "one" in stage and "three" not in shared
    assert stage.get("os.path:join") is __import__("os").path.join  # plug-ins as before


def test_a_retired_name_is_one_line_naming_the_new_one():
    registry: Registry[int] = Registry("widget")
    registry.register("no_rollouts", 1)
    registry.retire("not_profiled", "no_rollouts")
    with pytest.raises(UserError, match="widget 'not_profiled' is now 'no_rollouts'"):
        registry.get("not_profiled")
    assert registry.names() == ("no_rollouts",) and "not_profiled" not in registry


def test_the_pool_steps_of_0_3_name_their_new_names():
    from agentdata.filter.config import PoolConfig
    from agentdata.filter.steps import POOL_STEPS
    from agentdata.steps import build_step

    for old, new in (("not_profiled", "no_rollouts"), ("unprofiled", "too_many_errors")):
        with pytest.raises(UserError, match=f"'{old}' is now '{new}'"):
            build_step(old, PoolConfig(), POOL_STEPS)


def test_a_lazy_entry_is_imported_on_first_use():
    registry: Registry[object] = Registry("thing")
    registry.register("loads", "json:loads")
    import json

    assert registry.get("loads") is json.loads


@pytest.mark.parametrize(
    "name, expected",
    [
        ("mypkg.rewards:brevity", True),
        ("plugins/my.py:brevity", True),
        ("my.py:brevity", True),
        ("hf:/models/qwen", False),
        ("openai:http://host:8000/v1", False),
        ("smollm2", False),
        ("mod:", False),
    ],
)
def test_what_counts_as_a_plugin_path(name, expected):
    assert is_plugin_path(name) is expected


def test_plugins_load_from_a_module_or_a_file(tmp_path, monkeypatch):
    (tmp_path / "my_plugins.py").write_text("VALUE = 41\nclass Box:\n    VALUE = 42\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    assert load_object("my_plugins:VALUE") == 41
    assert load_object(f"{tmp_path / 'my_plugins.py'}:Box.VALUE") == 42
    assert load_object(f"{tmp_path / 'my_plugins.py'}:Box") is load_object(f"{tmp_path / 'my_plugins.py'}:Box")
    sys.modules.pop("my_plugins", None)


@pytest.mark.parametrize(
    "spec, message",
    [
        ("no_such_module_here.sub:thing", "no module named"),
        ("/nowhere/at/all.py:thing", "does not exist"),
        ("json:no_such_attr", "has no attribute 'no_such_attr'"),
    ],
)
def test_broken_plugins_are_user_errors(spec, message):
    with pytest.raises(UserError, match=message):
        load_object(spec)


def test_engine_specs_parse_into_kind_and_target():
    assert parse_spec("openai:http://a:8000/v1") == ("openai", "http://a:8000/v1")
    assert parse_spec("mypkg.engines:Echo:http://a:1") == ("mypkg.engines:Echo", "http://a:1")
    assert parse_spec("plugins/echo.py:Echo") == ("plugins/echo.py:Echo", "")
    assert set(ENGINES.names()) >= {"smollm2", "hf", "vllm", "openai"}


def test_an_engine_plugin_from_a_file_generates(tmp_path):
    import asyncio

    from agentdata.engines.base import GenerationRequest

    plugin = tmp_path / "echo_engine.py"
    plugin.write_text(ECHO_ENGINE)
    engine = load_engine(f"{plugin}:EchoEngine:hello", answer="9")
    assert engine.spec == f"{plugin}:EchoEngine:hello" and engine.target == "hello"
    generation = asyncio.run(engine.generate(GenerationRequest(messages=[{"role": "user", "content": "hi"}])))
    assert generation.text == "hello: \\boxed{9}"
    with pytest.raises(UserError, match="which it does not take .got an unexpected keyword argument .temprature"):
        load_engine(f"{plugin}:EchoEngine", temprature=1.0)


def test_a_protocol_plugin_is_found_by_path(tmp_path):
    plugin = tmp_path / "my_protocol.py"
    plugin.write_text(
        "from agentdata.formats.hermes import HermesProtocol\n\nclass LoudHermes(HermesProtocol):\n    name = 'loud'\n"
    )
    assert get_protocol(f"{plugin}:LoudHermes").name == "loud"
    assert "hermes" in PROTOCOL_REGISTRY
    (tmp_path / "not_protocol.py").write_text("THING = 3\n")
    with pytest.raises(UserError, match="is not a Protocol"):
        get_protocol(f"{tmp_path / 'not_protocol.py'}:THING")
