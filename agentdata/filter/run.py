"""The whole `filter` command as one library call: profile (cached) -> pool -> files and report."""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

import polars as pl

from agentdata.agent.config import CollectConfig
from agentdata.errors import UserError
from agentdata.filter.build import (
    EmptyPoolError,
    PoolConfig,
    PoolResult,
    build_pool,
    problems_table,
    source_table,
    write_pool,
    write_rejects,
)
from agentdata.filter.confidence import straddling
from agentdata.filter.config import ProfileConfig
from agentdata.filter.loop_match import (
    POOL_METADATA_KEY,
    differences_text,
    grpo_default_loop,
    loop_differences,
    loop_settings,
    profile_metadata,
)
from agentdata.filter.mix import domain_table
from agentdata.filter.profile import claim_profile_dir, profile, profile_dir_for, student_fingerprint
from agentdata.filter.redaction import handle_pool_secrets
from agentdata.filter.report import pass_rate_histograms
from agentdata.filter.steps import pool_steps
from agentdata.outputs import companion
from agentdata.publish.card import write_card
from agentdata.publish.hub import check_hub, push_set
from agentdata.publish.layout import remove_earlier_set, removed_note, set_layout
from agentdata.publish.provenance import as_metadata, provenance_record
from agentdata.publish.secrets import redact_tree, write_shared_json
from agentdata.records import Problem
from agentdata.versions import stamped


def default_profiling() -> CollectConfig:
    """k rollouts per problem with the loop GRPO's rollouts use (temperature 1.0), the pool's consumer."""
    return ProfileConfig()


@dataclass
class FilterRun:
    result: PoolResult
    output: Path | None  # None when the pool is empty: nothing is written (see `empty`)
    profile_dir: Path
    generated: int
    report: Path
    plot: Path
    per_source: list[dict]
    problems: int  # profiled: the problems given, up to the profile's `limit`
    empty: str | None = None  # why no pool file was written (the report and plot still are)
    per_domain: list[dict] = field(default_factory=list)
    reprofiled: int = 0  # problems a --k-adaptive second round profiled again
    still_straddling: int = 0  # problems whose interval still holds a band edge
    warnings: list[str] = field(default_factory=list)  # one line each, for the user
    card: Path | None = None  # the dataset card (publish/layout.py), None with the pool
    pushed: dict | None = None  # publish.hub.Pushed of --push-to-hub
    secrets: dict = field(default_factory=dict)  # what the scan found in the pool's problems, and the mode

    @property
    def selected(self) -> int:
        return self.result.pool.height

    def as_dict(self) -> dict[str, Any]:
        """The run's summary (`filter --json`); the report file holds this and the settings."""
        return {
            "output": str(self.output) if self.output else None,
            "card": str(self.card) if self.card else None,
            "pushed": self.pushed,
            "empty": self.empty,
            "profile_dir": str(self.profile_dir),
            "generated": self.generated,
            "problems": self.problems,
            "selected": self.selected,
            "dropped": {f"dropped_{reason}": count for reason, count in self.result.counts.items()},
            "per_source": self.per_source,
            "per_domain": self.per_domain,
            "warnings": self.warnings,
            "reprofiled": self.reprofiled,
            "still_straddling": self.still_straddling,
            "secrets": self.secrets,
            "report": str(self.report),
            "plot": str(self.plot),
        }


@dataclass
class ProfileRun:
    """The student's profile: its pass rates (of one shard's problems with --shard), what was generated now."""

    profile_dir: Path
    rates: pl.DataFrame
    generated: int
    reprofiled: list[str] = field(default_factory=list)  # problems a --k-adaptive second round profiled again
    fingerprint: str | None = None  # of the student's weights, for a local model dir
    shard: str | None = None

    def as_dict(self) -> dict[str, Any]:
        """`filter --shard I/N --json`: what this shard's profile holds and cost."""
        return {
            "shard": self.shard,
            "profile_dir": str(self.profile_dir),
            "problems": self.rates.height,
            "generated": self.generated,
            "reprofiled": len(self.reprofiled),
        }


