"""filter's settings: the profile of the student (`ProfileConfig`) and the pool's (`PoolConfig`: the pass-rate
band, dedup, decontamination and the diverse selection).

The profiling side (which student, k rollouts, the agent loop) is a collect run with defaults of its own:
k rollouts per problem in GRPO's rollout loop, so `run_filter` called from Python and `agentdata filter`
profile alike.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from agentdata.agent.config import CollectConfig, LoopConfig, rollout_loop
from agentdata.publish.config import PublishConfig
from agentdata.settings import Band, check_fields
from agentdata.steps.config import DedupConfig

# filter's band: a problem the student solves sometimes (neither never nor always). The viewer judges by it too.
DEFAULT_BAND = Band(0.0, 1.0)

POOL_FORMATS = ("agentdata", "verl")
DEFAULT_K = 4  # student rollouts per problem when none are given
EMBEDDINGS = ("auto", "sentence-transformers", "tfidf")
_COLLECT_FIELDS = CollectConfig.__dataclass_fields__


@dataclass
class ProfileConfig(CollectConfig):
    """The student's profile: a collect run of DEFAULT_K rollouts per problem in the loop GRPO's rollouts run
    (`rollout_loop`, temperature 1.0), the pool's consumer, so the pass rates are the ones training sees."""

    samples: int = field(default=DEFAULT_K, metadata=_COLLECT_FIELDS["samples"].metadata)
    loop: LoopConfig = field(default_factory=rollout_loop, metadata=_COLLECT_FIELDS["loop"].metadata)


@dataclass
class PoolConfig:
    band: Band = field(
        default=DEFAULT_BAND,
        metadata={"help": "Keep LO < pass rate < HI (ends exclusive), given as LO,HI.", "range": "[0, 1]"},
    )
    size: int | None = field(
        default=None,
        metadata={
            "help": "Problems to select evenly across clusters and sources; unset keeps all.",
            "range": "[1, inf)",
        },
    )
    clusters: int | None = field(
        default=None,
        metadata={
            "override_only": True,
            "help": "K-means clusters (default about sqrt(problems)).",
            "range": "[1, inf)",
        },
    )
    embedding: str = field(
        default="auto",
        metadata={"override_only": True, "help": "auto | sentence-transformers | tfidf.", "choices": EMBEDDINGS},
    )
    dedup: DedupConfig = field(
        default_factory=DedupConfig,
        metadata={"help": "Near-dedup (of questions) and decontamination, as `curate` has them."},
    )
    domain_mix: dict[str, float] | None = field(
        default=None,
        metadata={
            "override_only": True,
            "help": "Target domain shares after the band, e.g. math=0.5,code=0.3,science=0.2; a short domain "
            "gives what "
            "it lacks to the others (see filter/mix.py).",
            "range": "[0, inf)",
            "parse": "agentdata.filter.mix:parse_domain_mix",
        },
    )
    publish: PublishConfig = field(
        default_factory=PublishConfig, metadata={"help": "What the dataset card says (docs/provenance.md)."}
    )
    format: str = field(
        default="agentdata", metadata={"help": "agentdata or verl output columns.", "choices": POOL_FORMATS}
    )
    extra_steps: list[str] = field(
        default_factory=list,
        metadata={
            "override_only": True,
            "help": "Filter steps run after the built-in ones, before the selection: registered names or "
            "plug-ins (mypkg.steps:ShortQuestion, steps.py:ShortQuestion); "
            "repeatable.",
            "flag": "--step",
            "split": False,
        },
    )
    seed: int = field(default=0, metadata={"help": "Seed for clustering.", "range": "[0, 4294967295]"})
    k_adaptive: int | None = field(
        default=None,
        metadata={
            "help": "Profile again, up to this many rollouts, only the problems whose pass-rate interval (Wilson, 95%) "
            "straddles an edge of the band; unset: one round of k.",
            "range": "[2, 100000]",
        },
    )
    min_valid_share: float = field(
        default=0.5,
        metadata={
            "override_only": True,
            "help": "A problem whose rollouts ended in an engine or sandbox error more often than this leaves is "
            "dropped as `too_many_errors` (errors are no wrong answers and count in no pass rate).",
            "range": "(0, 1]",
        },
    )

    def __post_init__(self) -> None:
        check_fields(self)
