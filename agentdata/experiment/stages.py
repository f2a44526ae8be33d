"""The experiment's stages, each a call of an existing stage's library (no second implementation).

| stage | calls | writes (in its work folder) |
|---|---|---|
| `collect` | `agent.runner.collect` (the teacher, as `agentdata collect`) | `run/` |
| `stitch` | `synth.solutions.worked_solution` + `synth.stitch.stitch_file` (as `agentdata synth stitch`) | `run/` |
| `curate` | `curate.curate` (as `agentdata curate`) | `sft.parquet` |
| `sft_sets` | the curated sets aligned: one row per problem, the problems every kind has | `real.parquet`, ... |
| `sft` | `agentdata train --stage sft` (experiment/training.py) | the model |
| `profile` | `filter.run.run_filter` with the band (as `agentdata filter`) | `run/`, `band.parquet` |
| `pool` | the band pool, or random / easy / hard of its size from the same profile | `pool.parquet` |
| `grpo` | `agentdata train --stage rl` with the held-out curve set | the model, `metrics.jsonl` |
| `eval` | `evaluation.runner.run_benchmark` + `evaluation.metrics.score_benchmark` (as `agentdata eval`) | `run/` |
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any

from agentdata.agent.config import CollectConfig, LoopConfig, all_in_flight
from agentdata.curate.config import CurateConfig
from agentdata.errors import UserError
from agentdata.experiment import training
from agentdata.experiment.choices import SFT_DATA
from agentdata.experiment.plan import ArmPlan
from agentdata.problems import load_problems
from agentdata.synth.stitch import StitchConfig

SFT_KINDS = tuple(kind for kind in SFT_DATA if kind != "none")  # the SFT sets an arm may build


def collect_teacher(problems_file: Path, config: CollectConfig, folder: Path) -> dict[str, Any]:
    from agentdata.agent.runner import collect

    summary = collect(load_problems(problems_file), folder / "run", config)
    return {"run_dir": str(folder / "run"), **summary.as_dict()}


def stitch_problems(
    problems_file: Path, config: StitchConfig, folder: Path, solutions: Path | None = None
) -> dict[str, Any]:
    """The stitched twin of the training problems: their worked solutions (`solutions`, a `synth stitch`
    input file, or else synth.solutions' for generated problems) cut into code cells that really run."""
    import shutil

    from agentdata.synth.stitch.files import stitch_file

    if solutions is None:
        solutions = write_worked_solutions(problems_file, folder / "solutions.jsonl")
    run_dir = folder / "run"
    if run_dir.exists():  # a stitch killed half-way: stitching is cheap, start it again
        shutil.rmtree(run_dir)
    summary = stitch_file(solutions, folder / "stitched_sft.parquet", config, trajectories_dir=run_dir)
    return {"run_dir": str(run_dir), **summary.as_dict()}


def write_worked_solutions(problems_file: Path, out: Path) -> Path:
    """`synth stitch`'s input for the training problems that have a worked solution (generated ones)."""
    from agentdata.synth.solutions import worked_solution

    rows = []
    for problem in load_problems(problems_file):
        solution = worked_solution(problem)
        if solution is not None:
            rows.append(
                {"id": problem.id, "question": problem.question, "answer": problem.answer, "solution": solution}
            )
    if not rows:
        raise UserError(
            f"{problems_file}: no training problem has a worked solution to stitch (generated problems of the "
            "synth templates and the compute ladder have one; give others as stitch.solutions)"
        )
    out.write_text("".join(json.dumps(row) + "\n" for row in rows), encoding="utf-8")
    return out


def curate_run(run_dir: Path, config: CurateConfig, folder: Path) -> dict[str, Any]:
    from agentdata.curate import curate

    result = curate([run_dir], folder / "sft.parquet", config)
    if result.output is None:
        raise UserError(result.empty or f"{run_dir}: curate kept nothing")
    return result.as_dict()


def align_sets(
    sources: dict[str, Path], kinds: list[str], rows: int | None, order: list[str], folder: Path
) -> dict[str, Any]:
    """One SFT set per kind over the same problems: those every source kind has a row for (first row each),
    in the training problems' order, at most `rows`; `mixed` takes real rows on every other problem."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    tables = {kind: pq.read_table(path) for kind, path in sources.items()}
    first_rows = {kind: _first_row_per_problem(table) for kind, table in tables.items()}
    shared = [pid for pid in order if all(pid in rows_of for rows_of in first_rows.values())]
    if rows is not None:
        shared = shared[:rows]
    if not shared:
        raise UserError(
            f"no training problem has a row in every SFT source ({', '.join(sorted(sources))}): the sets cannot "
            "cover the same problems; collect more samples, or loosen curate's rules"
        )
    written = {}
    for kind in kinds:
        if kind == "mixed":
            halves = [("real" if index % 2 == 0 else "stitched", pid) for index, pid in enumerate(shared)]
            pieces = [tables[source].take([first_rows[source][pid]]) for source, pid in halves]
            columns = tables["real"].column_names
            table = pa.concat_tables([piece.select(columns) for piece in pieces], promote_options="permissive")
        else:
            table = tables[kind].take([first_rows[kind][pid] for pid in shared])
        written[kind] = str(folder / f"{kind}.parquet")
        pq.write_table(table, written[kind])
    return {"problems": len(shared), "rows": len(shared), "sets": written, "available": _available(first_rows)}


def _first_row_per_problem(table: Any) -> dict[str, int]:
    first: dict[str, int] = {}
    for index, pid in enumerate(table.column("problem_id").to_pylist()):
        first.setdefault(pid, index)
    return first


def _available(first_rows: dict[str, dict[str, int]]) -> dict[str, int]:
    return {kind: len(rows_of) for kind, rows_of in first_rows.items()}


def train_sft(plan: ArmPlan, start: str, sft_set: Path, folder: Path) -> dict[str, Any]:
    result = training.run_sft(start, sft_set, folder / "model", training.named(plan.sft_values, plan, "sft"))
    return {
        "model_dir": str(result.model_dir),
        "steps": result.steps,
        "conversations": result.conversations,
        "trained_tokens": result.trained_tokens,
        "final_loss": result.final_loss,
    }


def profile_student(
    start: str, problems_file: Path, loop: LoopConfig, k: int, seed: int, band: tuple[float, float], folder: Path
) -> dict[str, Any]:
    """`filter` on the model GRPO starts from, with GRPO's loop: the band pool, and every problem's pass rate."""
    from agentdata.engines.spec import ModelSpec
    from agentdata.filter.build import PoolConfig
    from agentdata.filter.run import run_filter
    from agentdata.train.closed_loop import profile_spec

    problems = load_problems(problems_file)
    student = start if ModelSpec.parse(start).kind == "vllm" else profile_spec(start)  # vLLM runs it as it is
    profiling = CollectConfig(
        model=student, samples=k, loop=loop, seed=seed, concurrency=all_in_flight(len(problems) * k)
    )
    run = run_filter(problems, folder / "band.parquet", PoolConfig(band=band), profiling, profile_dir=folder / "run")
    rates = run.result.profiled.select("problem_id", "pass_rate").to_dicts()
    return {
        "profile_dir": str(run.profile_dir),
        "band_pool": str(run.output) if run.output else None,
        "band_size": run.result.pool.height,
        "generated": run.generated,
        "pass_rates": {row["problem_id"]: row["pass_rate"] for row in rates},
        "empty": run.empty,
        "report": str(run.report),
    }


def choose_pool(
    kind: str, profile: dict[str, Any], problems_file: Path, size: int | None, seed: int, folder: Path
) -> dict[str, Any]:
    """The pool file GRPO trains on: the band's, or `size` (default: the band's size) by another rule."""
    from agentdata.experiment.pools import write_pool_like

    band_size = int(profile["band_size"])
    if kind == "band":
        if not profile["band_pool"]:
            raise UserError(profile["empty"] or "the band keeps no problem")
        return {"pool": profile["band_pool"], "size": band_size, "pass_rates": _rates(profile, profile["band_pool"])}
    size = size or band_size
    if not size:
        raise UserError(f"rl.pool {kind} is sized like the band, which keeps no problem: set rl.size")
    path = write_pool_like(
        kind, load_problems(problems_file), profile["pass_rates"], size, seed, profile["band_pool"], folder
    )
    return {"pool": str(path), "size": size, "pass_rates": _rates(profile, path)}


def _rates(profile: dict[str, Any], pool: str | Path) -> list[float]:
    """The profiled pass rates of the problems in a pool (what the report shows of its difficulty)."""
    return [profile["pass_rates"].get(p.id) for p in load_problems(pool)]


def train_grpo(plan: ArmPlan, start: str, pool: Path, curve: Path, folder: Path) -> dict[str, Any]:
    """GRPO from `start` on `pool`, validated on the held-out `curve` problems (the curves)."""
    result = training.run_grpo(start, pool, folder / "model", training.named(plan.rl_values, plan, "grpo"), curve)
    return {
        "model_dir": str(result.model_dir),
        "steps": result.steps,
        "metrics_file": str(result.metrics_file),
        "plots": [str(path) for path in result.plots],
    }


def evaluate(spec: str, label: str, held_out: Path, plan: ArmPlan, folder: Path) -> dict[str, Any]:
    """`eval`'s runner and metrics on the held-out problems: the result (with intervals) and per-problem scores."""
    from agentdata.evaluation.metrics import score_benchmark
    from agentdata.evaluation.report import EvalResult
    from agentdata.evaluation.runner import run_benchmark

    config = CollectConfig(
        model=spec, samples=plan.eval_k, seed=plan.eval_seed, concurrency=plan.eval_concurrency, loop=plan.eval_loop
    )
    responses, summary = run_benchmark(load_problems(held_out), folder / "run", config)
    metrics, scores = score_benchmark(responses)
    result = EvalResult(
        label,
        spec,
        held_out.stem,
        plan.eval_loop.max_tool_calls,
        str(folder / "run"),
        metrics,
        {"generated": summary.new},
    )
    return {"eval": result.as_dict(), "scores": dataclasses.asdict(scores)}
