"""What the same-run comparisons in bench/ share.

- `same_work`: a ratio of two arms' times means something only when both did the same work (the same
  rows kept, the same tokens trained, tool calls made on both sides). Each bench checks that before it
  reports a ratio, and stops with one line naming what differed when it does not hold.
- `same_grpo_work`: the GRPO comparison's form of it (tool calls on both sides, tokens).
- `run_child`: one command in a child process, with its wall time and its own peak RSS.
- `checkout_of`: the repository at another commit (e.g. before a speed-up), exported to /tmp, so the
  same run can time the old code on the same files as a baseline.
- `compare_checkouts`: that comparison as bench_eval and bench_filter run it: this checkout against
  the baseline's, alternating, checked, the ratio of the best times, and each arm's profile.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]


class DifferentWork(SystemExit):
    """The two arms of a comparison did not do the same work; the bench reports no ratio."""


def same_work(bench: str, what: str, ours, theirs, tolerance: float = 0.0, at_least: float = 0.0) -> None:
    """Stop `bench` unless `ours` and `theirs` agree: equal, or (numbers) within `tolerance` of the larger
    one (and at least `at_least` apart allowed), or (Arrow tables) equal in schema and content."""
    if hasattr(ours, "equals"):
        agree = ours.equals(theirs)
        ours, theirs = f"{len(ours)} rows", f"{len(theirs)} rows, not the same table"
    elif tolerance or at_least:
        agree = abs(ours - theirs) <= max(at_least, tolerance * max(abs(ours), abs(theirs)))
    else:
        agree = ours == theirs
    if not agree:
        shown = [text if len(text) < 200 else text[:200] + "..." for text in (repr(ours), repr(theirs))]
        raise DifferentWork(f"{bench}: {what} differ between the arms ({shown[0]} vs {shown[1]}): no ratio reported")


def same_grpo_work(runs: dict[str, list[dict]]) -> None:
    """GRPO, plain TRL against ours (bench_train.py): both sides must call the tool, about as often (within
    0.25 calls per response), and train on about as many tokens (within 10%); else the step times compare
    two different jobs (as when ours ran codeblock rollouts of a model taught hermes calls: no call, reward
    -1 at every step, and a speed ratio reported all the same). `runs` maps each side to its runs' logs."""
    calls = {
        side: sum(c for run in results for c in run["tool_calls_per_response"])
        / sum(len(run["tool_calls_per_response"]) for run in results)
        for side, results in runs.items()
    }
    tokens = {side: sum(run["num_tokens"][-1] for run in results) for side, results in runs.items()}
    for side, frequency in calls.items():
        if frequency <= 0:
            raise DifferentWork(
                f"bench_train grpo: {side} made no tool call (reward {runs[side][-1]['reward']}): no ratio reported"
            )
    same_work("bench_train grpo", "tool calls per response", calls["ours"], calls["plain"], at_least=0.25)
    same_work("bench_train grpo", "tokens trained on", tokens["ours"], tokens["plain"], tolerance=0.1)


def run_child(checkout: Path, arguments: list[str], profile_to: Path | None = None) -> tuple[float, float, str]:
    """`python ARGUMENTS` with `checkout` first on the path: (wall seconds, peak RSS in GB, its stdout).
    With `profile_to`, under cProfile (its stats written there)."""
    command = [sys.executable, *(["-m", "cProfile", "-o", str(profile_to)] if profile_to else []), *arguments]
    env = {**os.environ, "PYTHONPATH": str(checkout), "HF_HUB_OFFLINE": "1", "TOKENIZERS_PARALLELISM": "false"}
    with tempfile.TemporaryFile("w+") as stdout, tempfile.TemporaryFile("w+") as stderr:
        started = time.perf_counter()
        child = subprocess.Popen(command, stdout=stdout, stderr=stderr, text=True, env=env, cwd=checkout)
        _, status, usage = os.wait4(child.pid, 0)
        seconds = time.perf_counter() - started
        child.returncode = os.waitstatus_to_exitcode(status)
        stdout.seek(0)
        stderr.seek(0)
        if child.returncode:
            raise SystemExit(f"{' '.join(arguments[:4])} (from {checkout}) failed:\n{stderr.read()[-3000:]}")
        return seconds, usage.ru_maxrss / 2**20, stdout.read()


def checkout_of(ref: str) -> Path:
    """The repository at `ref`, exported with `git archive` (no worktree: the repository is left as it is)."""
    commit = subprocess.check_output(["git", "-C", str(ROOT), "rev-parse", "--verify", ref], text=True).strip()
    folder = Path(tempfile.gettempdir()) / f"agentdata-checkout-{commit[:12]}"
    if not (folder / "agentdata").is_dir():
        folder.mkdir(parents=True, exist_ok=True)
        archive = subprocess.Popen(["git", "-C", str(ROOT), "archive", commit], stdout=subprocess.PIPE)
        subprocess.run(["tar", "-x", "-C", str(folder)], stdin=archive.stdout, check=True)
        if archive.wait():
            raise SystemExit(f"git archive {commit} failed")
    return folder


