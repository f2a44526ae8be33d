"""The agent-loop settings (`LoopConfig`) and collect's settings, which compose them.

`LoopConfig` is defined once; collect, filter's profiling, eval and GRPO each hold one as
their `loop` field, so every stage runs the loop with the same fields and the same defaults.
This module is light (no model, no Arrow) so the CLI can build its options from it quickly.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any

from agentdata.agent.shards import MAX_SHARDS, Shard
from agentdata.engines.base import (
    DEFAULT_MAX_NEW_TOKENS,
    DEFAULT_TEMPERATURE,
    DEFAULT_TOP_P,
    ROLLOUT_TEMPERATURE,
    Sampling,
)
from agentdata.engines.defaults import DEFAULT_ENGINE, DEFAULT_PROTOCOL
from agentdata.errors import UserError
from agentdata.formats import get_protocol
from agentdata.formats.tool_output import DEFAULT_TOOL_OUTPUT_CHARS
from agentdata.pacing import check_sandbox_max_rps, sandbox_max_rps_field
from agentdata.settings import SettingError, check_fields, flatten
from agentdata.tools import DEFAULT_TOOLS

# An upper bound that keeps a typo (--samples 10^23) from running until killed; docs/input-files.md.
MAX_SAMPLES = 100_000
# An engine over a model in this process batches every waiting request into one generate call,
# so a run that generates with it keeps all its rollouts in flight (bigger batches, fewer waves).
MAX_BATCHED_ROLLOUTS = 64


def all_in_flight(rollouts: int) -> int:
    """The concurrency that keeps `rollouts` in flight at once, up to MAX_BATCHED_ROLLOUTS."""
    return max(1, min(MAX_BATCHED_ROLLOUTS, rollouts))


@dataclass
class LoopConfig:
    protocol: str | None = field(
        default=None,
        metadata={
            "help": "Tool-call protocol: codeblock, hermes, qwen3coder or native; unset: the one the model was "
            f"trained in (its dir's agentdata.json, written by agentdata train), else {DEFAULT_PROTOCOL}."
        },
    )
    max_tool_calls: int = field(
        default=4, metadata={"help": "Tool calls run per trajectory; one more is refused.", "range": "[0, 1000]"}
    )
    max_turns: int = field(
        default=8,
        metadata={"override_only": True, "help": "Model turns (generate calls) per trajectory.", "range": "[1, 1000]"},
    )
    max_new_tokens: int = field(
        default=DEFAULT_MAX_NEW_TOKENS,
        metadata={"help": "Model tokens per trajectory, all turns together.", "range": "[1, 10000000]"},
    )
    temperature: float = field(
        default=DEFAULT_TEMPERATURE, metadata={"help": "Sampling temperature (0 = greedy).", "range": "[0, 10]"}
    )
    top_p: float = field(
        default=DEFAULT_TOP_P,
        metadata={"help": "Nucleus sampling threshold.", "range": "(0, 1]", "override_only": True},
    )
    tool_output_chars: int = field(
        default=DEFAULT_TOOL_OUTPUT_CHARS,
        metadata={"help": "Tool output shown to the model, head and tail.", "range": "[1, inf)", "override_only": True},
    )
    tool_timeout: float = field(
        default=10.0, metadata={"help": "Seconds one tool call may run.", "range": "(0, 86400]", "override_only": True}
    )
    system_prompt: str | None = field(
        default=None,
        metadata={
            "help": "Overrides the protocol's system prompt; unset: the one the model was trained with (its "
            "agentdata.json, when it was trained in this protocol), else the protocol's.",
            "override_only": True,
        },
    )
    sandbox: str = field(
        default="local",
        metadata={"help": "'local', or URLs (comma separated) of `agentdata sandbox serve` or SandboxFusion."},
    )
    sandbox_max_rps: float | None = sandbox_max_rps_field()
    tools: list[str] = field(
        default_factory=lambda: list(DEFAULT_TOOLS),
        metadata={
            "help": "Tools the model may call: code_interpreter, a typed Python function as module:function or "
            "path/to/file.py:function (its JSON schema is derived), or mcp:COMMAND / mcp:URL (every tool of an MCP "
            "server, its schemas read from it). --tool adds one beside the file's or default list (repeatable).",
            "flag": "--tool",
            "split": False,
            "append": True,
        },
    )

    def __post_init__(self) -> None:
        check_fields(self)
        check_sandbox_max_rps(self.sandbox, self.sandbox_max_rps)
        if self.protocol is None:  # unset: the model's own, known once the model is (for_model)
            return
        try:  # when the settings are built, before a model loads or a run dir is written
            get_protocol(self.protocol)
        except UserError as error:
            raise SettingError(
                "protocol", self.protocol, str(error).removeprefix(f"plug-in {self.protocol!r}: ")
            ) from None

    def for_model(self, spec: str | None) -> LoopConfig:
        """This loop for the model `spec` names: an unset protocol is the one the model was trained in
        (agentdata.json in its dir), else the default; an unset system prompt is the one it was trained
        with, when that was in this protocol."""
        from agentdata.engines.trained import read_trained_prompt

        trained = read_trained_prompt(spec) if self.protocol is None or self.system_prompt is None else None
        protocol = self.protocol or (trained.protocol if trained else DEFAULT_PROTOCOL)
        system_prompt = self.system_prompt
        if system_prompt is None and trained is not None and trained.protocol == protocol:
            system_prompt = trained.system_prompt
        if (protocol, system_prompt) == (self.protocol, self.system_prompt):
            return self
        return replace(self, protocol=protocol, system_prompt=system_prompt)

    def rollout_sampling(self, seed: int | None = None) -> Sampling:
        """How this loop's rollouts sample, as one value (the stop strings are the protocol's, added per request)."""
        return Sampling(self.temperature, self.top_p, self.max_new_tokens, seed)

    def sampling(self) -> dict[str, Any]:
        """What a trajectory records of how it was sampled and bounded."""
        return {
            "temperature": self.temperature,
            "top_p": self.top_p,
            "max_new_tokens": self.max_new_tokens,
            "max_tool_calls": self.max_tool_calls,
            "max_turns": self.max_turns,
        }


EXECUTORS = ("local", "ray")


@dataclass
class ShardingConfig:
    """Which part of a run this process makes (all of it, or one shard: agent/shards.py), or every shard as
    a task on a Ray cluster (agent/ray_executor.py)."""

    shard: Shard | None = field(
        default=None,
        metadata={
            "help": "I/N: make only the trajectories of shard I (0 to N-1) of N, a fixed split by problem id, in "
            "files of its own in the run dir (collect's and eval's --out, filter's profile dir); N processes (on N "
            "machines, shared storage) fill one run dir, each resumed on its own, and the same command without "
            "--shard reads them as one run. Unset: the whole run."
        },
    )
    executor: str = field(
        default="local",
        metadata={
            "help": "local: this process; ray: every shard as a task on an existing Ray cluster (ray_address=), "
            "into a run dir on storage every node sees; a shard whose worker or node died is run again (it resumes); "
            "one progress bar for all.",
            "choices": EXECUTORS,
        },
    )
    shards: int | None = field(
        default=None,
        metadata={
            "help": "With --executor ray: how many shards the run is split into, one Ray task each. Unset: the "
            "split --out already has, else one per ray_cpus the cluster has.",
            "range": f"[1, {MAX_SHARDS}]",
            "override_only": True,
        },
    )
    ray_address: str = field(
        default="auto",
        metadata={
            "help": "With --executor ray: the running cluster, as ray.init(address=...) takes it (auto: the one "
            "RAY_ADDRESS names, else the one `ray start` began on this machine; ray://HOST:10001 a remote one).",
            "override_only": True,
        },
    )
    ray_cpus: float = field(
        default=1.0,
        metadata={
            "help": "With --executor ray: CPUs one shard's task asks for.",
            "range": "(0, 1024]",
            "override_only": True,
        },
    )
    ray_retries: int = field(
        default=3,
        metadata={
            "help": "With --executor ray: times a shard whose worker or node died is run again.",
            "range": "[0, 100]",
            "override_only": True,
        },
    )

    def __post_init__(self) -> None:
        check_fields(self)
        if self.shard is not None and self.executor != "local":
            raise SettingError(
                "shard", str(self.shard), f"runs one shard in this process; --executor {self.executor} runs them all"
            )
        if self.shards is not None and self.executor == "local":
            raise SettingError("shards", self.shards, "splits a run for --executor ray; run one part with --shard I/N")


# The agent-loop settings a --harness run cannot honour: the harness has its own protocol, prompt, tools and
# turns. What reaches it is the sampling (the gateway fills its requests' unset fields) and the sandbox.
HARNESS_UNHONOURED = (
    "protocol",
    "max_tool_calls",
    "max_turns",
    "tools",
    "system_prompt",
    "tool_output_chars",
    "tool_timeout",
)


def check_harness_settings(command: str, loop: LoopConfig) -> None:
    """A --harness command that can be run, with no loop setting it would silently ignore: refused when the
    settings are built, before any run dir is made (so the corrected command works on the same --out)."""
    from agentdata.agent.harness_command import harness_argv

    harness_argv(command)
    defaults = LoopConfig()
    for name in HARNESS_UNHONOURED:
        value = getattr(loop, name)
        if value != getattr(defaults, name):
            raise SettingError(
                name,
                value,
                "a --harness run cannot honour it: the harness has its own protocol, prompt, tools and turns "
                "(only temperature, top_p, max_new_tokens, the seed and the sandbox reach it); leave it unset",
            )


def engine_options_field() -> Any:
    """The engine's options (collect's, filter's profile, eval's): `--engine-option KEY=VALUE`, and `--model NAME`
    for the name an openai: server serves the model under (its `model` key, over `--engine-option model=`)."""
    return field(
        default_factory=dict,
        metadata={
            "help": "KEY=VALUE passed to the engine (repeatable; VALUE is JSON or text).",
            "flag": "--engine-option",
            "key_flags": {"model": "Model name for openai: engines (an engine option)."},
        },
    )


def rollout_loop() -> LoopConfig:
    """The loop of RL rollouts: the shared defaults at ROLLOUT_TEMPERATURE (engines/base.py). GRPO's rollouts
    run this loop, and filter profiles the student with it so the pass rates are the ones GRPO will see."""
    return LoopConfig(temperature=ROLLOUT_TEMPERATURE)


@dataclass
class CollectConfig:
    """A run of the agent loop over problems: collect's teacher, filter's profile of the student, eval's model
    on a benchmark, the policy evaluated during training."""

    model: str = field(
        default=DEFAULT_ENGINE,
        metadata={
            "help": "The model that runs the rollouts (collect's --teacher, filter's --student), an engine spec: "
            "smollm2-tir (SmolLM2 shown worked examples of running code), smollm2 (the plain model), hf:PATH, "
            "vllm:PATH, openai:URL[,URL].",
            "flag": "--teacher",
            "was": ("teacher",),
        },
    )
    samples: int = field(default=1, metadata={"help": "Trajectories per problem.", "range": f"[1, {MAX_SAMPLES}]"})
    concurrency: int = field(default=16, metadata={"help": "Trajectories in flight at once.", "range": "[1, 100000]"})
    seed: int = field(
        default=0, metadata={"help": "Base seed; each trajectory derives its own.", "range": "[0, 4294967295]"}
    )
    limit: int | None = field(default=None, metadata={"help": "Use only the first N problems.", "range": "[1, inf)"})
    shard_size: int = field(
        default=64, metadata={"help": "Trajectories per Parquet shard.", "range": "[1, 1000000]", "override_only": True}
    )
    engine_options: dict[str, Any] = engine_options_field()
    retry_errors: bool = field(
        default=True,
        metadata={
            "help": "On resume, run again the trajectories that ended in an error (an engine or sandbox failure).",
            "override_only": True,
        },
    )
    harness: str | None = field(
        default=None,
        metadata={
            "help": "An agent harness as the teacher: COMMAND (with its arguments) run once per trajectory against "
            "a recording gateway in front of the teacher engine (OPENAI_BASE_URL, OPENAI_API_KEY; the question on "
            "stdin, in the file AGENTDATA_QUESTION_FILE, in AGENTDATA_QUESTION and for {question}), which fills what "
            "its requests leave unset with the run's sampling; docs/harnesses.md. Unset: the built-in agent loop."
        },
    )
    harness_timeout: float = field(
        default=600.0,
        metadata={
            "help": "With --harness: seconds one run may take; then its process group is killed.",
            "range": "(0, 86400]",
            "override_only": True,
        },
    )
    harness_retries: int = field(
        default=2,
        metadata={
            "help": "With --harness: times a run that failed before its model answered once is started again.",
            "range": "[0, 100]",
            "override_only": True,
        },
    )
    loop: LoopConfig = field(default_factory=LoopConfig, metadata={"help": "The agent-loop settings."})
    sharding: ShardingConfig = field(
        default_factory=ShardingConfig,
        metadata={"help": "Which part of the run this process makes, or every part on Ray."},
    )

    def __post_init__(self) -> None:
        check_fields(self)
        if self.harness is not None:
            check_harness_settings(self.harness, self.loop)

    def for_run(self) -> CollectConfig:
        """These settings as a run uses them: an unset protocol and system prompt are the ones the model was
        trained with (its dir's agentdata.json, engines/trained.py). Reads the model's dir, so it is called
        where a run starts, not when the settings are built. A harness speaks its own protocol: none is set."""
        if self.harness is not None:
            return self
        loop = self.loop.for_model(self.model)
        return self if loop is self.loop else replace(self, loop=loop)

    def settings(self) -> dict[str, Any]:
        """What the run dir's manifest records: every field, flat (engine options may hold secrets). The model
        is recorded as `teacher` and the model name an openai: server serves as `model`, the keys every run dir
        has had, so an older run dir resumes and a cache keyed on these settings stays the same."""
        flat = flatten(self)
        recorded = {
            "teacher" if key == "model" else key: value for key, value in flat.items() if key != "engine_options"
        }
        return {**recorded, "model": self.engine_options.get("model")}  # part of the model's identity