def profile_student(
    problems: Sequence[Problem],
    out: str | Path,
    config: PoolConfig,
    profiling: CollectConfig,
    engine: Any = None,
    profile_dir: str | Path | None = None,
) -> ProfileRun:
    """The profile `run_filter` builds its pool from (cached in the profile dir); with `profiling.sharding.shard`,
    only that shard's problems are profiled, into its own part of the profile dir."""
    out = Path(out)
    profiling = profiling.for_run()  # an unset protocol: the student's own, read from its dir now
    problems = list(problems)[: profiling.limit]
    fingerprint = student_fingerprint(profiling, Path(profile_dir).parent if profile_dir else out.parent / "profile")
    profile_dir = Path(profile_dir) if profile_dir else profile_dir_for(out, profiling, fingerprint)
    if config.k_adaptive is not None and config.k_adaptive <= profiling.samples:
        raise UserError(
            f"--k-adaptive {config.k_adaptive} must be more than --k {profiling.samples}: it is the rollouts "
            "a problem whose pass rate is unsure gets in all"
        )
    shard = profiling.sharding.shard
    if shard is not None:
        problems = shard.select(problems)
    claim_profile_dir(profile_dir, profiling, fingerprint)
    rates, generated = profile(problems, profile_dir, profiling, engine=engine)
    reprofiled: list[str] = []
    if config.k_adaptive:
        rates, more, reprofiled = _second_round(problems, rates, profile_dir, profiling, config, engine)
        generated += more
    return ProfileRun(profile_dir, rates, generated, reprofiled, fingerprint, str(shard) if shard else None)


def run_filter(
    problems: Sequence[Problem],
    out: str | Path,
    config: PoolConfig,
    profiling: CollectConfig | None = None,
    engine: Any = None,
    profile_dir: str | Path | None = None,
    command: list[str] | None = None,
) -> FilterRun:
    """Profile the student on `problems` (re-using the profile run dir), build the pool, write it and its report.

    `profiling` is the student's collect run: `model` is the student, `samples` the k rollouts
    per problem (default 4), `limit` keeps the first problems, `loop` the agent-loop settings
    (default: GRPO's rollout loop; others give a warning in `FilterRun.warnings`). `out` is a file or a
    dataset folder (publish/layout.py), written with its card; `command` (the CLI's arguments) rebuilds it.
    """
    out = Path(out)
    layout = set_layout(out)
    if config.publish.push_to_hub:  # before any work: a push that cannot happen is known now
        check_hub(config.publish.push_to_hub, flag="push_to_hub=")
    # Before any work too: a step that does not exist, or one this command cannot run (judge_low and prm_low read
    # curate's scoring settings), is known now, not after the student's rollouts.
    steps = pool_steps(config)
    profiling = (profiling or default_profiling()).for_run()  # an unset protocol: the student's own
    if profiling.sharding.shard is not None:
        raise UserError(
            f"--shard {profiling.sharding.shard} profiles one shard (profile_student); the pool needs every shard: "
            "filter without --shard once they are finished"
        )
    problems = list(problems)[: profiling.limit]
    student, k = profiling.model, profiling.samples
    profiled = profile_student(problems, out, config, profiling, engine, profile_dir)
    rates, generated, reprofiled = profiled.rates, profiled.generated, profiled.reprofiled
    profile_dir, fingerprint = profiled.profile_dir, profiled.fingerprint
    # before anything is written for export or upload: the pool's problems scanned for secrets
    result, secrets = handle_pool_secrets(
        build_pool(problems_table(problems), rates, config, steps), config.publish.secrets
    )
    recorded = redact_tree(profile_metadata(student, k, profiling.loop, fingerprint))  # leaves in the pool's metadata
    per_source = source_table(result)
    per_domain = domain_table(result.profiled, result.pool, config.domain_mix)
    record = provenance_record(
        "filter",
        {"pool": asdict(config), "profiling": profiling.settings()},
        command,
        sources=[{"path": str(profile_dir), "teacher": student, "rows": len(problems), "kept": result.pool.height}],
        counts=_pool_counts(result),
        dropped={f"dropped_{reason}": count for reason, count in result.counts.items()},
        band=str(config.band),
        profile=recorded,
        secrets=secrets,
    )
    metadata = {POOL_METADATA_KEY: json.dumps(recorded), **as_metadata(record)}
    card = None
    try:
        output, empty = write_pool(result, layout.data, config.format, metadata), None
        card = write_card(layout, "pool", result.pool.height, record, config.publish.license)
    except EmptyPoolError as error:
        output, empty = None, str(error) + removed_note(remove_earlier_set(layout))
    rejects = write_rejects(result, companion(out, ".rejects.parquet"))
    plot = pass_rate_histograms(
        result.profiled["pass_rate"].to_list(),
        result.pool["pass_rate"].to_list(),
        config.band,
        companion(out, ".pass_rate.png"),
        by_domain=_rates_by_domain(result),
    )
    pushed = None
    if output is not None and config.publish.push_to_hub:
        pushed = push_set(layout, config.publish.push_to_hub, not config.publish.public).as_dict()
    unsure_now = straddling(rates, config.band)
    warnings = grpo_mismatch_warnings(profiling)
    report = write_shared_json(
        companion(out, ".report.json"),
        stamped(
            {
                "output": str(output) if output else None,
                "card": str(card) if card else None,
                "pushed": pushed,
                "empty": empty,
                "rejects": str(rejects),  # every problem left out, with its pass rate and drop_reason
                "problems": len(problems),
                "selected": result.pool.height,
                "student": student,
                "k": k,
                "k_adaptive": config.k_adaptive,
                "reprofiled": len(reprofiled),
                "still_straddling": len(unsure_now),
                "generated_rollouts": generated,
                "failed_rollouts": int(rates["n_errors"].sum()) if rates.height else 0,
                "profile_dir": str(profile_dir),
                "embedding": result.embedding,
                "dropped": {f"dropped_{reason}": count for reason, count in result.counts.items()},
                "per_source": per_source,
                "per_domain": per_domain,
                "config": asdict(config),
                "profiling": profiling.settings(),
                "plot": str(plot),
                "profile": recorded,
                "warnings": warnings,
                "secrets": secrets,
            }
        ),
    )
    return FilterRun(
        result,
        output,
        profile_dir,
        generated,
        report,
        plot,
        per_source,
        problems=len(problems),
        empty=empty,
        per_domain=per_domain,
        reprofiled=len(reprofiled),
        still_straddling=len(unsure_now),
        warnings=warnings,
        card=card,
        pushed=pushed,
        secrets=secrets,
    )


