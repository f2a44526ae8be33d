"""ExecResult: what one run of code gave back. Anything the code does is a result, never an exception."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

STATUSES = ("ok", "error", "timeout", "oom", "killed")


@dataclass
class ExecResult:
    status: str  # "ok" | "error" | "timeout" | "oom" | "killed"
    stdout: str = ""
    stderr: str = ""
    exit_code: int = 0
    duration_s: float = 0.0

    def __post_init__(self) -> None:
        if self.status not in STATUSES:
            raise ValueError(f"ExecResult.status {self.status!r} is not one of {STATUSES}")

    @property
    def ok(self) -> bool:
        return self.status == "ok"

    def output(self) -> str:
        """stdout then stderr, as a model would read them."""
        return self.stdout + self.stderr

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> ExecResult:
        return cls(
            status=str(data["status"]),
            stdout=str(data.get("stdout", "")),
            stderr=str(data.get("stderr", "")),
            exit_code=int(data.get("exit_code", 0)),
            duration_s=float(data.get("duration_s", 0.0)),
        )
