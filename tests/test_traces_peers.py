"""The trace formats checked against their own libraries, each in its venv from scripts/peers.sh:

- agentdata -> ATIF (`view --atif`) -> the `atif` package's pydantic models validate every file -> `import atif`
  gives the same messages; a trajectory built with the `atif` models themselves imports too;
- a real `inspect_ai.eval` (its mock model, a Python tool, offline) writes `.eval` and `.json` logs ->
  `import inspect` gives the messages inspect_ai's own `read_eval_log` reads -> curate makes an SFT set.

Without a peer's venv a test skips with the reason; where AGENTDATA_REQUIRE_PEERS is set (CI) it fails.
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import polars as pl
import pytest

from agentdata.agent.rundir import RunDir
from agentdata.curate import CurateConfig, curate
from agentdata.records import Problem
from agentdata.traces import import_traces
from agentdata.view.atif import write_atif
from tests.cli_helpers import run_cli
from tests.test_traces import viewer, write_run


def peer_python(name: str) -> Path:
    """A peer's venv ($AGENTDATA_<NAME>_PYTHON, else .peers/NAME here or in the main checkout)."""
    if os.environ.get(f"AGENTDATA_{name.upper()}_PYTHON"):
        return Path(os.environ[f"AGENTDATA_{name.upper()}_PYTHON"])
    root = Path(__file__).resolve().parents[1]
    for candidate in (root / f".peers/{name}/bin/python", root.parent.parent / f"main/.peers/{name}/bin/python"):
        if candidate.is_file():
            return candidate
    reason = f"{name} is not installed: run `bash scripts/peers.sh {name}`"
    if os.environ.get("AGENTDATA_REQUIRE_PEERS"):
        pytest.fail(f"AGENTDATA_REQUIRE_PEERS is set but {reason}")
    pytest.skip(reason)


