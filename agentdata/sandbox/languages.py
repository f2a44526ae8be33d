"""The languages `/run_code` runs, named as SandboxFusion names them, each as the script one call runs.

- `python` (and `python3`): the code is the script, run as SandboxFusion runs it (no echo of a
  last bare expression).
- `pytest`: as SandboxFusion's pytest runner does, the code is written to a `.py` file in the
  call's working dir and `pytest FILE` runs it there in a fresh interpreter: the call's output is
  pytest's report and its exit code pytest's (0 when every collected test passed, 1 when one
  failed, 5 when none was collected). The file may import files sent with the call.
"""

from __future__ import annotations

import json

LANGUAGES = ("python", "python3", "pytest")

# Runs inside the sandbox call. pytest runs in its own interpreter, as SandboxFusion runs it, so
# the code under test never shares a process with this wrapper.
PYTEST_SCRIPT = """import os, subprocess, sys, tempfile
_fd, _path = tempfile.mkstemp(prefix="tmp", suffix=".py", dir=os.getcwd())
with os.fdopen(_fd, "w", encoding="utf-8") as _file:
    _file.write(CODE)
sys.exit(subprocess.run([sys.executable, "-m", "pytest", _path]).returncode)
"""


def script_for(language: str, code: str) -> str:
    """The Python script that runs `code` in `language` (one of LANGUAGES); ValueError for another."""
    if language in ("python", "python3"):
        return code
    if language == "pytest":
        return PYTEST_SCRIPT.replace("CODE", json.dumps(code), 1)
    raise ValueError(f"language {language!r} is not supported; this sandbox runs {', '.join(LANGUAGES)}")
