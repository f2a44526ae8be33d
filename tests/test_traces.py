"""`agentdata import atif|inspect|sts` and `view --atif`: other tools' traces in, agentdata's out.

A run dir of hand-made trajectories goes out as STS and ATIF and comes back with the same messages, tools
and verdicts; the imported run is curated like a collected one; a malformed file stops the import in one
line naming the file and where in it, before anything is written; a killed import resumes. The formats'
own libraries (the `atif` models, inspect_ai writing real logs) are in test_traces_peers.py.
"""

from __future__ import annotations

import json
from pathlib import Path

import polars as pl
import pytest

from agentdata.agent.rundir import RunDir
from agentdata.curate import CurateConfig, curate
from agentdata.errors import InputFileError, UserError
from agentdata.records import CODE_TOOL, Problem, ToolCall, Trajectory, assistant_message, tool_message
from agentdata.regrade import regrade
from agentdata.traces import ImportConfig, import_traces
from agentdata.traces import build as build_module
from agentdata.view.api import ViewerData
from agentdata.view.atif import write_atif
from agentdata.view.catalog import open_artifacts
from agentdata.view.mask import Tokenizers
from agentdata.view.sts import write_sts
from tests.cli_helpers import run_cli

AWS = "AKIAIOSFODNN7EXAMPLE"  # AWS's documented example key: detect-secrets finds it
SEARCH_TOOL = {
    "type": "function",
    "function": {
        "name": "search",
        "description": "Search the notes.",
        "parameters": {"type": "object", "properties": {"query": {"type": "string"}}, "required": ["query"]},
    },
}


def conversation(question: str, answer: str, *, secret: bool = False, search: bool = True) -> list[dict]:
    """A system prompt, the question, a turn with thinking and its calls (code, and another tool unless not
    `search`), their results, and the boxed answer."""
    calls = [ToolCall("print(6*7)", id="call_a")]
    calls += [ToolCall(name="search", arguments={"query": "x"}, id="call_b")] if search else []
    output = f"42\nkey={AWS}\n" if secret else "42\n"
    results = [tool_message("call_b", "nothing found", name="search")] if search else []
    return [
        {"role": "system", "content": "Use the tools."},
        {"role": "user", "content": question},
        assistant_message("Let me compute.", calls, reasoning_content="Six sevens."),
        tool_message("call_a", output),
        *results,
        assistant_message(f"The answer is \\boxed{{{answer}}}."),
    ]


QUESTIONS = ["What is six times seven?", "How many legs do seven spiders have, minus fourteen?", "Name 41 + 1."]


def trajectory(number: int, answer: str, gold: str = "42", secret: bool = False, search: bool = True) -> Trajectory:
    question = QUESTIONS[number]
    return Trajectory(
        id=f"p{number}-0",
        problem_id=f"p{number}",
        question=question,
        answer=gold,
        messages=conversation(question, answer, secret=secret, search=search),
        source="ladder",
        tools=[CODE_TOOL, SEARCH_TOOL] if search else [CODE_TOOL],
        final_answer=answer,
        correct=answer == gold,
        num_tool_calls=2 if search else 1,
        num_turns=2,
        prompt_tokens=100 + number,
        completion_tokens=20 + number,
        teacher="openai:teacher-model",
        format="hermes",
    )


def write_run(path: Path, search: bool = True) -> Path:
    """A run dir of three trajectories: two right, one wrong, one of them with a key in a tool output."""
    rundir = RunDir(path)
    settings = {"teacher": "openai:teacher-model", "protocol": "hermes"}
    rundir.prepare(settings, {})
    made = [trajectory(0, "42", secret=True, search=search), trajectory(1, "42", search=search)]
    rundir.write_shard([*made, trajectory(2, "41", search=search)], settings)
    return path


@pytest.fixture
def run(tmp_path) -> Path:
    return write_run(tmp_path / "run")


def viewer(*paths: Path) -> ViewerData:
    return ViewerData(open_artifacts(list(paths)), Tokenizers("unused: the trace exports tokenize nothing"))


def by_id(path: Path) -> dict[str, Trajectory]:
    return {t.id: t for t in RunDir(path).trajectories()}


# --------------------------------------------------------------------------- round trips


