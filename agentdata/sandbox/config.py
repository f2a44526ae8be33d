"""The sandbox's settings in one place, each with the help text the CLI and docs show."""

from __future__ import annotations

from dataclasses import dataclass, field, fields

from agentdata.settings import check_fields


@dataclass
class SandboxConfig:
    workers: int = field(
        default=4,
        metadata={"help": "Calls that run at once; more wait in a queue.", "range": "[1, 512]", "aliases": ("-w",)},
    )
    timeout_s: float = field(
        default=30.0,
        metadata={
            "help": "Default wall-clock limit of one call, in seconds.",
            "range": "(0, 86400]",
            "flag": "--timeout",
        },
    )
    memory_mb: int = field(
        default=2048, metadata={"help": "Address-space limit of each sandbox process (MiB).", "range": "[16, inf)"}
    )
    cpu_budget_s: int = field(
        default=3600,
        metadata={
            "help": "CPU seconds one session may use in all; each call also gets timeout_s of CPU.",
            "range": "[1, inf)",
        },
    )
    max_processes: int = field(
        default=64,
        metadata={"help": "Processes and threads one session or call may have at once.", "range": "[1, 100000]"},
    )
    max_file_mb: int = field(
        default=64, metadata={"help": "Largest file sandboxed code may write (MiB).", "range": "[1, inf)"}
    )
    disk_mb: int = field(
        default=256,
        metadata={
            "help": "Disk of each session or call: all it writes, anywhere in its private view (MiB, RAM-backed).",
            "range": "[1, inf)",
        },
    )
    max_output_bytes: int = field(
        default=65536,
        metadata={
            "help": "Captured stdout and stderr, each; beyond it the head and tail are kept.",
            "range": "[1, inf)",
        },
    )
    preload: tuple[str, ...] = field(
        default=("math", "fractions", "itertools", "collections", "numpy", "sympy"),
        metadata={"help": "Modules imported once in the warm template, so calls find them ready."},
    )
    prefork: int = field(
        default=2,
        metadata={"help": "Idle executors kept forked ahead, so a call does not wait for one.", "range": "[0, 512]"},
    )
    max_sessions: int = field(
        default=256,
        metadata={
            "help": "Live sessions at most; beyond it the least recently used idle one is closed.",
            "range": "[1, 512]",
        },
    )
    isolate_network: bool = field(
        default=True, metadata={"help": "Run code in a network namespace with no interfaces up."}
    )
    isolate_filesystem: bool = field(
        default=True,
        metadata={
            "help": "Give each session or call a private, throwaway view of the filesystem (system files read-only)."
        },
    )
    drop_privileges: bool = field(
        default=True, metadata={"help": "Run each session as its own unprivileged uid (needs root to set up)."}
    )
    interrupt_grace_s: float = field(
        default=0.5,
        metadata={
            "help": "After a timeout, how long an interrupted session may take to stop before it is killed.",
            "range": "(0, 3600]",
        },
    )

    def __post_init__(self) -> None:
        check_fields(self)  # every count and limit in its range (none can be 0 or negative)
        if self.max_sessions + self.prefork + self.workers > MAX_EXECUTORS:
            raise ValueError(f"SandboxConfig: max_sessions + prefork + workers must stay under {MAX_EXECUTORS}")
        self.preload = tuple(self.preload)

    def worker_settings(self) -> dict:
        """What the worker processes need, as plain JSON."""
        return {f.name: getattr(self, f.name) for f in fields(self)}


# Each Sandbox owns a block of uids; this many executors (sessions + spares) fit in one block.
MAX_EXECUTORS = 512
