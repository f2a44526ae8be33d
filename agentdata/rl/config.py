"""Settings of the GRPO stage: one dataclass, defaults from the agentic-RL findings."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass
class GRPOStageConfig:
    model: str = field(default="smollm2", metadata={"help": "Policy to start from: an engine spec (smollm2, hf:DIR) or a model dir (e.g. the SFT output)."})
    rl_pool: str = field(default="", metadata={"help": "RL pool: Parquet/JSONL with `prompt` + `answer` (agentdata filter) or verl's `reward_model.ground_truth`; empty uses the built-in problems."})
    out: str = field(default="runs/train/rl", metadata={"help": "Output dir: checkpoints, metrics.jsonl, plots and the final model."})
    protocol: str = field(default="hermes", metadata={"help": "Tool-call protocol of the rollouts (hermes or codeblock)."})
    max_steps: int = field(default=20, metadata={"help": "Optimizer steps."})
    prompts_per_step: int = field(default=2, metadata={"help": "Problems per optimizer step; each gets num_generations rollouts."})
    num_generations: int = field(default=8, metadata={"help": "Rollouts per problem (the GRPO group size)."})
    max_new_tokens: int = field(default=512, metadata={"help": "Model tokens per rollout, all turns together (tool output not counted)."})
    max_tool_calls: int = field(default=4, metadata={"help": "Tool calls run per rollout."})
    max_turns: int = field(default=6, metadata={"help": "Model turns per rollout."})
    tool_timeout: float = field(default=10.0, metadata={"help": "Seconds one tool call may run."})
    tool_output_chars: int = field(default=512, metadata={"help": "Tool output shown to the model (head + tail)."})
    tools: list[str] = field(default_factory=lambda: ["code_interpreter"], metadata={"help": "Tools of the rollouts: code_interpreter, or a typed Python function as module:function or path/to/file.py:function."})
    system_prompt: str | None = field(default=None, metadata={"help": "Replaces the protocol's system prompt in rollouts (use the one the SFT data was trained with)."})
    temperature: float = field(default=1.0, metadata={"help": "Sampling temperature of the rollouts."})
    top_p: float = field(default=1.0, metadata={"help": "Nucleus sampling threshold of the rollouts."})
    learning_rate: float = field(default=1e-6, metadata={"help": "Learning rate (DemyAgent and ZeroTIR use 1e-6)."})
    epsilon: float = field(default=0.2, metadata={"help": "Lower clip range of the policy ratio."})
    epsilon_high: float = field(default=0.28, metadata={"help": "Upper clip range (clip-higher: above epsilon keeps exploration)."})
    beta: float = field(default=0.0, metadata={"help": "KL coefficient; 0 (no KL, no reference model) as in DAPO/DemyAgent."})
    loss_type: str = field(default="dapo", metadata={"help": "TRL loss aggregation; dapo is the token-level loss."})
    rewards: list[str] = field(default_factory=lambda: ["correctness", "overlong"], metadata={"help": "Reward functions, by name (correctness, overlong) or plug-in (mypkg.rewards:brevity, path/to/rewards.py:brevity); each is (prompts, completions, **kwargs) -> list[float | None]."})
    overlong_buffer: int = field(default=128, metadata={"help": "Soft overlong penalty over the last N model tokens of max_new_tokens; 0 turns it off."})
    overlong_penalty: float = field(default=1.0, metadata={"help": "Penalty at max_new_tokens (reached linearly over the buffer)."})
    code_reward: str = field(default="binary", metadata={"help": "Code problems: binary (+1 all tests pass / -1) or fraction (-1 + 2 x the fraction of tests passed); other domains stay binary."})
    tool_call_reward: bool = field(default=False, metadata={"help": "Open-AgentRL's TCR: a wrong answer with k tool rounds scores min(-0.6, -1 + 0.1 k)."})
    extra_call_penalty: float = field(default=0.0, metadata={"help": "Penalty per tool call beyond free_calls (pushes toward few, purposeful calls)."})
    free_calls: int = field(default=1, metadata={"help": "Tool calls without the extra-call penalty."})
    dynamic_sampling: bool = field(default=False, metadata={"help": "Leave groups whose rewards are all equal out of the loss (the cheap mode: no extra rollouts)."})
    online_band: tuple[float, float] | None = field(default=None, metadata={"help": "LO,HI (e.g. 0.05,0.8, ZeroTIR's dynamic filtering): a group whose pass rate is not inside (ends exclusive) is dropped and replaced by a fresh prompt's group until the batch is full; None: off."})
    online_band_rounds: int = field(default=4, metadata={"help": "Replacement rounds per step for online_band; groups still outside after them are kept."})
    lora: bool = field(default=False, metadata={"help": "Train a LoRA adapter (PEFT); merged into the saved model."})
    lora_r: int = field(default=16, metadata={"help": "LoRA rank."})
    lora_alpha: int = field(default=32, metadata={"help": "LoRA scaling alpha."})
    sandbox: str = field(default="local", metadata={
        "help": "'local', or URLs (comma separated) of `agentdata sandbox serve` or SandboxFusion."})
    use_vllm: str = field(default="auto", metadata={"help": "auto (on a GPU machine with vLLM installed), yes, or no."})
    save_steps: int = field(default=50, metadata={"help": "Save a checkpoint every N steps."})
    resume_from_checkpoint: str | None = field(default=None, metadata={"help": "Checkpoint dir to resume from, or 'last'."})
    gradient_checkpointing: bool = field(default=False, metadata={"help": "Recompute activations to save memory (TRL's default is on; it adds a forward pass per backward)."})
    bf16: bool = field(default=False, metadata={"help": "Train in bfloat16 (GPUs that support it)."})
    plots: bool = field(default=True, metadata={"help": "Write PNG plots of accuracy, tool calls and length per step at the end."})
    seed: int = field(default=0, metadata={"help": "Random seed."})
    limit: int | None = field(default=None, metadata={"help": "Use only the first N problems of the pool."})

    def __post_init__(self) -> None:
        self.online_band = parse_band(self.online_band)
        if self.online_band_rounds < 0:
            raise ValueError("online_band_rounds must be >= 0")
        if self.num_generations < 2:
            raise ValueError("num_generations must be at least 2: GRPO compares rollouts within a group")
        if self.max_steps < 1 or self.prompts_per_step < 1:
            raise ValueError("max_steps and prompts_per_step must be at least 1")
        if self.epsilon_high < self.epsilon:
            raise ValueError(f"epsilon_high ({self.epsilon_high}) below epsilon ({self.epsilon}): clip-higher needs epsilon_high >= epsilon")
        if not 0 <= self.overlong_buffer < self.max_new_tokens:
            raise ValueError(f"overlong_buffer must be in [0, max_new_tokens={self.max_new_tokens}); use 0 to turn shaping off")
        if self.tool_call_reward and self.extra_call_penalty:
            raise ValueError("tool_call_reward rewards calls on wrong answers while extra_call_penalty punishes them: pick one")
        if self.extra_call_penalty < 0 or self.free_calls < 0:
            raise ValueError("extra_call_penalty and free_calls must be >= 0")
        if self.code_reward not in ("binary", "fraction"):
            raise ValueError("code_reward must be binary or fraction")
        if self.code_reward == "fraction" and self.tool_call_reward:
            raise ValueError("tool_call_reward is defined on correct/wrong answers: use code_reward binary with it")
        if self.use_vllm not in ("auto", "yes", "no"):
            raise ValueError("use_vllm must be auto, yes or no")
        if self.protocol not in ("hermes", "codeblock"):
            raise ValueError("protocol must be hermes or codeblock")


def parse_band(value: object) -> tuple[float, float] | None:
    """`0.05,0.8`, [0.05, 0.8] or None as (LO, HI) with 0 <= LO < HI <= 1."""
    if value is None or value == "":
        return None
    parts = value.split(",") if isinstance(value, str) else list(value)  # type: ignore[call-overload]
    try:
        low, high = (float(part) for part in parts)
    except (TypeError, ValueError):
        raise ValueError(f"online_band must be LO,HI (e.g. 0.05,0.8), got {value!r}") from None
    if not 0 <= low < high <= 1:
        raise ValueError(f"online_band must have 0 <= LO < HI <= 1, got {value!r}")
    return low, high