@pytest.mark.parametrize("kind", ["sts", "atif"])
def test_an_export_imported_back_gives_the_same_trajectories(run, tmp_path, kind):
    write = {"sts": write_sts, "atif": write_atif}[kind]
    summary = write(viewer(run), tmp_path / "out", limit=100, secrets="keep")
    assert summary.sessions == 3
    result = import_traces(kind, [tmp_path / "out"], tmp_path / "back")
    assert result.imported == 3 and result.graded == 3 and result.correct == 2 and not result.left_out
    before, after = by_id(run), by_id(tmp_path / "back")
    assert after.keys() == before.keys()
    for key, old in before.items():
        new = after[key]
        assert new.messages == old.messages  # thinking, both calls and their results, in order
        assert (new.tools, new.problem_id, new.answer, new.source, new.teacher, new.format) == (
            old.tools,
            old.problem_id,
            old.answer,
            old.source,
            old.teacher,
            old.format,
        )
        assert (new.correct, new.final_answer, new.prompt_tokens, new.completion_tokens) == (
            old.correct,
            old.final_answer,
            old.prompt_tokens,
            old.completion_tokens,
        )
        provenance = new.metadata["imported"]
        assert provenance["format"] == kind and provenance["graded"] and provenance["original_id"] == key
        assert Path(provenance["file"]).is_file() and Path(provenance["file"]).is_relative_to(tmp_path / "out")


def test_the_atif_export_redacts_secrets_as_the_sts_export_does(run, tmp_path):
    summary = write_atif(viewer(run), tmp_path / "atif", limit=100)
    written = "".join(path.read_text() for path in (tmp_path / "atif").rglob("*.json"))
    assert AWS not in written and "[REDACTED AWS Access Key]" in written
    assert summary.secrets["rows"] == 1 and summary.sessions == 3
    dropped = write_atif(viewer(run), tmp_path / "dropped", limit=100, secrets="drop")
    assert dropped.sessions == 2 and AWS not in "".join(p.read_text() for p in (tmp_path / "dropped").rglob("*.json"))


def test_an_imported_run_is_read_by_curate_view_regrade_and_inspect(tmp_path, capsys):
    # the code tool only, as a collected run has it
    run = write_run(tmp_path / "run", search=False)
    write_sts(viewer(run), tmp_path / "sts", limit=100, secrets="keep")
    imported = tmp_path / "imported"
    import_traces("sts", [tmp_path / "sts"], imported)
    result = curate([imported], tmp_path / "sft.parquet", CurateConfig(max_per_problem=0))
    assert result.counts.get("incorrect") == 1
    rows = pl.read_parquet(tmp_path / "sft.parquet")
    assert sorted(rows["problem_id"]) == ["p0", "p1"] and set(rows["teacher"]) == {"openai:teacher-model"}
    (artifact,) = [a for a in viewer(imported).catalog if a.has_rows]
    assert artifact.kind == "run" and len(artifact.table()) == 3
    fixed = [Problem(QUESTIONS[2], "41", id="p2")]  # the wrong answer's gold was wrong
    assert regrade(imported, tmp_path / "regraded", fixed).to_correct == 1
    assert run_cli(["inspect", str(imported), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["trajectories"] == 3


def test_the_view_command_writes_atif_beside_sts_and_refuses_one_folder_for_both(run, tmp_path, capsys):
    arguments = ["view", str(run), "--atif", str(tmp_path / "a"), "--sts", str(tmp_path / "s"), "--json"]
    assert run_cli(arguments) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["atif"]["sessions"] == out["sts"]["sessions"] == 3
    assert len(list((tmp_path / "a").rglob("*.json"))) == 3
    assert run_cli(["view", str(run), "--atif", str(tmp_path / "x"), "--sts", str(tmp_path / "x")]) == 2
    assert "--sts and --atif name the same folder" in " ".join(capsys.readouterr().err.split())
    assert not (tmp_path / "x").exists()


# --------------------------------------------------------------------------- grading and provenance


def sts_file(path: Path, messages: list[dict], header: dict | None = None) -> Path:
    lines = [{"type": "session", "harness": "my-agent", "id": path.stem, **(header or {})}]
    lines += [{"type": "message", "message": message} for message in messages]
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(line) + "\n" for line in lines))
    return path


