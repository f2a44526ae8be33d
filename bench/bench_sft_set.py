"""The SFT set from curate to train's data preparation, this checkout against another commit's (issue 42).

Two measures, each arm in a child process (wall time and peak RSS), alternating, on the same files:
  1. `curate` with its default settings on bench_curate.py's synthetic run dir of N trajectories (a
     quarter of them codeblock): the default form it writes (before: the `hf` form; now: canonical),
     with `--for trl` timed too where the checkout has the canonical default (the export as a user asks it);
  2. SFT data preparation on an SFT set of N rows: the set written in the arm's default form from the
     same canonical rows (timed as `write`), then what `agentdata train` does with it before the
     tokenizer (timed as `prepare`): read it, convert it to canonical messages, render each conversation
     in its protocol (tokenize-ready rows; the tokenizer is replaced by a stand-in that counts the
     characters of each rendered message) and count the protocol and prompt it teaches, as many times as
     that version reads it (before: three reads, the plan's and the trainer's two; now: one).
The arms must keep the same rows and render the same conversations (same counts, same characters, same
prompt), else no ratio is printed (bench/arms.py).

    python bench/bench_sft_set.py --rows 1000000 --baseline-ref 6b7d697
    python bench/bench_sft_set.py --smoke
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
# A child imports agentdata from the checkout it is timing (PYTHONPATH), never from this one.
sys.path[:0] = [str(ROOT / "bench")] + ([] if "--child" in sys.argv else [str(ROOT)])

from arms import checkout_of, load, run_child, same_work  # noqa: E402

CACHE = Path(tempfile.gettempdir()) / "agentdata-bench-sft-set"  # TMPDIR moves it
CODEBLOCK_SHARE = 0.25  # codeblock rows are the ones the old SFT stage parsed back from text


def canonical_rows(rows: int) -> tuple[Path, Path]:
    """(the synthetic run dir, a canonical SFT staging file of its `rows` rows with JSON arguments), cached."""
    import polars as pl
    from bench_curate import synthetic_run

    from agentdata.records import SFT_COLUMNS

    run = synthetic_run(rows, codeblock_share=CODEBLOCK_SHARE)
    staging = CACHE / f"canonical-{rows}.parquet"
    if not staging.exists():  # the rows curate would keep as JSON: the 2% with broken arguments left out
        CACHE.mkdir(parents=True, exist_ok=True)
        broken = pl.element().struct.field("function").struct.field("arguments").str.starts_with("{bad")
        has_broken = pl.col("messages").list.eval(pl.element().struct.field("tool_calls").list.eval(broken).list.any())
        frame = pl.scan_parquet(str(run / "trajectories" / "*.parquet"))
        frame = frame.filter(~has_broken.list.any().fill_null(False)).select(*SFT_COLUMNS)
        frame.sink_parquet(staging.with_suffix(".partial"))
        staging.with_suffix(".partial").replace(staging)  # an interrupted run leaves no half file in the cache
    return run, staging


# --------------------------------------------------------------------------- the children (one arm's code)


def child_curate(run: Path, out: Path, target: str | None) -> dict:
    from agentdata.curate import CurateConfig, curate

    config = CurateConfig() if target is None else CurateConfig(target=target)
    started = time.perf_counter()
    result = curate([run], out, config)
    seconds = time.perf_counter() - started
    return {"seconds": round(seconds, 2), "kept": result.kept_rows, "passes": getattr(result, "passes", None)}


def child_prepare(staging: Path, out: Path) -> dict:
    """Write the set in this checkout's default form, then prepare it as `train` does (module doc)."""
    from types import SimpleNamespace

    import agentdata.sft.data as data
    from agentdata.formats.sft_set.writer import write_sft_form

    started = time.perf_counter()
    write_sft_form(staging, out)
    written = time.perf_counter() - started

    characters = [0]

    def stand_in(tokenizer, messages, tools=None):  # tokenize-ready: what the tokenizer would have been given
        lengths = [len(message.get("content") or "") for message in messages]
        characters[0] += sum(lengths)
        return SimpleNamespace(input_ids=lengths, assistant_masks=[m["role"] == "assistant" for m in messages])

    data.tokenize_conversation = stand_in
    started = time.perf_counter()
    try:
        from agentdata.sft.prompt import prompt_of
        from agentdata.sft.sft_set import read_sft_set
    except ImportError:  # before issue 42: the plan reads the set, then the trainer twice
        from agentdata.sft.prompt import set_prompt

        planned = set_prompt(out)
        rows = data.tokenize_sft_set(out, None, None)
        taught = set_prompt(out)
        reads = 3
    else:
        sft_set = read_sft_set(out)  # train's plan reads it, and hands the rows to the trainer
        planned = prompt_of(sft_set.rows)
        rows = data.tokenized_rows(sft_set.rows, None, sft_set.path)
        taught = prompt_of(sft_set.rows)
        reads = 1
    prepared = time.perf_counter() - started
    assert planned == taught
    return {
        "seconds": round(written + prepared, 2),
        "write_s": round(written, 2),
        "prepare_s": round(prepared, 2),
        "reads": reads,
        "rows": len(rows),
        "characters": characters[0],
        "protocols": taught.protocols,
        "system_prompts": len(taught.system_prompts),
    }