def _pool_counts(result: PoolResult) -> dict[str, dict[str, int]]:
    """The pool's problems per source and per domain."""
    return {
        key: dict(result.pool.group_by(column).len().sort(column).iter_rows())
        for key, column in (("by_source", "source"), ("by_domain", "domain"))
        if column in result.pool.columns
    }


def grpo_mismatch_warnings(profiling: CollectConfig) -> list[str]:
    """One line when the profile samples or uses tools otherwise than GRPO's rollouts will by default."""
    differences = loop_differences(loop_settings(profiling.loop), grpo_default_loop(profiling.model))
    if not differences:
        return []
    return [
        f"the pool is profiled with {differences_text(differences)}: pass rates under other settings than "
        "GRPO's put problems in the wrong band; profile with GRPO's settings, or give `train` these ones"
    ]


def _second_round(
    problems: Sequence[Problem],
    rates: pl.DataFrame,
    profile_dir: Path,
    profiling: CollectConfig,
    config: PoolConfig,
    engine: Any,
) -> tuple[pl.DataFrame, int, list[str]]:
    """Profile again, up to k_adaptive rollouts, only the problems whose interval straddles a band edge.

    The first round always reads the first k rollouts, so a rerun picks the same problems and
    finds their extra rollouts in the cache.
    """
    unsure = set(straddling(rates, config.band))
    if not unsure:
        return rates, 0, []
    again = [problem for problem in problems if problem.id in unsure]
    more_rates, generated = profile(again, profile_dir, replace(profiling, samples=config.k_adaptive), engine=engine)
    kept = rates.filter(~pl.col("problem_id").is_in(pl.Series(sorted(unsure), dtype=pl.String).implode()))
    return pl.concat([kept, more_rates.select(kept.columns)]), generated, sorted(unsure)


def _rates_by_domain(result: PoolResult) -> dict[str, tuple[list[float], list[float]]]:
    domains = sorted(set(result.profiled["domain"].to_list()))
    return {
        domain: (
            result.profiled.filter(pl.col("domain") == domain)["pass_rate"].to_list(),
            result.pool.filter(pl.col("domain") == domain)["pass_rate"].to_list(),
        )
        for domain in domains
    }