def plain_session(question: str, reply: str) -> list[dict]:
    return [{"role": "user", "content": question}, {"role": "assistant", "content": reply, "model": "m-1"}]


def test_traces_are_graded_against_the_problems_given_else_kept_ungraded(tmp_path):
    folder = tmp_path / "sessions"
    sts_file(folder / "a.jsonl", plain_session("What is 6 times 7?", "It is \\boxed{42}."))
    sts_file(folder / "b.jsonl", plain_session("What is 2 plus 2?", "It is \\boxed{5}."))
    sts_file(folder / "c.jsonl", plain_session("Name a colour.", "\\boxed{blue}"))
    problems = [Problem("what is 6 times 7?", "42", id="six"), Problem("What is 2 plus 2?", "4", id="two")]
    result = import_traces("sts", [folder], tmp_path / "run", problems)
    assert (result.graded, result.matched, result.correct) == (2, 2, 1)
    rows = {t.question: t for t in RunDir(tmp_path / "run").trajectories()}
    six, two, colour = rows["What is 6 times 7?"], rows["What is 2 plus 2?"], rows["Name a colour."]
    assert (six.problem_id, six.answer, six.correct) == ("six", "42", True)  # matched by question
    assert (two.correct, two.final_answer) == (False, "5")
    assert six.metadata["problem_hash"] and six.teacher == "m-1" and six.format == "native"
    assert not colour.correct and colour.final_answer == "blue" and colour.answer == ""
    assert colour.metadata["imported"]["graded"] is False and colour.source == "my-agent"
    assert colour.metadata["imported"]["made_by"] == "my-agent" and colour.metadata["imported"]["row"] == 1
    # ungraded rows are curated only when asked
    kept = curate([tmp_path / "run"], tmp_path / "all.parquet", CurateConfig(keep_incorrect=True, tool_calls=(0, 8)))
    assert kept.kept_rows == 3


def test_a_folder_passes_over_files_of_another_format_and_a_file_named_must_be_one(tmp_path):
    folder = tmp_path / "mixed"
    sts_file(folder / "good.jsonl", plain_session("Q?", "\\boxed{1}"))
    (folder / "notes.jsonl").write_text('{"note": "not a session"}\n')
    result = import_traces("sts", [folder], tmp_path / "run")
    assert result.imported == 1 and any("notes.jsonl: not an STS session" in line for line in result.left_out)
    with pytest.raises(InputFileError, match="notes.jsonl: not an STS session"):
        import_traces("sts", [folder / "notes.jsonl"], tmp_path / "other")
    (folder / "good.jsonl").unlink()
    with pytest.raises(UserError, match="no sts trace files found .* 1 left out, e.g. .*notes.jsonl: not an STS"):
        import_traces("sts", [folder], tmp_path / "other")
    assert not (tmp_path / "other").exists()


# --------------------------------------------------------------------------- malformed files


def atif_document(steps: list[dict]) -> dict:
    return {"schema_version": "ATIF-v1.8", "agent": {"name": "harness", "version": "1"}, "steps": steps}


MALFORMED = [
    (
        "sts",
        "s.jsonl",
        '{"type": "session", "harness": "h", "id": "x"}\n{"type": "message", "message": {"role": "user", '
        '"content": "q"}}\n{"type": "message", "message": {"role": "robot", "content": "hi"}}\n',
        "s.jsonl: line 3: role must be one of",
    ),
    ("sts", "t.jsonl", '{"type": "session", "harness": "h", "id": "x"}\n{oops\n', "t.jsonl, row 2: not valid JSON"),
    (
        "atif",
        "a.json",
        json.dumps(atif_document([{"step_id": 1, "source": "user", "message": "q"}, {"step_id": 2, "message": "a"}])),
        "a.json: step 2: source must be system, user or agent",
    ),
    (
        "atif",
        "b.json",
        json.dumps(
            atif_document(
                [
                    {"step_id": 1, "source": "user", "message": "q"},
                    {
                        "step_id": 2,
                        "source": "agent",
                        "message": "",
                        "tool_calls": [{"tool_call_id": "c", "function_name": "f", "arguments": "not json"}],
                    },
                ]
            )
        ),
        "b.json: step 2: tool call 'f' has arguments that are not JSON",
    ),
    ("atif", "c.json", '{"schema_version": "ATIF-v1.8", ', "c.json: not valid JSON"),
    (
        "inspect",
        "log.json",
        json.dumps(
            {
                "version": 2,
                "eval": {"task": "t", "model": "m"},
                "samples": [
                    {"id": 1, "epoch": 1, "messages": [{"role": "user", "content": "q"}]},
                    {"id": 2, "epoch": 1, "messages": [{"content": "no role"}]},
                ],
            }
        ),
        "log.json: sample 2 (id 2, epoch 1), message 1: role must be",
    ),
]


