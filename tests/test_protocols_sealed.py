"""A protocol is one file and one registration line: nothing outside formats/<protocol>.py asks for one by name,
and a plain-text protocol written only here goes through collect, curate and SFT's data preparation."""

from __future__ import annotations

import ast
import re
from pathlib import Path

from agentdata.engines.base import Engine, Generation
from agentdata.formats import PROTOCOLS
from agentdata.formats.base import ParsedTurn, Protocol, join_pieces, numbered_call, results_as_user_turns
from agentdata.records import message_tool_calls

PACKAGE = Path(__file__).resolve().parent.parent / "agentdata"


def named_protocols(node: ast.AST) -> set[str]:
    """The protocol names a comparison tests against (`x == "codeblock"`, `x in ("hermes", ...)`,
    `pc.equal(x, ...)`), or a list of protocols kept by name (`TAGGED = ("hermes", "native")`)."""
    if isinstance(node, (ast.Tuple, ast.List, ast.Set)):
        names = {e.value for e in node.elts if isinstance(e, ast.Constant) and isinstance(e.value, str)}
        return names & set(PROTOCOLS) if len(names & set(PROTOCOLS)) > 1 else set()
    if isinstance(node, ast.Compare):
        operands = [node.left, *node.comparators]
    elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in ("equal", "is_in"):
        operands = list(node.args)
    else:
        return set()
    strings = set()
    for operand in operands:
        for inner in ast.walk(operand):
            if isinstance(inner, ast.Constant) and isinstance(inner.value, str):
                strings.add(inner.value)
    return strings & set(PROTOCOLS)


def comparisons_by_name(package: Path) -> dict[str, set[str]]:
    found = {}
    for path in sorted(package.rglob("*.py")):
        own = path.parent.name == "formats" and path.stem in PROTOCOLS  # formats/hermes.py may name hermes
        names = set()
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            names |= named_protocols(node)
        if own:
            names -= {path.stem}
        if names:
            found[path.relative_to(package.parent).as_posix()] = names
    return found


def test_no_module_outside_a_protocols_own_file_compares_against_its_name():
    assert comparisons_by_name(PACKAGE) == {}


def test_the_check_finds_a_planted_comparison(tmp_path):
    planted = tmp_path / "agentdata" / "formats"
    planted.mkdir(parents=True)
    (planted / "forms.py").write_text('def f(fmt):\n    return [] if fmt == "codeblock" else None\n')
    (planted / "health.py").write_text(
        'TAGGED = ("hermes", "native")\nok = "x" in TAGGED\nbad = "y" in ("qwen3coder",)\n'
    )
    (planted / "hermes.py").write_text('def g(name):\n    return name == "hermes"\n')  # its own name: allowed
    assert comparisons_by_name(tmp_path / "agentdata") == {
        "agentdata/formats/forms.py": {"codeblock"},
        "agentdata/formats/health.py": {"hermes", "native", "qwen3coder"},
    }


# --------------------------------------------------------------------------- a new protocol is one file
# A plain-text protocol written here and nowhere else: calls between RUN and END lines, results between OUT and
# END. It reaches collect through the plug-in path (`--protocol tests.test_protocols_sealed:RunEndProtocol`).
SPEC = "tests.test_protocols_sealed:RunEndProtocol"
END = "\nEND\n"


class RunEndProtocol(Protocol):
    name = "runend"
    stop_strings = (END,)
    tagged = False

    def system_prompt(self, tools):
        return "Run Python by writing it between a RUN line and an END line; its output comes back after OUT."

    def parse(self, text):
        pieces, calls, position = [], [], 0
        for match in re.finditer(r"RUN\n(.*?)\nEND\n", text, re.DOTALL):
            pieces.append(text[position : match.start()].removesuffix("\n"))
            calls.append(numbered_call(match.group(1), len(calls)))
            position = match.end()
        return ParsedTurn(join_pieces([*pieces, text[position:]]), calls)

    def render_assistant(self, message):
        blocks = "".join(f"RUN\n{call.code}{END}" for call in message_tool_calls(message))
        content = message.get("content") or ""
        return f"{content}\n{blocks}" if content and blocks else content + blocks

    def render_tool(self, message):
        return f"OUT\n{message.get('content') or ''}\nEND"

    def tool_outputs(self, text):
        return re.findall(r"OUT\n(.*?)\nEND", text, re.DOTALL)

    def to_plain_messages(self, messages, tool_turns=False):
        return results_as_user_turns(self, messages)


class RunEndModel(Engine):
    """Runs one program, then answers with what it printed."""

    async def generate(self, request):
        shown = [m["content"] for m in request.messages if m["role"] == "user" and m["content"].startswith("OUT\n")]
        if not shown:
            return Generation("Let me compute.\nRUN\nprint(6 * 7)", END, "stop", 5, 5)
        return Generation(f"So \\boxed{{{RunEndProtocol().tool_outputs(shown[-1])[0].strip()}}}.", None, "stop", 5, 5)


def test_a_plain_text_protocol_written_only_here_goes_from_collect_to_sft_data(tmp_path, tokenizer):
    from agentdata.agent.config import CollectConfig
    from agentdata.agent.rundir import RunDir
    from agentdata.agent.runner import collect
    from agentdata.curate import CurateConfig, curate
    from agentdata.formats.forms import canonical_messages
    from agentdata.inputs import read_rows
    from agentdata.records import Problem
    from agentdata.settings import build
    from agentdata.sft.sft_set import tokenize_sft_set
    from tests.fakes import InProcessSandbox

    config = build(CollectConfig, {"model": "scripted", "protocol": SPEC})
    problems = [Problem("What is 6 times 7?", "42", id="p1"), Problem("And 7 times 6?", "42", id="p2")]
    summary = collect(problems, tmp_path / "run", config, engine=RunEndModel(), sandbox=InProcessSandbox())
    assert (summary.total, summary.correct, summary.tool_calls) == (2, 2, 2)
    [collected, _] = sorted(RunDir(tmp_path / "run").trajectories(), key=lambda t: t.problem_id)
    assert collected.format == SPEC and collected.metadata["health"]["unterminated_code"] == 0

    result = curate([tmp_path / "run"], tmp_path / "sft.parquet", CurateConfig(max_per_problem=None, target="trl"))
    rows = list(read_rows(result.output))  # the export: plain turns, as templates read them
    assert len(rows) == 2 and all(not row.get("tools") for row in rows)  # plain text: no tool schemas listed
    turns = rows[0]["messages"]
    assert not any(turn.get("tool_calls") for turn in turns)  # the calls stay the text the model wrote
    assert "Let me compute.\nRUN\nprint(6 * 7)\nEND\n" in [turn["content"] for turn in turns]
    assert {"role": "user", "content": "OUT\n42\nEND"} in [{k: t[k] for k in ("role", "content")} for t in turns]
    assert canonical_messages(turns, SPEC) == [
        {key: value for key, value in message.items() if value is not None} for message in collected.messages
    ]

    prepared = tokenize_sft_set(result.output, tokenizer, None)
    trained = tokenizer.decode([t for t, m in zip(prepared[0]["input_ids"], prepared[0]["assistant_masks"]) if m])
    assert "RUN\nprint(6 * 7)\nEND" in trained and "OUT\n42" not in trained  # the output is not trained on
    canonical = curate([tmp_path / "run"], tmp_path / "canonical.parquet", CurateConfig(max_per_problem=None))
    assert tokenize_sft_set(canonical.output, tokenizer, None) == prepared  # the default form trains the same
