"""What a set that may leave the lab is written with: the license its card names."""

from __future__ import annotations

from dataclasses import dataclass, field

from agentdata.settings import check_fields


@dataclass
class PublishConfig:
    license: str | None = field(
        default=None,
        metadata={
            "help": "License the dataset card names (a Hub license id: apache-2.0, mit, cc-by-4.0, other, ...); "
            "unset: unknown."
        },
    )

    def __post_init__(self) -> None:
        check_fields(self)