@pytest.mark.parametrize("kind, name, text, message", MALFORMED, ids=[case[1] for case in MALFORMED])
def test_a_malformed_file_is_one_line_naming_the_file_and_the_row_before_anything_is_written(
    tmp_path, capsys, kind, name, text, message
):
    folder = tmp_path / "traces"
    folder.mkdir()
    (folder / name).write_text(text)
    code = run_cli(["import", kind, str(folder), "--out", str(tmp_path / "run")])
    error = capsys.readouterr().err.strip()
    assert code == 2 and len(error.splitlines()) == 1 and message in error, error
    assert not (tmp_path / "run").exists()


# --------------------------------------------------------------------------- the run dir


def test_a_killed_import_resumes_where_it_stopped(tmp_path, monkeypatch):
    folder = tmp_path / "sessions"
    for number in range(5):
        sts_file(folder / f"s{number}.jsonl", plain_session(f"What is {number} plus 1?", f"\\boxed{{{number + 1}}}"))
    graded, calls = build_module.graded, []

    def killed_after_two(item, sandbox):
        calls.append(item.trajectory.id)
        if len(calls) > 2:
            raise KeyboardInterrupt  # as a Ctrl-C or kill lands mid-import
        return graded(item, sandbox)

    monkeypatch.setattr("agentdata.traces.run.graded", killed_after_two)
    config = ImportConfig(shard_size=1, concurrency=1)
    with pytest.raises(KeyboardInterrupt):
        import_traces("sts", [folder], tmp_path / "run", config=config)
    assert len(RunDir(tmp_path / "run").shards()) == 2  # the finished shards, whole
    monkeypatch.setattr("agentdata.traces.run.graded", graded)
    result = import_traces("sts", [folder], tmp_path / "run", config=config)
    assert (result.already, result.imported) == (2, 3)
    ids = [t.id for t in RunDir(tmp_path / "run").trajectories()]
    assert sorted(ids) == sorted(set(ids)) and len(ids) == 5
    again = import_traces("sts", [folder], tmp_path / "run", config=config)
    assert (again.already, again.imported, again.summary["total"]) == (5, 0, 5)


def test_an_import_never_mixes_into_a_run_of_other_settings(run, tmp_path, capsys):
    sts_file(tmp_path / "s" / "a.jsonl", plain_session("Q?", "\\boxed{1}"))
    assert run_cli(["import", "sts", str(tmp_path / "s"), "--out", str(run)]) == 2
    assert "holds a run with other settings" in capsys.readouterr().err
    assert len(RunDir(run).trajectories()) == 3


# --------------------------------------------------------------------------- what each format holds


def test_atif_copied_context_is_left_out_and_a_result_of_no_call_is_the_next_user_turn(tmp_path):
    steps = [
        {"step_id": 1, "source": "user", "message": "Fix the bug."},
        {"step_id": 2, "source": "agent", "message": "old turn", "is_copied_context": True},
        {
            "step_id": 3,
            "source": "agent",
            "message": [{"type": "text", "text": "```bash\nls\n```"}],
            "observation": {"results": [{"content": "main.py"}]},
        },
        {"step_id": 4, "source": "agent", "message": "Done: \\boxed{7}"},
    ]
    (tmp_path / "t.json").write_text(json.dumps({**atif_document(steps), "trajectory_id": "t-1"}))
    import_traces("atif", [tmp_path / "t.json"], tmp_path / "run")
    (row,) = RunDir(tmp_path / "run").trajectories()
    assert [(m["role"], m["content"]) for m in row.messages] == [
        ("user", "Fix the bug."),
        ("assistant", "```bash\nls\n```"),
        ("user", "main.py"),
        ("assistant", "Done: \\boxed{7}"),
    ]
    assert row.id == "t-1" and row.teacher == "harness" and row.metadata["imported"]["made_by"] == "harness 1"


