"""The GRPO series the experiment's report reads from a stage's metrics.jsonl (report.py, markdown.py, plots.py)."""

# The curves of a GRPO arm (keys of its metrics.jsonl; the held-out one is eval/avg@K, found per run).
CURVE_KEYS = (
    "eval/tools/call_frequency",
    "eval/tools/error_rate",
    "eval/completions/model_tokens",
    "tools/call_frequency",
    "tools/error_rate",
    "completions/model_tokens",
    "entropy",
    "frac_reward_zero_std",
    "accuracy",
)
# The share of a step's groups whose rewards are all equal (rl/trainer.py's FLAT_GROUPS_KEY, logged every
# step since issue 40); a run logged before it has only TRL's frac_reward_zero_std, which stands in for it.
FLAT_GROUPS = "groups/flat_share"
# The samples of a step whose advantage is not zero, so that carry a gradient (rl/trainer.py's
# GRADIENT_SAMPLES_KEY, logged every step since issue 49): what a pool's band is meant to raise.
GRADIENT_SAMPLES = "groups/gradient_samples"
# ZeroTIR's three series, each tested for a trend against steps: (name, training rollouts' key, held-out key).
TREND_SERIES = (
    ("tool calls per response", "tools/call_frequency", "eval/tools/call_frequency"),
    ("response length (model tokens)", "completions/model_tokens", "eval/completions/model_tokens"),
    ("accuracy", "accuracy", "eval/avg@k"),
)
