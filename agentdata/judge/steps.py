"""The PRM and LLM-judge filter steps: each scores every row, stores the score on it, and drops by it.

- `prm_low` adds `prm_score` (the steps' scores aggregated by min, mean or last), `prm_step_scores` and
  `prm_error`; drops `prm_low` below `min_prm`, `prm_failed` when no score came;
- `judge_low` adds `judge_score` (0-1), `judge_rationale` and `judge_error`; drops `judge_low` below
  `min_judge`, `judge_failed` when no verdict came.

A failure (retried first) is never a low score: it has its own reason, and without a minimum
nothing is dropped at all (the scores are only stored). Both read the trajectory (`messages`,
`question`, `format`) from the frame, or from the loader a stage gives them (curate streams it
from the shards), and keep what they scored in the score journal (judge.cache), so a rerun pays
only for what is new.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

import polars as pl

from agentdata.engines import GenerationRequest, load_engine
from agentdata.engines.spec import check_engine
from agentdata.errors import UserError
from agentdata.judge.cache import ScoreJournal, digest, refuse_non_folder
from agentdata.judge.config import ScoringConfig
from agentdata.judge.llm import PROMPT_VERSION, judge_messages, load_rubric, parse_verdict
from agentdata.judge.prm import ProcessRewardModel, ScoreFailure, StepsInput, aggregate, load_prm
from agentdata.judge.runner import Scoring, ScoringCounts
from agentdata.judge.transcript import question_of, trajectory_steps, transcript
from agentdata.steps.base import ScoreStep

Row = dict[str, Any]
# Engine options that change how a judge is reached, never what it answers: they do not split the journal.
HOW_ASKED = frozenset(
    {"concurrency", "timeout_s", "max_retries", "backoff_s", "max_backoff_s", "api_key_env", "max_batch_size"}
)


def _drop_reasons(frame: pl.DataFrame, score: str, error: str, minimum: float | None, low: str, failed: str):
    if minimum is None:  # scores only: nothing is dropped
        return pl.Series("reason", [None] * frame.height, dtype=pl.String)
    reason = (
        pl.when(pl.col(error).is_not_null())
        .then(pl.lit(failed))
        .when(pl.col(score) < minimum)
        .then(pl.lit(low))
        .otherwise(pl.lit(None, dtype=pl.String))
    )
    return frame.select(reason).to_series()


@dataclass
class PRMStep(ScoreStep):
    """Scores each trajectory's steps with a process reward model (judge.prm) and drops below `min_score`."""

    prm: ProcessRewardModel
    min_score: float | None = None
    how: str = "min"
    unit: str = "turn"
    retries: int = 2
    cache: str | None = None
    counts: ScoringCounts = field(default_factory=ScoringCounts)
    reason = "prm_low"
    columns = {"prm_score": pl.Float64, "prm_step_scores": pl.List(pl.Float64), "prm_error": pl.String}

    def reasons(self, frame: pl.DataFrame) -> pl.Series:
        return _drop_reasons(frame, "prm_score", "prm_error", self.min_score, "prm_low", "prm_failed")

    def score_batches(self, batches: Iterable[list[Row]], total: int) -> list[Row]:
        return asyncio.run(self._score_all(batches, total))

    async def _score_all(self, batches: Iterable[list[Row]], total: int) -> list[Row]:
        journal = ScoreJournal(self.cache, {"kind": "prm", **self.prm.identity()})

        async def score_chunk(rows: list[Row], attempt: int) -> list[Any]:
            values = await self.prm.score([self.steps_input(row) for row in rows])
            return [value if isinstance(value, ScoreFailure) else {"steps": value} for value in values]

        scoring = Scoring(
            "PRM", journal, self.key, score_chunk, self.prm.batch_rows, self.prm.parallel, self.retries, self.prm.spec
        )
        try:
            results = await scoring.arun(batches, total)
        finally:
            journal.close()
            await self.prm.aclose()
        self.counts = scoring.counts
        return [self._columns(value) for value in results]

    def steps_input(self, row: Row) -> StepsInput:
        messages = row["messages"]
        return StepsInput(
            question_of(messages, row.get("question")), trajectory_steps(messages, row.get("format"), self.unit)
        )

    def key(self, row: Row) -> str:
        steps = self.steps_input(row)
        return digest(steps.question, steps.steps)

    def _columns(self, value: Any) -> Row:
        if isinstance(value, ScoreFailure):
            return {"prm_error": str(value)}
        scores = [float(score) for score in value["steps"]]
        return {"prm_score": aggregate(scores, self.how), "prm_step_scores": scores}