def test_inspect_targets_errors_attachments_and_media(tmp_path):
    image = {"role": "user", "content": [{"type": "image", "image": "data:..."}]}
    samples = [
        {
            "id": "a",
            "epoch": 1,
            "uuid": "u-a",
            "target": ["7", "seven"],
            "attachments": {"h1": "The answer is \\boxed{7}."},
            "messages": [
                {"role": "user", "content": "Say seven."},
                {
                    "role": "assistant",
                    "content": [
                        {"type": "reasoning", "reasoning": "easy"},
                        {"type": "text", "text": "attachment://h1"},
                    ],
                },
            ],
            "model_usage": {"m": {"input_tokens": 5, "output_tokens": 3}},
        },
        {
            "id": "b",
            "epoch": 2,
            "target": "1",
            "error": {"message": "sandbox died"},
            "messages": [{"role": "user", "content": "q"}],
        },
        {"id": "c", "epoch": 1, "target": "1", "messages": [image]},
    ]
    log = {"version": 2, "eval": {"task": "tiny", "model": "m", "dataset": {"name": "tinyset"}}, "samples": samples}
    (tmp_path / "log.json").write_text(json.dumps(log))
    result = import_traces("inspect", [tmp_path / "log.json"], tmp_path / "run")
    assert (
        len(result.left_out) == 1 and "sample 3 (id c, epoch 1)" in result.left_out[0] and "image" in result.left_out[0]
    )
    rows = by_id(tmp_path / "run")
    good = rows["u-a"]
    assert good.messages[1] == {
        "role": "assistant",
        "content": "The answer is \\boxed{7}.",
        "reasoning_content": "easy",
    }
    assert good.correct and (good.prompt_tokens, good.completion_tokens) == (5, 3) and good.source == "tinyset"
    (failed,) = [t for t in rows.values() if t.problem_id == "b"]
    assert failed.finish_reason == "error" and failed.error == "sandbox died" and not failed.correct
    assert failed.sampling["sample_index"] == 0 and failed.metadata["imported"]["extra"]["epoch"] == 2


def test_a_broken_eval_zip_is_one_line(tmp_path, capsys):
    import zipfile

    with zipfile.ZipFile(tmp_path / "a.eval", "w", compression=zipfile.ZIP_BZIP2) as archive:
        archive.writestr("header.json", "{not json")
    (tmp_path / "b.eval").write_bytes(b"PK\x03\x04 truncated")
    with zipfile.ZipFile(tmp_path / "c.eval", "w") as archive:  # then its method made one no reader knows (97)
        archive.writestr("header.json", "{}")
    data = bytearray((tmp_path / "c.eval").read_bytes())
    central = data.index(b"PK\x01\x02")
    data[8:10] = data[central + 10 : central + 12] = (97).to_bytes(2, "little")
    (tmp_path / "c.eval").write_bytes(bytes(data))
    cases = [
        ("a.eval", "header.json in the zip is not JSON"),
        ("b.eval", "not a readable .eval zip"),
        ("c.eval", "not a readable .eval zip (That compression method is not supported)"),
    ]
    for name, message in cases:
        assert run_cli(["import", "inspect", str(tmp_path / name), "--out", str(tmp_path / "run")]) == 2
        error = capsys.readouterr().err.strip()
        assert len(error.splitlines()) == 1 and f"{name}: {message}" in error, error


def _zip_with_method(path: Path, members: dict[str, bytes], method: int | None = None) -> None:
    """A zip of `members`, the last one's compression method number then set to `method` (in both headers)."""
    import zipfile

    with zipfile.ZipFile(path, "w", compression=zipfile.ZIP_DEFLATED) as archive:
        for name, data in members.items():
            archive.writestr(name, data, compress_type=zipfile.ZIP_STORED if method else zipfile.ZIP_DEFLATED)
    if method is not None:
        data = bytearray(path.read_bytes())
        local, central = data.rindex(b"PK\x03\x04"), data.rindex(b"PK\x01\x02")
        data[local + 8 : local + 10] = data[central + 10 : central + 12] = method.to_bytes(2, "little")
        path.write_bytes(bytes(data))