# --------------------------------------------------------------------------- the comparison


def run_arm(name: str, checkout: Path, measure: str, argument: Path, out: Path, target: str | None = None) -> dict:
    out.unlink(missing_ok=True)
    command = [str(Path(__file__).resolve()), "--child", measure, "--input", str(argument), "--out", str(out)]
    wall, rss, stdout = run_child(checkout, command + (["--target", target] if target else []))
    result = json.loads(stdout.strip().splitlines()[-1])
    return {**result, "wall_s": round(wall, 1), "rss_gb": round(rss, 2), "load": load()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--baseline-ref", help="time the same work from this commit too (e.g. 6b7d697)")
    parser.add_argument("--rounds", type=int, default=1, help="alternating rounds of the arms")
    parser.add_argument("--only", choices=("curate", "prepare"), action="append")
    parser.add_argument("--smoke", action="store_true", help="tiny sizes, for CI: every arm and check, in seconds")
    parser.add_argument("--child", choices=("curate", "prepare"), help=argparse.SUPPRESS)
    parser.add_argument("--input", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--out", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--target", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child == "curate":
        print(json.dumps(child_curate(args.input, args.out, args.target)))
        return
    if args.child == "prepare":
        print(json.dumps(child_prepare(args.input, args.out)))
        return

    rows = 2_000 if args.smoke else args.rows
    run, staging = canonical_rows(rows)
    arms = {"ours": ROOT}
    if args.baseline_ref:
        arms["baseline"] = checkout_of(args.baseline_ref)
    elif args.smoke:  # the comparison and its checks run too, against itself
        arms["baseline"] = ROOT
    work = Path(tempfile.mkdtemp(prefix="bench-sft-set-"))
    measures = args.only or ["curate", "prepare"]
    results: dict[str, dict[str, list[dict]]] = {m: {a: [] for a in arms} for m in measures}
    print(f"bench_sft_set: {rows:,} rows ({CODEBLOCK_SHARE:.0%} codeblock), arms {', '.join(arms)}", flush=True)
    for _ in range(args.rounds):
        for measure in measures:
            for name, checkout in arms.items():
                source = run if measure == "curate" else staging
                result = run_arm(name, checkout, measure, source, work / f"{name}-{measure}.parquet")
                results[measure][name].append(result)
                print(f"{measure}, {name} ({checkout}): {json.dumps(result)}", flush=True)
    if "curate" in measures:  # the export a user asks for now (not an arm of the ratio: the default is)
        export = run_arm("ours", ROOT, "curate", run, work / "ours-trl.parquet", "trl")
        print(f"curate --for trl, ours: {json.dumps(export)}", flush=True)
    if len(arms) == 2:
        for measure, by_arm in results.items():
            ours, theirs = by_arm["ours"][-1], by_arm["baseline"][-1]
            for key in ("kept",) if measure == "curate" else ("rows", "characters", "protocols", "system_prompts"):
                same_work(f"bench_sft_set {measure}", key, ours[key], theirs[key])
            best = {name: min(run["seconds"] for run in runs) for name, runs in by_arm.items()}
            print(f"{measure}: ratio baseline/ours (best of {args.rounds}): {best['baseline'] / best['ours']:.1f}x")


if __name__ == "__main__":
    main()
