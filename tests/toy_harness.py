"""A toy agent harness, run as a program by the harness tests: it talks to OPENAI_BASE_URL with the standard
library only, offers one tool, runs each call it gets (an expression, with eval), and prints the model's final answer.

Its behaviour for a test is chosen by the question: FAIL_ONCE (fail before any model call the first time,
then work: a marker file beside the question's own), CRASH (die by SIGKILL after the first answer), HANG
(start a child that sleeps and hang; both their pids are written to $TOY_PIDS), QUIET (print nothing),
LAST_LINE (print the bare answer last), REWRITE (keep its calls in its history as text),
BLOCK (wait until the file $TOY_RELEASE exists), TOOL_RESULT (print the last tool result as its answer),
NO_MODEL (print an answer without asking the model), SAMPLING (send its own temperature 0.9 and 32 tokens;
without it the requests leave every sampling field but the seed unset).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import urllib.request

TOOL = {
    "type": "function",
    "function": {
        "name": "code_interpreter",
        "description": "Evaluate a Python expression",
        "parameters": {"type": "object", "properties": {"code": {"type": "string"}}, "required": ["code"]},
    },
}


def chat(messages: list[dict]) -> dict:
    seed = int(os.environ["AGENTDATA_SEED"])  # the trajectory's seed, sent on as a harness's sampling seed
    body = {"model": "any", "messages": messages, "tools": [TOOL], "seed": seed}
    if "SAMPLING" in messages[-1]["content"] or "SAMPLING" in messages[1]["content"]:
        body.update(temperature=0.9, max_tokens=32)
    body = json.dumps(body).encode()
    request = urllib.request.Request(
        os.environ["OPENAI_BASE_URL"] + "/chat/completions",
        data=body,
        headers={"Content-Type": "application/json", "Authorization": "Bearer " + os.environ["OPENAI_API_KEY"]},
    )
    with urllib.request.urlopen(request, timeout=60) as response:
        return json.loads(response.read())["choices"][0]["message"]


def main() -> None:
    question = sys.stdin.read()
    with open(os.environ["AGENTDATA_QUESTION_FILE"], encoding="utf-8") as file:
        assert question == file.read(), "the question comes on stdin and in the file AGENTDATA_QUESTION_FILE names"
    if len(question.encode()) <= 64 * 1024:  # and in the environment when Linux takes it there
        assert question == os.environ["AGENTDATA_QUESTION"], "a short question is in the environment too"
    else:
        assert "AGENTDATA_QUESTION" not in os.environ, "a long question is left out of the environment"
    if "NO_MODEL" in question:  # answers on its own, never asking the model
        print("\\boxed{42}")
        return
    if "FAIL_ONCE" in question:
        marker = os.environ["TOY_MARKER"]
        if not os.path.exists(marker):
            open(marker, "w").close()
            sys.exit("could not import the harness's library")
    if "BLOCK" in question:  # waits for the test to let it go (after killing collect)
        while not os.path.exists(os.environ["TOY_RELEASE"]):
            time.sleep(0.05)
    if "HANG" in question:
        child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])
        with open(os.environ["TOY_PIDS"], "w") as pids:
            pids.write(f"{os.getpid()} {child.pid}")
        time.sleep(600)
    messages = [{"role": "system", "content": "Use the code interpreter."}, {"role": "user", "content": question}]
    for _ in range(4):
        reply = chat(messages)
        if "REWRITE" in question and reply.get(
            "tool_calls"
        ):  # keeps its own text form of the calls, as smolagents does
            messages.append({"role": "assistant", "content": "Calling tools: 6*7"})
            messages.append({"role": "user", "content": "Observation: 42"})
            continue
        messages.append(reply)
        if "CRASH" in question:
            os.kill(os.getpid(), signal.SIGKILL)
        if not reply.get("tool_calls"):
            break
        for call in reply["tool_calls"]:
            code = json.loads(call["function"]["arguments"])["code"]
            messages.append({"role": "tool", "tool_call_id": call["id"], "content": str(eval(code))})
    if len(sys.argv) > 1:
        print("argument:", sys.argv[1])
    if "TOOL_RESULT" in question:  # its own answer: the last result its tool gave
        print(next(m["content"] for m in reversed(messages) if m["role"] == "tool"))
    elif "LAST_LINE" in question:  # the bare answer on the last line
        print("thinking...")
        print(reply["content"].split("\\boxed{")[1].split("}")[0])
    elif "QUIET" not in question:
        print("thinking...")
        print(reply["content"])


if __name__ == "__main__":
    main()
