"""Secrets in the pool's problems (publish/secrets.py finds them), before the pool is written or pushed.

A pool's rows are problems, not trajectories, but a problem's text can hold a secret too: a question
that pastes a connection string, an answer or source that names a key. Every text column the pool is
written from (question, answer, source, domain, problem_id) is scanned as curate scans an SFT set's
messages: one pass of the polars superset pattern, then the library's own patterns on the rows it flags.
"""

from __future__ import annotations

import dataclasses
from collections import Counter

import polars as pl

from agentdata.filter.build import PoolResult
from agentdata.publish.secrets import SecretCounts, SecretScanner

SECRET_REASON = "secret"  # the drop reason of a problem held back for a secret (`--secrets drop`)


def handle_pool_secrets(result: PoolResult, mode: str) -> tuple[PoolResult, dict]:
    """(the pool with its secrets redacted, or the problems holding one moved to the rejects as `secret`,
    what was found: {"mode", "rows", "found"}); `keep` scans nothing. The rejects file (ids, source, pass
    rates) is a local file for a person to look at, never pushed."""
    if mode == "keep" or not result.pool.height:
        return result, {"mode": mode}
    pool = result.pool
    scanner = SecretScanner()
    columns = [name for name, dtype in pool.schema.items() if dtype == pl.String]
    may_hold = pool.select(pl.any_horizontal([scanner.candidates(pl.col(name)) for name in columns])).to_series()
    values = {name: pool[name].to_list() for name in columns}
    found: dict[int, Counter] = {}
    for row in may_hold.arg_true().to_list():
        counts: Counter = Counter()
        for name in columns:
            if values[name][row]:
                values[name][row] = scanner.redact(values[name][row], counts)
        if counts:
            found[row] = counts
    total = SecretCounts(len(found), sum(found.values(), Counter()))
    secrets = {"mode": mode, **total.as_dict()}
    if not found:
        return result, secrets
    if mode == "redact":
        redacted = pool.with_columns(pl.Series(name, values[name], dtype=pl.String) for name in columns)
        return dataclasses.replace(result, pool=redacted), secrets
    holds = pl.int_range(pl.len()).is_in(pl.Series(sorted(found), dtype=pl.Int64).implode())
    dropped = pool.filter(holds).with_columns(pl.lit(SECRET_REASON).alias("drop_reason"))
    return (
        dataclasses.replace(
            result,
            pool=pool.filter(~holds),
            rejected=pl.concat([result.rejected, dropped], how="diagonal_relaxed"),
            counts={**result.counts, SECRET_REASON: len(found)},
        ),
        secrets,
    )