def run_peer(name: str, script: str, *args: str, cwd: Path) -> str:
    done = subprocess.run(
        [str(peer_python(name)), "-c", script, *args],
        capture_output=True,
        text=True,
        cwd=cwd,
        timeout=300,
        env={"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": str(cwd), "INSPECT_LOG_DIR": str(cwd)},
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return done.stdout


# --------------------------------------------------------------------------- ATIF

VALIDATE = r"""
import json, sys
from atif import Trajectory
for path in sys.argv[1:]:
    trajectory = Trajectory.model_validate(json.load(open(path)))
    print(json.dumps({"path": path, "steps": len(trajectory.steps), "agent": trajectory.agent.name}))
"""

BUILD = r"""
import json, sys
from atif import Agent, ContentPart, Observation, ObservationResult, Step, ToolCall, Trajectory
trajectory = Trajectory(
    schema_version="ATIF-v1.8",
    session_id="run-1",
    trajectory_id="harbor-trial-1",
    agent=Agent(name="terminus", version="2.0", model_name="qwen3-coder"),
    steps=[
        Step(step_id=1, source="system", message="You are a careful agent."),
        Step(step_id=2, source="user", message=[ContentPart(type="text", text="What is 6 * 7?")]),
        Step(step_id=3, source="agent", message="Running it.", reasoning_content="Multiply.",
             tool_calls=[ToolCall(tool_call_id="t1", function_name="code_interpreter",
                                  arguments={"code": "print(6*7)"})],
             observation=Observation(results=[ObservationResult(source_call_id="t1", content="42")])),
        Step(step_id=4, source="agent", message="\\boxed{42}"),
    ],
)
open(sys.argv[1], "w").write(json.dumps(trajectory.to_json_dict()))
"""


def test_agentdata_atif_is_valid_atif_and_imports_back_to_the_same_messages(tmp_path):
    run = write_run(tmp_path / "run")
    write_atif(viewer(run), tmp_path / "atif", limit=100, secrets="keep")
    files = sorted(str(path) for path in (tmp_path / "atif").rglob("*.json"))
    checked = [json.loads(line) for line in run_peer("atif", VALIDATE, *files, cwd=tmp_path).splitlines()]
    assert [item["path"] for item in checked] == files and {item["agent"] for item in checked} == {"agentdata"}
    assert {item["steps"] for item in checked} == {4}  # system, user, the turn with its results, the answer
    import_traces("atif", [tmp_path / "atif"], tmp_path / "back")
    before = {t.id: t for t in RunDir(run).trajectories()}
    after = {t.id: t for t in RunDir(tmp_path / "back").trajectories()}
    assert {key: t.messages for key, t in after.items()} == {key: t.messages for key, t in before.items()}


def test_an_sft_set_exported_as_atif_is_valid_atif(tmp_path):
    # an SFT row's calls carry their arguments as mappings (the hf form), not JSON text
    run = write_run(tmp_path / "run", search=False)
    curate([run], tmp_path / "sft.parquet", CurateConfig(max_per_problem=0))
    summary = write_atif(viewer(tmp_path / "sft.parquet"), tmp_path / "atif", limit=100, secrets="keep")
    files = sorted(str(path) for path in (tmp_path / "atif").rglob("*.json"))
    assert summary.sessions == len(files) == 2
    checked = [json.loads(line) for line in run_peer("atif", VALIDATE, *files, cwd=tmp_path).splitlines()]
    assert len(checked) == 2
    result = import_traces("atif", [tmp_path / "atif"], tmp_path / "back")
    assert result.imported == 2 and result.graded == 0  # an SFT row carries no gold: kept ungraded ...
    rows = RunDir(tmp_path / "back").trajectories()
    assert all(row.metadata["imported"]["extra"]["correct"] for row in rows)  # ... its set's verdict kept


def test_a_trajectory_made_with_the_atif_models_is_imported_and_graded(tmp_path):
    run_peer("atif", BUILD, str(tmp_path / "trial.json"), cwd=tmp_path)
    problems = [Problem("What is 6 * 7?", "42", id="mul")]
    result = import_traces("atif", [tmp_path / "trial.json"], tmp_path / "run", problems)
    assert (result.imported, result.matched, result.correct) == (1, 1, 1)
    (row,) = RunDir(tmp_path / "run").trajectories()
    assert row.id == "harbor-trial-1" and row.problem_id == "mul" and row.teacher == "qwen3-coder"
    assert [m["role"] for m in row.messages] == ["system", "user", "assistant", "tool", "assistant"]
    assert row.messages[2]["reasoning_content"] == "Multiply." and row.messages[3]["tool_call_id"] == "t1"
    assert row.metadata["imported"]["made_by"] == "terminus 2.0"


CONTINUED = r"""
import json, sys
from atif import Agent, FinalMetrics, Metrics, Step, Trajectory
copied = {"is_copied_context": True, "timestamp": "2026-01-02T10:00:00Z"}
trajectory = Trajectory(
    schema_version="ATIF-v1.8",
    trajectory_id="continued-1",
    agent=Agent(name="terminus", version="2.0", model_name="qwen3-coder"),
    steps=[
        Step(step_id=1, source="system", message="An earlier system prompt.", **copied),
        Step(step_id=2, source="user", message="An earlier question: what is 2 + 2?", **copied),
        Step(step_id=3, source="agent", message="\\boxed{4}", **copied),
        Step(step_id=4, source="user", message="What is 6 * 7?", timestamp="2026-01-02T10:01:00Z"),
        Step(step_id=5, source="agent", message="\\boxed{42}", timestamp="2026-01-02T10:01:30Z",
             metrics=Metrics(prompt_tokens=20, completion_tokens=5, cost_usd=0.002)),
    ],
    final_metrics=FinalMetrics(total_prompt_tokens=20, total_completion_tokens=5, total_cost_usd=0.002, total_steps=5),
    extra={"harbor_job": "job-7", "dataset": "compute"},
)
open(sys.argv[1], "w").write(json.dumps(trajectory.to_json_dict()))
"""


def test_copied_context_steps_are_left_out_and_the_documents_own_record_kept(tmp_path, capsys):
    # a continued trajectory carries the steps of the one before (`is_copied_context`): they were kept, and
    # the copied question was taken as this one's, so it matched no problem and could not be graded
    run_peer("atif", CONTINUED, str(tmp_path / "continued.json"), cwd=tmp_path)
    (tmp_path / "problems.jsonl").write_text(json.dumps({"id": "mul", "question": "What is 6 * 7?", "answer": "42"}))
    command = ["import", "atif", str(tmp_path / "continued.json"), "--problems", str(tmp_path / "problems.jsonl")]
    assert run_cli([*command, "--out", str(tmp_path / "run")]) == 0, capsys.readouterr().err
    (row,) = RunDir(tmp_path / "run").trajectories()
    assert [m["content"] for m in row.messages] == ["What is 6 * 7?", "\\boxed{42}"]
    assert row.question == "What is 6 * 7?" and row.problem_id == "mul" and row.correct
    kept = row.metadata["imported"]["extra"]
    assert kept["extra"] == {"harbor_job": "job-7", "dataset": "compute"} and kept["cost_usd"] == 0.002
    assert (kept["started_at"], kept["ended_at"]) == ("2026-01-02T10:01:00Z", "2026-01-02T10:01:30Z")
    assert kept["final_metrics"]["total_steps"] == 5 and kept["copied_context_steps"] == 3


# --------------------------------------------------------------------------- Inspect AI

EVAL = r"""
import sys
from inspect_ai import Task, eval as inspect_eval
from inspect_ai.dataset import Sample
from inspect_ai.model import ModelOutput, ModelUsage, get_model
from inspect_ai.scorer import match
from inspect_ai.solver import generate, system_message, use_tools
from inspect_ai.tool import tool


@tool
def code_interpreter():
    async def execute(code: str) -> str:
        '''Run Python code and return what it prints.

        Args:
            code: The Python code to run.
        '''
        return str(eval(code.removeprefix("print(").removesuffix(")"))) + "\n"

    return execute


outputs = []
for expression, answer in (("6*7", "42"), ("2+2", "5")):  # the second answer is wrong
    outputs += [
        ModelOutput.for_tool_call("mockllm/model", "code_interpreter", {"code": f"print({expression})"}),
        ModelOutput.from_content("mockllm/model", f"The answer is \\boxed{{{answer}}}."),
    ]
for output in outputs:  # given usage, the mock model counts no tokens (its tokenizer would be downloaded)
    output.usage = ModelUsage(input_tokens=10, output_tokens=5, total_tokens=15)
samples = [Sample(input="What is 6*7?", target="42", id="mul"), Sample(input="What is 2+2?", target="4", id="add")]
task = Task(dataset=samples, solver=[system_message("Use the tool."), use_tools(code_interpreter()), generate()],
            scorer=match())
model = get_model("mockllm/model", custom_outputs=outputs)
(log,) = inspect_eval(task, model=model, log_dir=sys.argv[1], log_format=sys.argv[2], display="none", max_samples=1)
assert log.status == "success", log.error
print(log.location)
"""

READ = r"""
import json, sys
from inspect_ai.log import read_eval_log
log = read_eval_log(sys.argv[1])
out = []
for sample in log.samples:
    messages = []
    for message in sample.messages:
        shown = {"role": message.role, "content": message.text}
        calls = getattr(message, "tool_calls", None) or []
        if calls:
            shown["calls"] = [[call.id, call.function, call.arguments] for call in calls]
        if message.role == "tool":
            shown["tool_call_id"] = message.tool_call_id
        messages.append(shown)
    out.append({"id": sample.id, "target": sample.target, "messages": messages})
print(json.dumps(out))
"""


def as_inspect_reads(messages: list[dict]) -> list[dict]:
    """agentdata's canonical messages in the shape READ prints inspect_ai's."""
    shown = []
    for message in messages:
        item = {"role": message["role"], "content": message["content"]}
        if message.get("tool_calls"):
            item["calls"] = [
                [call["id"], call["function"]["name"], json.loads(call["function"]["arguments"])]
                for call in message["tool_calls"]
            ]
        if message["role"] == "tool":
            item["tool_call_id"] = message["tool_call_id"]
        shown.append(item)
    return shown


@pytest.fixture(scope="module")
def inspect_logs(tmp_path_factory) -> dict[str, Path]:
    """One real eval of two samples, logged in each of inspect_ai's formats."""
    folder = tmp_path_factory.mktemp("inspect")
    found = {}
    for log_format in ("eval", "json"):
        location = run_peer("inspect", EVAL, str(folder / log_format), log_format, cwd=folder).strip().splitlines()[-1]
        found[log_format] = Path(location.removeprefix("file://"))
    return found


@pytest.mark.parametrize("log_format", ["eval", "json"])
def test_a_real_inspect_log_imports_as_inspect_ai_reads_it(inspect_logs, tmp_path, log_format):
    log = inspect_logs[log_format]
    assert log.suffix == f".{log_format}"
    reference = json.loads(run_peer("inspect", READ, str(log), cwd=tmp_path))
    result = import_traces("inspect", [log.parent], tmp_path / "run")
    assert (result.imported, result.graded, result.correct) == (2, 2, 1) and not result.left_out
    rows = {t.problem_id: t for t in RunDir(tmp_path / "run").trajectories()}
    assert rows.keys() == {sample["id"] for sample in reference}
    for sample in reference:
        row = rows[sample["id"]]
        assert as_inspect_reads(row.messages) == sample["messages"]
        assert row.answer == sample["target"] and row.teacher == "mockllm/model"
        assert row.tools[0]["function"]["name"] == "code_interpreter"
        assert row.metadata["imported"]["file"] == str(log.resolve())
    assert rows["mul"].correct and not rows["add"].correct and rows["add"].final_answer == "5"


def test_the_import_command_then_curate_make_an_sft_set_of_an_inspect_log(inspect_logs, tmp_path, capsys):
    code = run_cli(["import", "inspect", str(inspect_logs["eval"]), "--out", str(tmp_path / "run"), "--json"])
    out = json.loads(capsys.readouterr().out)
    assert code == 0 and out["imported"] == 2 and out["run"]["total"] == 2
    result = curate([tmp_path / "run"], tmp_path / "sft.parquet", CurateConfig())
    assert result.kept_rows == 1 and result.counts == {"incorrect": 1}
    (row,) = pl.read_parquet(tmp_path / "sft.parquet").to_dicts()
    assert row["problem_id"] == "mul" and row["teacher"] == "mockllm/model"
    assert [m["role"] for m in row["messages"]] == ["system", "user", "assistant", "tool", "assistant"]
