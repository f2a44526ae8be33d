"""Eval's settings: the agent loop (composed) plus sampling, the tool-call sweep and the benchmark columns."""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any

from agentdata.agent.config import MAX_SAMPLES, CollectConfig, LoopConfig, ShardingConfig, engine_options_field
from agentdata.settings import check_fields


@dataclass
class EvalConfig:
    """How each model is run. The loop's own `max_tool_calls` is replaced by each of `tool_call_budgets`."""

    samples: int = field(
        default=4,
        metadata={
            "help": "Responses per problem: avg@k, pass@k, maj@k.",
            "range": f"[1, {MAX_SAMPLES}]",
            "flag": "--k",
            "aliases": ("-k",),
        },
    )
    tool_call_budgets: list[int] = field(
        default_factory=lambda: [4],
        metadata={
            "help": "The loop's max_tool_calls (tool calls run per response), one eval per value: 4, or a list "
            "such as 1,2,4,8 that sweeps it.",
            "range": "[0, 1000]",
            "flag": "--max-tool-calls",
        },
    )
    concurrency: int = field(default=16, metadata={"help": "Responses in flight at once.", "range": "[1, 100000]"})
    seed: int = field(
        default=0, metadata={"help": "Base seed; each response derives its own.", "range": "[0, 4294967295]"}
    )
    limit: int | None = field(
        default=None, metadata={"help": "Use only the first N problems of each benchmark.", "range": "[1, inf)"}
    )
    question_field: str | None = field(
        default=None, metadata={"help": "Column holding the question (default: recognised names)."}
    )
    answer_field: str | None = field(
        default=None, metadata={"help": "Column holding the gold answer (default: recognised names)."}
    )
    engine_options: dict[str, Any] = engine_options_field()
    loop: LoopConfig = field(default_factory=LoopConfig, metadata={"help": "The agent-loop settings."})
    sharding: ShardingConfig = field(
        default_factory=ShardingConfig,
        metadata={"help": "Which part of every run this process makes, or every part on Ray."},
    )

    def __post_init__(self) -> None:
        check_fields(self)
        if not self.tool_call_budgets:
            raise ValueError("tool_call_budgets: give at least one number, e.g. --max-tool-calls 4 or 1,2,4,8")
        self.tool_call_budgets = sorted(set(self.tool_call_budgets))

    def collect_config(self, spec: str, budget: int) -> CollectConfig:
        """The run of model `spec` with `budget` tool calls, as it runs (its protocol read from its dir when
        unset: CollectConfig.for_run)."""
        return CollectConfig(
            model=spec,
            samples=self.samples,
            concurrency=self.concurrency,
            seed=self.seed,
            engine_options=self.engine_options,
            loop=replace(self.loop, max_tool_calls=budget),
            sharding=self.sharding,
        ).for_run()
