"""The walk of issue 46: `--temperature` on collect reaches the agent loop's request body as given, and `--model`
is the body's `model` (engine_options' key), with no step between the flag and the request that re-reads them."""

from __future__ import annotations

import json

from tests.cli_helpers import run_cli
from tests.reply_server import ReplyServer, chat_completion


def test_collects_temperature_and_model_flags_reach_the_request_body(tmp_path, capsys):
    received = []

    def answer(body: dict) -> str:
        received.append(body)
        return chat_completion("It is \\boxed{42}.")

    problems = tmp_path / "problems.jsonl"
    problems.write_text(json.dumps({"question": "What is 6*7?", "answer": "42"}) + "\n")
    with ReplyServer(answer) as server:
        args = ["collect", str(problems), "--teacher", f"openai:{server.url}", "--model", "served-name"]
        args += ["--temperature", "0.123", "--max-new-tokens", "64", "--out", str(tmp_path / "run"), "--json"]
        assert run_cli(args) == 0
    assert json.loads(capsys.readouterr().out)["correct"] == 1
    assert len(received) == 1
    assert (received[0]["temperature"], received[0]["model"], received[0]["max_tokens"]) == (0.123, "served-name", 64)