def test_an_eval_member_that_inflates_past_the_bound_is_refused_without_inflating_it_whole(
    tmp_path, monkeypatch, capsys
):
    # a few hundred KB of zip holding a member of 64 MiB of spaces (a zip bomb in small): read a chunk at a time
    # and refused once past the bound, never held whole; a zstd member whose header understates its size too
    import tracemalloc

    import pyarrow as pa

    from agentdata.traces import inspect_log

    monkeypatch.setattr(inspect_log, "MAX_MEMBER_BYTES", 2**20, raising=False)
    header = json.dumps({"version": 2, "eval": {"task": "t", "model": "m"}}).encode()
    bomb = b"[" + b" " * 64 * 2**20 + b"]"
    _zip_with_method(tmp_path / "deflate.eval", {"header.json": header, "samples/1_epoch_1.json": bomb})
    zstd = pa.Codec("zstd").compress(bomb, asbytes=True)
    _zip_with_method(tmp_path / "zstd.eval", {"header.json": header, "samples/1_epoch_1.json": zstd}, method=93)
    for name in ("deflate.eval", "zstd.eval"):
        tracemalloc.start()
        try:
            assert run_cli(["import", "inspect", str(tmp_path / name), "--out", str(tmp_path / "run")]) == 2
            peak = tracemalloc.get_traced_memory()[1]
        finally:
            tracemalloc.stop()
        error = capsys.readouterr().err.strip()
        assert len(error.splitlines()) == 1 and "samples/1_epoch_1.json in the zip inflates to more than" in error
        assert peak < 32 * 2**20, f"{name}: {peak / 2**20:.0f} MiB held to refuse it"
        assert not (tmp_path / "run").exists()


def test_files_of_one_name_in_two_folders_are_two_trajectories(tmp_path):
    # Harbor writes every trial's trajectory as agent/trajectory.json; these carry no trajectory_id
    steps = [{"step_id": 1, "source": "user", "message": "Q?"}, {"step_id": 2, "source": "agent", "message": "A"}]
    files = []
    for trial in ("trial-1", "trial-2"):
        path = tmp_path / "job" / trial / "agent" / "trajectory.json"
        path.parent.mkdir(parents=True)
        path.write_text(json.dumps(atif_document(steps)))
        files.append(path)
    result = import_traces("atif", files, tmp_path / "run")
    assert (result.imported, result.duplicates) == (2, 0)
    again = import_traces("atif", [tmp_path / "job"], tmp_path / "run")  # the same files through their folder
    assert (again.imported, again.already) == (0, 2)


def test_a_call_with_arguments_that_are_not_json_survives_the_atif_round_trip(tmp_path):
    from agentdata.traces.atif import atif_document as to_atif
    from agentdata.traces.atif import read_atif

    raw = {"id": "c1", "type": "function", "function": {"name": "code_interpreter", "arguments": "print(1"}}
    messages = [
        {"role": "user", "content": "Q?"},
        {"role": "assistant", "content": "", "tool_calls": [raw]},
        {"role": "tool", "tool_call_id": "c1", "name": "code_interpreter", "content": "SyntaxError"},
    ]
    document = to_atif("s-1", messages, {"teacher": "m"}, None)
    assert document["steps"][1]["tool_calls"][0] == {
        "tool_call_id": "c1",
        "function_name": "code_interpreter",
        "arguments": {},  # ATIF's arguments are an object: the text rides in the call's extra
        "extra": {"raw_arguments": "print(1"},
    }
    (tmp_path / "s.json").write_text(json.dumps(document))
    (session,) = read_atif(tmp_path / "s.json")
    assert session.messages == messages


def test_sts_tool_results_that_name_no_call_answer_the_calls_in_order(tmp_path):
    calls = [{"id": f"t{n}", "function": {"name": name, "arguments": "{}"}} for n, name in enumerate(("ls", "cat"))]
    sts_file(
        tmp_path / "s.jsonl",
        [
            {"role": "user", "content": "Look around."},
            {"role": "assistant", "content": "", "toolCalls": calls},
            {"role": "tool", "content": "a.txt"},
            {"role": "tool", "content": "hello"},
            {"role": "assistant", "content": "\\boxed{hello}"},
        ],
    )
    import_traces("sts", [tmp_path / "s.jsonl"], tmp_path / "run")
    (row,) = RunDir(tmp_path / "run").trajectories()
    results = [(m["tool_call_id"], m["name"], m["content"]) for m in row.messages if m["role"] == "tool"]
    assert results == [("t0", "ls", "a.txt"), ("t1", "cat", "hello")] and row.tools == []


