"""Score many trajectories at once with a model that may fail: concurrent, journaled, retried, counted.

`Scoring.run(batches)` takes the rows in batches (curate streams them from the shards), skips
every row the journal already holds, sends the rest to the scorer `chunk_rows` at a time with
`parallel` chunks in flight, tries a failed row again up to `retries` times, and records each
success in the journal as it comes. What is left failing is returned as a `ScoreFailure` in the
row's place and counted apart. When the first rows all fail, or every row of a shorter run, the
scorer is broken (a wrong URL, a model that never answers in the asked form): the run stops with
one line naming it instead of counting every row as failed (and the set as merely empty).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from agentdata.errors import UserError
from agentdata.events import task
from agentdata.judge.cache import ScoreJournal
from agentdata.judge.prm import ScoreFailure

FAIL_FAST_AFTER = 8
Row = dict[str, Any]
ChunkScorer = Callable[[list[Row], int], Awaitable[list[dict[str, Any] | ScoreFailure]]]


class ScorerBroken(UserError):
    """Every row so far failed: the scorer is not working."""


@dataclass
class ScoringCounts:
    """What a scoring run did, for the report: scored now, read from the journal, retried, failed."""

    scored: int = 0
    cached: int = 0
    retried: int = 0
    failed: int = 0
    examples: list[str] = field(default_factory=list)  # the first failures' messages

    def as_dict(self) -> dict[str, Any]:
        return {
            "scored": self.scored,
            "cached": self.cached,
            "retried": self.retried,
            "failed": self.failed,
            "failures": self.examples,
        }


@dataclass
class Scoring:
    name: str  # the progress task, e.g. "judge"
    journal: ScoreJournal
    key_of: Callable[[Row], str]  # the content digest of a row
    score_chunk: ChunkScorer  # (rows, attempt) -> one value or failure per row
    chunk_rows: int = 1
    parallel: int = 16
    retries: int = 2
    scorer: str = ""  # what scores, as the user named it (the judge's or PRM's spec), for the line that stops a run
    counts: ScoringCounts = field(default_factory=ScoringCounts)

    def run(self, batches: Iterable[list[Row]], total: int) -> list[dict[str, Any] | ScoreFailure]:
        return asyncio.run(self.arun(batches, total))

    async def arun(self, batches: Iterable[list[Row]], total: int) -> list[dict[str, Any] | ScoreFailure]:
        results: list[dict[str, Any] | ScoreFailure] = []
        started = time.perf_counter()
        with task(self.name, total) as advance:

            def progress() -> None:
                counts = self.counts
                elapsed = max(time.perf_counter() - started, 1e-9)
                per_s = round(counts.scored / elapsed, 2)
                advance(counts.scored + counts.cached + counts.failed, **counts.as_dict(), per_s=per_s)

            for batch in batches:
                offset = len(results)
                results.extend([None] * len(batch))  # type: ignore[list-item]
                await self._run_batch(batch, results, offset, progress)
        if self.counts.failed and not (self.counts.scored or self.counts.cached):
            raise self._broken(f"every row failed ({self.counts.failed})")
        return results

    async def _run_batch(self, batch: list[Row], results: list, offset: int, progress: Callable[[], None]) -> None:
        keys = [self.key_of(row) for row in batch]
        todo = []
        for index, key in enumerate(keys):
            cached = self.journal.get(key)
            if cached is not None:
                results[offset + index] = cached
                self.counts.cached += 1
            else:
                todo.append(index)
        progress()
        slots = asyncio.Semaphore(self.parallel)

        async def run(chunk: list[int]) -> None:
            async with slots:
                left: dict[int, ScoreFailure] = {}
                for attempt in range(self.retries + 1):
                    if attempt:
                        self.counts.retried += len(chunk)
                    values = await self.score_chunk([batch[index] for index in chunk], attempt)
                    left = {}
                    for index, value in zip(chunk, values):
                        if isinstance(value, ScoreFailure):
                            left[index] = value
                        else:
                            results[offset + index] = value
                            self.journal.put(keys[index], value)
                            self.counts.scored += 1
                    chunk = list(left)
                    if not chunk:
                        break
                for index, failure in left.items():
                    results[offset + index] = failure
                    self._failed(failure)
            progress()

        chunks = [todo[start : start + self.chunk_rows] for start in range(0, len(todo), self.chunk_rows)]
        await asyncio.gather(*(run(chunk) for chunk in chunks))

    def _failed(self, failure: ScoreFailure) -> None:
        self.counts.failed += 1
        if len(self.counts.examples) < 3:
            self.counts.examples.append(str(failure)[:300])
        if self.counts.failed >= FAIL_FAST_AFTER and not (self.counts.scored or self.counts.cached):
            raise self._broken(f"the first {self.counts.failed} rows all failed")

    def _broken(self, what: str) -> ScorerBroken:
        named = f"{self.name} {self.scorer}" if self.scorer else self.name
        return ScorerBroken(f"{named}: {what}; first error: {self.counts.examples[0]}")
