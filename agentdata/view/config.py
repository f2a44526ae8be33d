"""`agentdata view`'s settings, each with the help text the CLI and docs show."""

from __future__ import annotations

from dataclasses import dataclass, field

from agentdata.filter.config import DEFAULT_BAND
from agentdata.settings import Band, check_fields

DEFAULT_PORT = 8765


@dataclass
class ViewConfig:
    host: str = field(
        default="127.0.0.1",
        metadata={"help": "Address to listen on; anything but this machine's loopback shows the data to the network."},
    )
    port: int = field(
        default=DEFAULT_PORT, metadata={"help": "Port to listen on (0: any free port).", "range": "[0, 65535]"}
    )
    tokenizer: str = field(
        default="smollm2",
        metadata={
            "help": "Model whose chat template and tokenizer the SFT view uses: an engine spec (smollm2, hf:DIR) "
            "or a model dir. Loaded on first use."
        },
    )
    band: Band = field(
        default=DEFAULT_BAND,
        metadata={
            "help": "Pass-rate band LO,HI (ends exclusive) a problem page judges against, unless the run is a "
            "pool's profile (then the pool's band).",
            "range": "[0, 1]",
        },
    )
    limit: int = field(
        default=1000,
        metadata={
            "help": "With --export, --sts or --atif: the most rows of each artifact written (its first ones, or the "
            "ones --where keeps).",
            "range": "[1, inf)",
        },
    )

    def __post_init__(self) -> None:
        check_fields(self)
