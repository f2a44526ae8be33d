"""`agentdata import`'s settings."""

from __future__ import annotations

from dataclasses import dataclass, field

from agentdata.pacing import check_sandbox_max_rps, sandbox_max_rps_field
from agentdata.settings import check_fields


@dataclass
class ImportConfig:
    sandbox: str = field(
        default="local",
        metadata={
            "help": "Where code problems' tests run when an imported trace is graded: 'local', or URLs of "
            "`agentdata sandbox serve` / SandboxFusion."
        },
    )
    sandbox_max_rps: float | None = sandbox_max_rps_field()
    concurrency: int = field(
        default=8, metadata={"help": "Trajectories graded at once (code tests run in parallel).", "range": "[1, 1024]"}
    )
    shard_size: int = field(
        default=1000,
        metadata={
            "help": "Trajectories per shard: a killed import redoes at most one shard's worth.",
            "range": "[1, 1000000]",
        },
    )

    def __post_init__(self) -> None:
        check_fields(self)
        check_sandbox_max_rps(self.sandbox, self.sandbox_max_rps)
