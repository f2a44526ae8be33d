"""What a set that may leave the lab is written with: its license, what becomes of secrets, where it is pushed."""

from __future__ import annotations

from dataclasses import dataclass, field

from agentdata.publish.secrets import SECRET_MODES
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

    secrets: str = field(
        default="redact",
        metadata={
            "help": "Secrets (API keys, tokens, private keys, passwords in URLs; detect-secrets' detectors) in the "
            "rows written: redact (replaced by [REDACTED <kind>]), drop (the row, as `secret`) or keep (no scan). "
            "Counted in the report and on the card.",
            "choices": SECRET_MODES,
        },
    )

    push_to_hub: str | None = field(
        default=None,
        metadata={
            "help": "Upload the set and its card to this Hugging Face dataset repo (OWNER/NAME; private unless "
            "--public) once written; checked (id, network, token) before any work."
        },
    )
    public: bool = field(default=False, metadata={"help": "Make a new --push-to-hub repo public."})

    def __post_init__(self) -> None:
        check_fields(self)
