"""`collect --harness`: an agent harness as the teacher, driven through the recording gateway, one run per
problem, into an ordinary run dir (tests/toy_harness.py is the harness; a scripted engine the model)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from agentdata.agent.config import CollectConfig, LoopConfig
from agentdata.agent.inspection import read_trajectories
from agentdata.agent.runner import RunBroken, collect
from agentdata.errors import UserError
from agentdata.records import Problem, Trajectory
from tests.calculating_engine import SUM, Calculating
from tests.cli_helpers import run_cli
from tests.fakes import InProcessSandbox
from tests.reply_server import ReplyServer, chat_completion

HARNESS = f"{sys.executable} {Path(__file__).with_name('toy_harness.py')}"


def run(tmp_path: Path, questions: list[str], command: str = HARNESS, **settings) -> list[Trajectory]:
    problems = [Problem(question, str(eval(SUM.search(question).group(0)))) for question in questions]
    config = CollectConfig(harness=command, concurrency=2, **settings)
    collect(problems, tmp_path / "run", config, engine=Calculating(), sandbox=InProcessSandbox())
    rows = read_trajectories(tmp_path / "run")
    return sorted(rows, key=lambda row: questions.index(row.question))


@pytest.fixture(autouse=True)
def toy_files(tmp_path, monkeypatch):
    monkeypatch.setenv("TOY_MARKER", str(tmp_path / "failed-once"))
    monkeypatch.setenv("TOY_PIDS", str(tmp_path / "pids"))
    monkeypatch.setenv("TOY_RELEASE", str(tmp_path / "release"))


def test_a_harness_run_becomes_an_ordinary_graded_trajectory(tmp_path):
    (trajectory,) = run(tmp_path, ["What is 6*7?"])
    assert trajectory.finish_reason == "answer" and trajectory.correct and trajectory.final_answer == "42"
    assert [m["role"] for m in trajectory.messages] == ["system", "user", "assistant", "tool", "assistant"]
    call = trajectory.messages[2]["tool_calls"][0]
    assert call["function"] == {"name": "code_interpreter", "arguments": '{"code": "6*7"}'}
    assert trajectory.messages[3] == {
        "role": "tool",
        "content": "42",
        "tool_call_id": call["id"],
        "name": "code_interpreter",
    }
    assert trajectory.messages[4]["content"] == "The tool says 42, so \\boxed{42}."
    assert (
        trajectory.tools[0]["function"]["description"] == "Evaluate a Python expression"
    )  # the tools the harness offered
    assert (trajectory.num_turns, trajectory.num_tool_calls, trajectory.format) == (2, 1, "native")
    assert (trajectory.prompt_tokens, trajectory.completion_tokens) == (20, 16)
    log = trajectory.metadata["gateway"]
    assert [entry["status"] for entry in log] == [200, 200]
    assert log[0]["sampling"] == {"model": "any", "seed": trajectory.sampling["seed"]}  # the request as sent
    assert all("exchange" not in entry for entry in log)  # both are the start of the conversation kept
    assert trajectory.metadata["harness"]["attempts"] == 1 and trajectory.metadata["harness"]["exit_code"] == 0


def test_the_answer_is_read_from_the_outputs_last_line_and_the_question_can_be_an_argument(tmp_path):
    last_line, argument = run(tmp_path, ["LAST_LINE: what is 2+3?", "What is 2+4?"], command=HARNESS + " '{question}'")
    assert last_line.correct and last_line.final_answer == "5"
    assert argument.metadata["harness"]["stdout_tail"].startswith("argument: What is 2+4?\n")
    assert argument.correct and argument.final_answer == "6"  # the \\boxed{} its output holds


def test_a_quiet_harness_is_graded_on_its_models_last_reply(tmp_path):
    (trajectory,) = run(tmp_path, ["QUIET: what is 5*5?"])
    assert trajectory.correct and trajectory.final_answer == "25"


def test_a_failure_before_any_model_answer_is_retried(tmp_path):
    (trajectory,) = run(tmp_path, ["FAIL_ONCE: what is 1+1?"])
    assert trajectory.correct and trajectory.metadata["harness"]["attempts"] == 2


def test_a_harness_killed_mid_run_is_never_trusted_nor_run_again_in_that_run(tmp_path):
    trajectory, _ = run(tmp_path, ["CRASH: what is 3+4?", "What is 1+2?"])
    assert trajectory.finish_reason == "error" and not trajectory.correct and trajectory.final_answer is None
    assert trajectory.error.startswith("harness killed by signal 9 after 1 model answer(s)")
    assert trajectory.metadata["harness"]["attempts"] == 1
    assert [m["role"] for m in trajectory.messages] == ["system", "user", "assistant"]  # kept to look at


def test_a_hanging_harness_is_stopped_at_its_limit_with_its_children(tmp_path):
    trajectory, fine = run(tmp_path, ["HANG: what is 8+1?", "What is 1+2?"], harness_timeout=2.0)
    assert fine.correct
    assert trajectory.finish_reason == "error" and trajectory.error.startswith("harness killed at its time limit")
    for pid in map(int, (tmp_path / "pids").read_text().split()):
        assert not running(pid)  # the harness and the child it started are gone


def running(pid: int) -> bool:
    """Whether `pid` is a live process (a killed one nobody has reaped yet is a zombie, not running)."""
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except FileNotFoundError:
        return False
    return "\nState:\tZ" not in status


def test_a_run_resumes_redoing_only_its_errors(tmp_path):
    first = run(tmp_path, ["What is 6*7?", "FAIL_ONCE: what is 2*2?"], harness_retries=0)
    assert [t.finish_reason for t in first] == ["answer", "error"]
    assert "before its model answered (infrastructure): could not import" in first[1].error
    again = run(tmp_path, ["What is 6*7?", "FAIL_ONCE: what is 2*2?"], harness_retries=0)
    assert [t.finish_reason for t in again] == ["answer", "answer"]
    assert again[0].metadata["gateway"][0]["started_at"] == first[0].metadata["gateway"][0]["started_at"]  # kept


def test_a_run_dir_of_one_harness_is_not_resumed_by_the_agent_loop(tmp_path):
    run(tmp_path, ["What is 6*7?"])
    with pytest.raises(UserError, match="harness"):
        collect(
            [Problem("What is 6*7?", "42")],
            tmp_path / "run",
            CollectConfig(),
            engine=Calculating(),
            sandbox=InProcessSandbox(),
        )


def test_a_command_that_cannot_start_stops_the_run_and_one_that_cannot_be_split_is_refused(tmp_path):
    with pytest.raises(RunBroken, match="exited with 127 before its model answered .*cannot start '/no/such/harness'"):
        run(tmp_path, ["What is 6*7?"], command="/no/such/harness", harness_retries=1)
    with pytest.raises(UserError, match="--harness"):
        run(tmp_path / "other", ["What is 6*7?"], command="python 'unclosed")


def test_collect_harness_from_the_command_line_makes_a_run_dir_that_curate_takes(tmp_path, capsys):
    problems = tmp_path / "problems.jsonl"
    problems.write_text(
        "".join(json.dumps({"question": f"What is {n}*3?", "answer": str(n * 3)}) + "\n" for n in (2, 5))
    )
    run_dir, sft = tmp_path / "run", tmp_path / "sft.parquet"
    teacher = f"{Path(__file__).with_name('calculating_engine.py')}:Calculating"
    collect_args = [
        "collect",
        str(problems),
        "--teacher",
        teacher,
        "--harness",
        HARNESS,
        "--out",
        str(run_dir),
        "--json",
    ]
    assert run_cli(collect_args) == 0
    summary = json.loads(capsys.readouterr().out)
    assert (summary["total"], summary["correct"]) == (2, 2)
    assert run_cli(["curate", str(run_dir), "--out", str(sft), "--json"]) == 0
    kept = pq.read_table(sft).to_pylist()
    assert len(kept) == 2 and all(row["messages"][-1]["content"].endswith("}.") for row in kept)


def test_an_answer_the_harness_rewrote_in_its_history_is_kept_whole_in_the_log(tmp_path):
    (trajectory,) = run(tmp_path, ["REWRITE: what is 6*7?"])
    first, last = trajectory.metadata["gateway"]
    assert trajectory.messages[2]["content"] == "Calling tools: 6*7"  # the history as the harness sent it
    kept = first["exchange"]["response"]["choices"][0]["message"]  # and the answer as the model gave it
    assert json.loads(kept["tool_calls"][0]["function"]["arguments"]) == {"code": "6*7"}
    assert "exchange" not in last


def test_collect_killed_mid_run_resumes_keeping_what_it_finished(tmp_path):
    problems = tmp_path / "problems.jsonl"
    rows = [{"question": "What is 1+1?", "answer": "2"}, {"question": "BLOCK: what is 2+2?", "answer": "4"}]
    problems.write_text("".join(json.dumps(row) + "\n" for row in rows))
    run_dir = tmp_path / "run"
    teacher = f"{Path(__file__).with_name('calculating_engine.py')}:Calculating"
    args = [sys.executable, "-m", "agentdata.cli.app", "collect", str(problems), "--teacher", teacher]
    args += ["--harness", HARNESS, "--out", str(run_dir), "--concurrency", "1", "--json"]
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[1])}
    collecting = subprocess.Popen(args, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    journal = run_dir / "journal.jsonl"
    try:
        while not (journal.exists() and len(journal.read_text().splitlines()) >= 2):  # the header and one row
            assert collecting.poll() is None, "collect ended before it was killed"
            time.sleep(0.05)
    finally:
        collecting.kill()  # kill -9, the second harness run blocked in the middle
        collecting.wait()
    finished = json.loads(journal.read_text().splitlines()[1])
    (tmp_path / "release").touch()  # the orphaned harness finds the gateway gone and exits
    assert subprocess.run(args, env=env, capture_output=True).returncode == 0
    trajectories = {t.question: t for t in read_trajectories(run_dir)}
    assert all(t.correct for t in trajectories.values()) and len(trajectories) == 2
    kept = trajectories[finished["question"]]  # not run again: the same run, as the journal kept it
    assert kept.metadata["gateway"][0]["started_at"] == json.loads(finished["metadata"])["gateway"][0]["started_at"]


def test_regrade_grades_what_the_harness_run_was_graded_on(tmp_path, capsys):
    # the model's last reply has no boxed answer; the harness printed its own, which was graded
    (trajectory,) = run(tmp_path, ["PLAIN TOOL_RESULT: what is 2+3?"])
    assert trajectory.correct and trajectory.messages[-1]["content"] == "The tool says 5."
    assert trajectory.metadata["graded_text"] == "\\boxed{5}"
    capsys.readouterr()
    assert run_cli(["regrade", str(tmp_path / "run"), "--out", str(tmp_path / "again"), "--json"]) == 0
    (regraded,) = read_trajectories(tmp_path / "again")
    assert regraded.correct and regraded.final_answer == "5"  # no flip


def test_a_harness_that_never_asks_its_model_is_an_error_not_a_correct_answer(tmp_path):
    trajectory, fine = run(tmp_path, ["NO_MODEL: what is 6*7?", "What is 1+2?"])  # prints \boxed{42} on its own
    assert fine.correct
    assert trajectory.finish_reason == "error" and not trajectory.correct and trajectory.final_answer is None
    assert trajectory.num_turns == 0 and "without its model answering once" in trajectory.error
    assert trajectory.metadata["harness"]["attempts"] == 1  # it ran fine: not tried again in this run


def test_a_question_too_long_for_the_environment_still_reaches_the_harness(tmp_path):
    long_question = "What is 6*7? " + "Think it over. " * 10_000  # about 150 KiB: over Linux's 128 KiB a string
    (trajectory,) = run(tmp_path, [long_question])  # on stdin and in AGENTDATA_QUESTION_FILE, not in the env
    assert trajectory.correct and trajectory.final_answer == "42"
    as_argument, _ = run(tmp_path / "argument", [long_question, "What is 1+2?"], command=HARNESS + " '{question}'")
    assert as_argument.finish_reason == "error" and "AGENTDATA_QUESTION_FILE" in as_argument.error


def test_the_runs_sampling_reaches_every_request_and_the_trajectory_records_what_was_used(tmp_path, capsys):
    """The done-when of issue 46: an `openai:` stand-in server sees the run's temperature and token cap on every
    request a harness leaves them unset in; a harness that sets its own is recorded as having done so."""
    received = []

    def answer(body: dict) -> str:
        received.append(body)
        return chat_completion("It is \\boxed{42}.")

    problems = tmp_path / "problems.jsonl"
    rows = [{"question": "What is 6*7?", "answer": "42"}, {"question": "SAMPLING: what is 6*7?", "answer": "42"}]
    problems.write_text("".join(json.dumps(row) + "\n" for row in rows))
    with ReplyServer(answer) as server:
        args = ["collect", str(problems), "--teacher", f"openai:{server.url}", "--harness", HARNESS]
        args += ["--temperature", "0.2", "--max-new-tokens", "64", "--out", str(tmp_path / "run"), "--json"]
        assert run_cli(args) == 0
    assert json.loads(capsys.readouterr().out)["correct"] == 2
    own = [body for body in received if "SAMPLING" in body["messages"][-1]["content"]]
    left_unset = [body for body in received if body not in own]
    assert len(own) == len(left_unset) == 1
    assert left_unset[0]["temperature"] == 0.2 and left_unset[0]["max_tokens"] <= 64
    assert own[0]["temperature"] == 0.9 and own[0]["max_tokens"] == 32
    by_question = {t.question: t for t in read_trajectories(tmp_path / "run")}
    run_sampled, harness_sampled = by_question["What is 6*7?"].sampling, by_question["SAMPLING: what is 6*7?"].sampling
    assert (run_sampled["temperature"], run_sampled["max_new_tokens"], run_sampled["set_by_harness"]) == (0.2, 64, [])
    assert (harness_sampled["temperature"], harness_sampled["max_new_tokens"]) == (0.9, 32)
    assert harness_sampled["set_by_harness"] == ["temperature", "max_new_tokens"]


@pytest.mark.parametrize(
    "setting",
    [["--protocol", "hermes"], ["--max-tool-calls", "2"], ["max_turns=3"], ["--tool", "tests/user_tools.py:add"]],
)
def test_a_setting_the_harness_cannot_honour_is_one_line_before_any_run_dir(tmp_path, capsys, setting):
    out = tmp_path / "run"
    assert run_cli(["collect", "--harness", HARNESS, *setting, "--out", str(out)]) == 2
    error = capsys.readouterr().err.strip()
    assert len(error.splitlines()) == 1 and "--harness" in error and not out.exists()


def test_a_harness_command_that_cannot_be_split_is_refused_before_the_run_dir_so_the_fix_runs_there(tmp_path, capsys):
    problems = tmp_path / "problems.jsonl"
    problems.write_text(json.dumps({"question": "What is 6*7?", "answer": "42"}) + "\n")
    teacher = f"{Path(__file__).with_name('calculating_engine.py')}:Calculating"
    args = ["collect", str(problems), "--teacher", teacher, "--out", str(tmp_path / "run"), "--json", "--harness"]
    assert run_cli([*args, "python 'unclosed"]) == 2
    assert "No closing quotation" in capsys.readouterr().err and not (tmp_path / "run").exists()
    assert run_cli([*args, HARNESS]) == 0
    assert json.loads(capsys.readouterr().out)["correct"] == 1


def test_a_harness_run_dir_that_recorded_its_teachers_protocol_resumes(tmp_path):
    """0.5 recorded the teacher's protocol for a harness run, which no harness used: it is no part of the
    identity of a harness run, so such a run dir resumes (and a --temperature change still does not)."""
    run(tmp_path, ["What is 6*7?"])
    manifest_path = tmp_path / "run" / "manifest.json"
    manifest = json.loads(manifest_path.read_text())
    manifest["settings"]["protocol"] = "codeblock"  # as 0.5 wrote it
    manifest_path.write_text(json.dumps(manifest))
    assert run(tmp_path, ["What is 6*7?", "What is 1+2?"])[1].correct  # resumed, the new problem made
    with pytest.raises(UserError, match="temperature"):
        run(tmp_path, ["What is 6*7?"], loop=LoopConfig(temperature=0.1))
