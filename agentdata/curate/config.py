"""curate's settings: which trajectories make the SFT set."""

from __future__ import annotations

from dataclasses import dataclass, field

from agentdata.formats.forms import SFT_TARGETS
from agentdata.formats.health import HealthLimits
from agentdata.judge.config import ScoringConfig
from agentdata.publish.config import PublishConfig
from agentdata.settings import CountBand, check_fields
from agentdata.steps.config import DedupConfig

NEAR_DUP_FIELDS = ("question", "solution")
REASONING_MODES = ("keep", "strip")


@dataclass
class CurateConfig:
    keep_incorrect: bool = field(default=False, metadata={"help": "Keep trajectories with a wrong final answer."})
    tool_calls: CountBand = field(
        default=CountBand(1, 8),
        metadata={
            "help": "MIN,MAX tool calls a kept trajectory made, both inclusive (fewer: `no_tool_call`, more: "
            "`too_many_tool_calls`). The loop's own cap is collect's --max-tool-calls.",
            "range": "[0, 1000]",
            "ends": ("min_tool_calls", "max_tool_calls"),  # 0.4's one-end names: refused, naming this band
        },
    )
    max_tool_error_ratio: float = field(
        default=0.5, metadata={"override_only": True, "help": "Largest share of failing tool calls.", "range": "[0, 1]"}
    )
    max_tokens: int = field(
        default=32768,
        metadata={
            "override_only": True,
            "help": "Longest trajectory kept (prompt + completion tokens).",
            "range": "[1, inf)",
        },
    )
    rollout_health: HealthLimits = field(
        default_factory=HealthLimits, metadata={"help": "The rollout health checks and their limits (docs/curate.md)."}
    )
    dedup: DedupConfig = field(
        default_factory=DedupConfig, metadata={"help": "Near-dedup and decontamination, as `filter` has them."}
    )
    near_dup_field: str = field(
        default="question",
        metadata={
            "override_only": True,
            "help": "question (a problem whose question repeats another's is dropped whole) or solution "
            "(trajectories whose text repeats another's).",
            "choices": NEAR_DUP_FIELDS,
        },
    )
    scoring: ScoringConfig = field(
        default_factory=ScoringConfig, metadata={"help": "A process reward model and an LLM judge (docs/curate.md)."}
    )
    max_per_problem: int | None = field(
        default=4,
        metadata={
            "help": "Most trajectories per problem; none (or 0, as before): no cap.",
            "range": "[0, inf)",
            "none_alias": 0,
        },
    )
    balance_sources: float | None = field(
        default=None,
        metadata={
            "override_only": True,
            "help": "Largest share (0-1] of the set any one source may hold.",
            "range": "(0, 1]",
        },
    )
    reasoning: str = field(
        default="keep",
        metadata={
            "help": "keep: assistant messages keep the model's thinking (`reasoning_content`, which templates such as "
            "Qwen3's render); strip: answers only.",
            "choices": REASONING_MODES,
        },
    )
    extra_steps: list[str] = field(
        default_factory=list,
        metadata={
            "help": "Filter steps run after the built-in ones, on the rows they kept: registered names or "
            "plug-ins (mypkg.steps:ShortQuestion, steps.py:ShortQuestion); "
            "repeatable.",
            "flag": "--step",
            "split": False,
        },
    )
    publish: PublishConfig = field(
        default_factory=PublishConfig, metadata={"help": "What the dataset card says (docs/provenance.md)."}
    )
    target: str = field(
        default="canonical",
        metadata={
            "help": "The form to write: canonical (agentdata's own, what `train` reads as it is), or an export for "
            "another reader: trl or verl (Parquet that TRL's SFTTrainer and verl's MultiTurnSFTDataset read; hf "
            "names the same file), openai (OpenAI fine-tuning JSONL). See docs/curate.md.",
            "flag": "--for",
            "choices": SFT_TARGETS,
        },
    )

    def __post_init__(self) -> None:
        check_fields(self)