def test_numbers_where_an_atif_file_should_have_text_do_not_crash_the_import(tmp_path):
    steps = [
        {"step_id": 1, "source": "user", "message": "6*7?"},
        {"step_id": 2, "source": "agent", "message": "\\boxed{42}"},
    ]
    document = {**atif_document(steps), "trajectory_id": 9, "extra": {"agentdata": {"id": 7, "problem_id": 3}}}
    (tmp_path / "t.json").write_text(
        json.dumps(
            {**document, "extra": {"agentdata": {**document["extra"]["agentdata"], "gold_answer": 42, "source": 1}}}
        )
    )
    import_traces("atif", [tmp_path / "t.json"], tmp_path / "run")
    (row,) = RunDir(tmp_path / "run").trajectories()
    assert isinstance(row.id, str) and row.answer == "42" and row.source == "harness 1" and row.correct


def test_a_code_problems_trace_runs_its_tests_in_the_sandbox_the_import_opens(tmp_path):
    tests = [{"input": f"{n}\n", "output": f"{2 * n}\n", "testtype": "stdin"} for n in (3, 5)]
    problem = Problem("Read n and print twice n.", json.dumps({"tests": tests}), id="double", domain="code")
    program = "Here it is.\n```python\nprint(int(input()) * 2)\n```"
    sts_file(tmp_path / "s" / "a.jsonl", plain_session(problem.question, program))
    result = import_traces("sts", [tmp_path / "s"], tmp_path / "run", [problem])
    (row,) = RunDir(tmp_path / "run").trajectories()
    assert result.correct == 1 and row.correct and row.domain == "code" and row.metadata["tests"]["passed"] == 2


def inspect_log_with_tool(tool: str, called: str) -> dict:
    """An Inspect log of two samples whose model was offered `tool` and called `called` once, then answered."""
    info = {"name": tool, "description": "Run Python.", "parameters": {"type": "object", "properties": {}}}
    samples = [
        {
            "id": f"s{n}",
            "epoch": 1,
            "target": "42",
            "events": [{"event": "model", "tools": [info]}],
            "messages": [
                {"role": "user", "content": f"What is 6 times 7? (variant {n})"},
                {
                    "role": "assistant",
                    "content": "Let me compute.",
                    "tool_calls": [{"id": "c1", "function": called, "arguments": {"code": "print(6*7)"}}],
                },
                {"role": "tool", "content": "42\n", "tool_call_id": "c1", "function": called},
                {"role": "assistant", "content": "The answer is \\boxed{42}."},
            ],
        }
        for n in range(2)
    ]
    return {"version": 2, "eval": {"task": "t", "model": "m"}, "samples": samples}


def test_curate_keeps_the_calls_of_the_tool_an_imported_trace_declared(tmp_path, capsys):
    # Inspect's tool was named python_exec: every call of it was `malformed_tool_call` (only agentdata's
    # code_interpreter counted), 0 rows kept, and the advice named --tool-calls / --keep-incorrect
    (tmp_path / "declared.json").write_text(json.dumps(inspect_log_with_tool("python_exec", "python_exec")))
    import_traces("inspect", [tmp_path / "declared.json"], tmp_path / "declared")
    assert curate([tmp_path / "declared"], tmp_path / "sft.parquet", CurateConfig()).kept_rows == 2
    # a call of a tool the trace never declared still cannot be trained on, and the advice says why
    (tmp_path / "undeclared.json").write_text(json.dumps(inspect_log_with_tool("python_exec", "bash")))
    import_traces("inspect", [tmp_path / "undeclared.json"], tmp_path / "undeclared")
    assert run_cli(["curate", str(tmp_path / "undeclared"), "--out", str(tmp_path / "none.parquet")]) == 2
    said = " ".join(capsys.readouterr().err.split())
    assert "none of 2 trajectories kept" in said and "malformed_tool_call" in said, said
    assert "--tool-calls" not in said and "--keep-incorrect" not in said, said
