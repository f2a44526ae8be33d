"""Code execution for agentdata: isolated, warm, stateful sandboxes, local or over HTTP.

from agentdata.sandbox import Sandbox
with Sandbox() as sandbox:
    sandbox.run("x = 2", session_id="a")
    print(sandbox.run("x + 1", session_id="a").stdout)   # 3
"""

from agentdata.sandbox.base import CodeSandbox
from agentdata.sandbox.config import SandboxConfig
from agentdata.sandbox.local import Sandbox
from agentdata.sandbox.result import ExecResult

__all__ = ["CodeSandbox", "ExecResult", "RemoteSandbox", "Sandbox", "SandboxConfig", "open_sandbox"]


def __getattr__(name: str):
    # httpx is only needed for the remote client; import it when it is asked for.
    if name == "RemoteSandbox":
        from agentdata.sandbox.remote import RemoteSandbox

        return RemoteSandbox
    if name == "open_sandbox":
        from agentdata.sandbox.connect import open_sandbox

        return open_sandbox
    raise AttributeError(name)