def compare_checkouts(
    bench: str,
    args: Any,
    cache: Path,
    run_one: Callable[[str, Path, Path | None], dict],
    check: Callable[[dict, dict], None],
    hidden: tuple[str, ...] = (),
) -> dict[str, list[dict]]:
    """This checkout ("ours") against `args.baseline_ref`'s (in a `--smoke` run against itself, so the
    comparison and its checks run too), alternating for `args.rounds`: `run_one(arm, checkout, profile_to)`
    runs the command once and returns its numbers (`seconds` among them; `hidden` keys are not printed).
    `check(ours, baseline)` stops the bench (same_work) unless the last runs did the same work; then the
    ratio of the best times; with `args.profile`, each arm once more under cProfile, its top entries."""
    arms = {"ours": ROOT}
    if args.baseline_ref:
        arms["baseline"] = checkout_of(args.baseline_ref)
    elif args.smoke:
        arms["baseline"] = ROOT
    results: dict[str, list[dict]] = {name: [] for name in arms}
    for _ in range(args.rounds):
        for name, checkout in arms.items():
            results[name].append(run_one(name, checkout, None))
            shown = {key: value for key, value in results[name][-1].items() if key not in hidden}
            print(f"{bench}, {name} ({checkout}): {json.dumps(shown)}", flush=True)
    if len(arms) == 2:
        check(results["ours"][-1], results["baseline"][-1])
        best = {name: min(run["seconds"] for run in runs) for name, runs in results.items()}
        print(f"ratio baseline/ours (best of {args.rounds}): {best['baseline'] / best['ours']:.1f}x; the same work")
    if args.profile:
        for name, checkout in arms.items():
            stats = cache / f"{name}.prof"
            run_one(name, checkout, stats)
            print(f"--- profile, {name}\n{profile_top(stats, args.profile)}")
    return results


def profile_top(stats_file: Path, entries: int) -> str:
    """The top `entries` of a cProfile stats file by cumulative time, as text."""
    import io
    import pstats

    text = io.StringIO()
    pstats.Stats(str(stats_file), stream=text).sort_stats("cumulative").print_stats(entries)
    return text.getvalue()


def load() -> float:
    return round(os.getloadavg()[0], 1)


def tiny_llama_config(tokenizer, **changes):
    """The 2-layer, width-64 Llama config of the tests and smoke runs, for SmolLM2's tokenizer (`changes` on top)."""
    from transformers import LlamaConfig

    settings = {
        "vocab_size": len(tokenizer),
        "hidden_size": 64,
        "intermediate_size": 128,
        "num_hidden_layers": 2,
        "num_attention_heads": 4,
        "num_key_value_heads": 2,
        "max_position_embeddings": 4096,
        "bos_token_id": tokenizer.bos_token_id,
        "eos_token_id": tokenizer.eos_token_id,
        "pad_token_id": tokenizer.pad_token_id,
    }
    return LlamaConfig(**{**settings, **changes})


def tiny_model(out: Path, tokenizer=None) -> Path:
    """A random 2-layer Llama (width 64) with SmolLM2's tokenizer and chat template, saved to `out`: what a
    --smoke run uses instead of SmolLM2, so it runs every code path of a bench in seconds."""
    import torch
    from transformers import AutoTokenizer, LlamaForCausalLM

    from agentdata.engines import smollm2_model_dir

    if (out / "config.json").is_file():
        return out
    tokenizer = tokenizer or AutoTokenizer.from_pretrained(smollm2_model_dir())
    torch.manual_seed(0)
    LlamaForCausalLM(tiny_llama_config(tokenizer, tie_word_embeddings=True)).save_pretrained(out)
    tokenizer.save_pretrained(out)
    return out


def tiny_vllm_model(out: Path, tokenizer=None) -> Path:
    """A random 2-layer Llama whose attention heads are 64 wide (vLLM's CPU attention takes 32 and up), with
    SmolLM2's tokenizer, saved to `out`: the vLLM benches', checks' and tests' smoke model."""
    import torch
    from transformers import LlamaForCausalLM

    from tests.train_fixtures import smollm2_tokenizer

    tokenizer = tokenizer or smollm2_tokenizer()
    config = tiny_llama_config(tokenizer, hidden_size=128, intermediate_size=256, num_attention_heads=2)
    torch.manual_seed(0)
    LlamaForCausalLM(config).save_pretrained(out)
    tokenizer.save_pretrained(out)
    return out