@dataclass
class JudgeStep(ScoreStep):
    """Grades each trajectory with an LLM judge (any engine) against a rubric; drops below `min_score`."""

    engine_spec: str
    engine_options: dict[str, Any] = field(default_factory=dict)
    rubric: str = ""
    min_score: float | None = None
    concurrency: int = 16
    max_tokens: int = 512
    retries: int = 2
    cache: str | None = None
    engine: Any = None  # an Engine to use instead of loading `engine_spec` (tests, plug-ins)
    counts: ScoringCounts = field(default_factory=ScoringCounts)
    reason = "judge_low"
    columns = {"judge_score": pl.Float64, "judge_rationale": pl.String, "judge_error": pl.String}

    def reasons(self, frame: pl.DataFrame) -> pl.Series:
        return _drop_reasons(frame, "judge_score", "judge_error", self.min_score, "judge_low", "judge_failed")

    def identity(self) -> dict[str, Any]:
        """What makes two judges give the same verdicts (the journal's name): not how fast they are asked."""
        return {
            "kind": "judge",
            "engine": self.engine_spec,
            "options": {key: value for key, value in self.engine_options.items() if key not in HOW_ASKED},
            "rubric": self.rubric,
            "prompt_version": PROMPT_VERSION,
            "max_tokens": self.max_tokens,
        }

    def score_batches(self, batches: Iterable[list[Row]], total: int) -> list[Row]:
        return asyncio.run(self._score_all(batches, total))

    async def _score_all(self, batches: Iterable[list[Row]], total: int) -> list[Row]:
        journal = ScoreJournal(self.cache, self.identity())
        engine = self.engine or load_engine(self.engine_spec, **self.engine_options)
        scoring = Scoring(
            "judge",
            journal,
            self.key,
            lambda rows, attempt: self._grade(engine, rows, attempt),
            parallel=self.concurrency,
            retries=self.retries,
            scorer=self.engine_spec,
        )
        try:
            await self._ready(engine)
            results = await scoring.arun(batches, total)
        finally:
            journal.close()
            if self.engine is None:
                await engine.aclose()
        self.counts = scoring.counts
        return [self._columns(value) for value in results]

    @staticmethod
    async def _ready(engine: Any) -> None:
        """A judge that cannot be reached is named before any row waits on it (not as an empty set's advice)."""
        try:
            if hasattr(engine, "ready"):  # a plug-in engine need not have it
                await engine.ready()
        except UserError as error:
            raise UserError(f"the judge (--judge) {error}") from None

    def request(self, row: Row, attempt: int = 0) -> GenerationRequest:
        question, shown = self._shown(row)
        prompt = judge_messages(question, shown, self.rubric)
        # Greedy first; a retry after an unreadable reply samples, so a deterministic judge can answer otherwise.
        return GenerationRequest(
            messages=prompt, max_new_tokens=self.max_tokens, temperature=0.0 if attempt == 0 else 0.7, seed=attempt
        )

    def key(self, row: Row) -> str:
        return digest(*self._shown(row))

    @staticmethod
    def _shown(row: Row) -> tuple[str, str]:
        """The question and the transcript the judge reads (built once per row: the key and the request use it)."""
        if "_judge_shown" not in row:
            messages = row["messages"]
            row["_judge_shown"] = (question_of(messages, row.get("question")), transcript(messages))
        return row["_judge_shown"]

    async def _grade(self, engine: Any, rows: list[Row], attempt: int) -> list[Any]:
        generations = await asyncio.gather(*(engine.generate(self.request(row, attempt)) for row in rows))
        values: list[Any] = []
        for generation in generations:
            if generation.finish_reason in ("error", "context"):
                values.append(ScoreFailure(f"the judge failed: {generation.error or generation.finish_reason}"))
                continue
            if generation.finish_reason == "length":  # asked to end with its score, it never reached the end
                shown = " ".join(generation.text.split())[-160:]
                values.append(
                    ScoreFailure(
                        f"the judge failed: its reply was cut at --judge-max-tokens {self.max_tokens}: ...{shown!r}"
                    )
                )
                continue
            verdict = parse_verdict(generation.text)
            if verdict is None:
                shown = " ".join(generation.text.split())[:160]
                values.append(ScoreFailure(f"no score in the judge's reply: {shown!r}"))
            else:
                values.append({"score": verdict.score, "rationale": verdict.rationale})
        return values

    def _columns(self, value: Any) -> Row:
        if isinstance(value, ScoreFailure):
            return {"judge_error": str(value)}
        return {"judge_score": float(value["score"]), "judge_rationale": value["rationale"]}


# --------------------------------------------------------------------------- from a stage's settings


def _scoring(settings: Any, step: str, flag: str) -> ScoringConfig:
    scoring = getattr(settings, "scoring", None)
    if not isinstance(scoring, ScoringConfig):
        raise UserError(f"the {step} step reads {flag} (the scoring settings of curate); this command has none")
    if scoring.score_cache and (scoring.prm or scoring.judge):
        refuse_non_folder(scoring.score_cache)  # before any row is read, not when the first score is kept
    return scoring


def prm_step(settings: Any) -> PRMStep | None:
    """The PRM step the settings ask for (`--prm`, `--min-prm`, ...), or None without `--prm`."""
    scoring = _scoring(settings, "prm_low", "--prm")
    if not scoring.prm:
        return None
    prm = load_prm(scoring.prm, **{"batch_size": scoring.prm_batch_size, **scoring.prm_options})
    return PRMStep(
        prm, scoring.min_prm, scoring.prm_aggregate, scoring.prm_steps, scoring.score_retries, scoring.score_cache
    )


def judge_step(settings: Any) -> JudgeStep | None:
    """The judge step the settings ask for (`--judge`, `--min-judge`, ...), or None without `--judge`."""
    scoring = _scoring(settings, "judge_low", "--judge")
    if not scoring.judge:
        return None
    # A wrong spec or option is known before any row is read (a model that is not there: when it loads).
    check_engine(scoring.judge, scoring.judge_options, "--judge-option")
    return JudgeStep(
        scoring.judge,
        dict(scoring.judge_options),
        load_rubric(scoring.judge_rubric),
        scoring.min_judge,
        scoring.judge_concurrency,
        scoring.judge_max_tokens,
        scoring.score_retries,
        scoring.score_cache,
    )
