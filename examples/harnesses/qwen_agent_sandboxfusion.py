"""qwen-agent as agentdata's teacher harness, its code interpreter agentdata's SandboxFusion-compatible service:
the DemyAgent collection pipeline (qwen-agent driving a model against SandboxFusion), recorded by the gateway.

    agentdata sandbox serve --port 8080 &
    agentdata collect problems.jsonl --teacher vllm:/models/Qwen3-Coder --sandbox http://127.0.0.1:8080 \
        --harness '.peers/qwenagent/bin/python examples/harnesses/qwen_agent_sandboxfusion.py'

collect gives the harness the gateway (OPENAI_BASE_URL, OPENAI_API_KEY), the question on stdin, and the
`--sandbox` service's URL as AGENTDATA_SANDBOX_URL; each `code_interpreter` call is one SandboxFusion
`POST /run_code`, as DemyAgent ran it. `use_raw_api` makes qwen-agent send the tools over the API and read
the server's `tool_calls` (without it qwen-agent writes the tools into its own prompt and parses the calls
from the text, which the gateway then records as text).
"""

from __future__ import annotations

import json
import os
import sys
import urllib.request

from qwen_agent.agents import Assistant
from qwen_agent.tools.base import BaseTool, register_tool

RUN_TIMEOUT_S = 10


@register_tool("code_interpreter", allow_overwrite=True)
class SandboxFusionInterpreter(BaseTool):
    description = "Run a Python program in a sandbox and return what it prints (print the values you need)."
    parameters = {
        "type": "object",
        "properties": {"code": {"type": "string", "description": "The Python program to run."}},
        "required": ["code"],
    }

    def call(self, params: str | dict, **kwargs) -> str:
        code = self._verify_json_format_args(params)["code"]
        body = json.dumps({"code": code, "language": "python", "run_timeout": RUN_TIMEOUT_S}).encode()
        request = urllib.request.Request(
            os.environ["AGENTDATA_SANDBOX_URL"].rstrip("/") + "/run_code",
            data=body,
            headers={"Content-Type": "application/json"},
        )
        with urllib.request.urlopen(request, timeout=RUN_TIMEOUT_S + 30) as response:
            run = json.loads(response.read())["run_result"] or {}
        status = "" if run.get("status") == "Finished" else f"\n[{run.get('status')}]"
        return (run.get("stdout") or "") + (run.get("stderr") or "") + status


def main() -> None:
    llm = {
        "model": os.environ.get("AGENTDATA_MODEL", "agentdata"),
        "model_server": os.environ["OPENAI_BASE_URL"],
        "api_key": os.environ["OPENAI_API_KEY"],
        "generate_cfg": {"use_raw_api": True},
    }
    bot = Assistant(llm=llm, function_list=["code_interpreter"])
    *_, final = bot.run([{"role": "user", "content": sys.stdin.read()}])  # streamed: the last is the whole answer
    print(final[-1]["content"])


if __name__ == "__main__":
    main()
