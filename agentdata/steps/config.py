"""The near-dedup and decontamination settings that curate and filter share (`DedupConfig`).

Defined once and composed into `CurateConfig` and `PoolConfig` as their `dedup` field; its
fields stay flat on the command line and in settings files (`--near-dup-threshold`,
`decontam_files:`), as `LoopConfig`'s do. Light on purpose (no polars): the CLI builds its
options from it.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from agentdata.settings import check_fields


@dataclass
class DedupConfig:
    near_dup_threshold: float | None = field(
        default=0.8,
        metadata={
            "help": "MinHash Jaccard threshold for `near_duplicate`; none (or 0, as before) turns near-dedup off.",
            "range": "[0, 1]",
            "none_alias": 0,
        },
    )
    near_dup_ngram: int = field(
        default=5,
        metadata={"override_only": True, "help": "Word n-gram size of the MinHash shingles.", "range": "[1, 100]"},
    )
    decontam_files: list[str] = field(
        default_factory=list,
        metadata={
            "help": "Benchmark file to decontaminate against (repeatable).",
            "flag": "--decontam",
            "split": False,
        },
    )
    decontam_ngram: int = field(
        default=13,
        metadata={"override_only": True, "help": "Word n-gram size for decontamination.", "range": "[1, 100]"},
    )

    def __post_init__(self) -> None:
        check_fields(self)
