"""A math-verify worker process: reads JSON requests on stdin, writes one JSON verdict line each
(`true`, `false`), after a first `"ready"` once math-verify is imported.

Run by `agentdata.verify.workers`; the parent enforces the time limit by killing this
process, so math-verify's own signal-based timeouts are switched off here
(`parsing_timeout=None`, `timeout_seconds=None`). A memory cap turns a runaway sympy
computation into a MemoryError, which math-verify reports as "not equal".
"""

from __future__ import annotations

import json
import logging
import resource
import sys


def _limit_memory(megabytes: int) -> None:
    if megabytes > 0:
        limit = megabytes * 1024 * 1024
        resource.setrlimit(resource.RLIMIT_AS, (limit, limit))


def main() -> None:
    memory_mb = int(sys.argv[1]) if len(sys.argv) > 1 else 0
    logging.disable(logging.WARNING)  # math-verify warns once that its timeout is off: that is by design
    from math_verify import parse, verify

    _limit_memory(memory_mb)
    out = sys.stdout
    out.write(json.dumps("ready") + "\n")
    out.flush()
    for line in sys.stdin:
        request = json.loads(line)
        try:
            gold = parse(f"${request['gold']}$", parsing_timeout=None)
            answer = parse(f"\\boxed{{{request['answer']}}}", parsing_timeout=None)
            verdict = bool(gold) and bool(answer) and verify(gold, answer, timeout_seconds=None)
        except (Exception, RecursionError, MemoryError):  # a broken expression is a wrong answer
            verdict = False
        out.write(json.dumps(verdict) + "\n")
        out.flush()


if __name__ == "__main__":
    main()
