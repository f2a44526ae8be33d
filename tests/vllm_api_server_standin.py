"""Plays vLLM's OpenAI server for the tests of how agentdata starts and stops it (tests/test_processes.py).

A shell script named as vLLM's python runs it with the server's arguments (`-m vllm.entrypoints.openai.api_server
--model M --port P ...`). Like vLLM it starts a child that stays in its session, here one that only sleeps in the
place of `VLLM::EngineCore`, writes `SERVER_PID ENGINE_PID` to $VLLM_STANDIN_PIDS, and answers `/health` and chat
completions on 127.0.0.1:P (bench/fake_openai_server.py's `answer` script, each answer after
$VLLM_STANDIN_LATENCY seconds, so a test can act while a request is in flight).
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # vLLM's environment drops agentdata's PYTHONPATH

from bench.fake_openai_server import FakeOpenAIServer, _handler_for  # noqa: E402


def main() -> None:
    port = int(sys.argv[sys.argv.index("--port") + 1])
    engine_core = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])
    Path(os.environ["VLLM_STANDIN_PIDS"]).write_text(f"{os.getpid()} {engine_core.pid}")
    server = FakeOpenAIServer(port=port, script="answer", latency=float(os.environ.get("VLLM_STANDIN_LATENCY", "0")))
    answers = _handler_for(server)

    class WithHealth(answers):
        def do_GET(self) -> None:
            if self.path == "/health":
                self._send(200, {})
            else:
                super().do_GET()

    server._httpd.RequestHandlerClass = WithHealth
    server.start()
    while True:
        time.sleep(3600)


if __name__ == "__main__":
    main()
