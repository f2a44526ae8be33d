"""Decontamination: drop rows whose question shares a word n-gram with a benchmark question.

The benchmark side is a set of hashed n-grams (default 13, as GPT-3 and NeMo Curator
use); a benchmark question shorter than n words counts as one n-gram of all its words,
so a short question copied verbatim is still caught.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

import polars as pl

from agentdata.steps.base import Step
from agentdata.steps.config import DedupConfig
from agentdata.steps.text import ROW, ngram_hashes

DEFAULT_NGRAM = 13


@dataclass
class BenchmarkNgrams:
    """The hashed n-grams of every question in some benchmark files."""

    hashes: pl.Series
    ngram: int
    files: list[str] = field(default_factory=list)
    questions: int = 0

    @classmethod
    def from_questions(cls, questions: Iterable[str], ngram: int = DEFAULT_NGRAM) -> BenchmarkNgrams:
        texts = pl.Series("text", list(questions), dtype=pl.String)
        hashes = ngram_hashes(texts, ngram)["hash"].unique()
        return cls(hashes=hashes, ngram=ngram, questions=len(texts))

    @classmethod
    def from_files(cls, paths: Sequence[str | os.PathLike], ngram: int = DEFAULT_NGRAM) -> BenchmarkNgrams:
        """Read benchmark questions with the problem loader (any layout it knows)."""
        from agentdata.problems import load_problems

        questions = [problem.question for path in paths for problem in load_problems(path, require_answer=False)]
        benchmark = cls.from_questions(questions, ngram)
        benchmark.files = [str(path) for path in paths]
        return benchmark

    def contaminated(self, texts: pl.Series, min_share: float | None = None) -> pl.Series:
        """Boolean per text: True when any of its n-grams is a benchmark n-gram, or with `min_share`, when at
        least that share of them are (1.0: a copy; templated problems share a few n-grams with every sibling)."""
        if min_share is not None:
            return pl.Series("contaminated", self.overlap_share(texts) >= min_share)
        grams = ngram_hashes(texts, self.ngram)
        hit_rows = grams.filter(pl.col("hash").is_in(self.hashes.implode()))[ROW].unique()
        return pl.Series("contaminated", pl.int_range(len(texts), eager=True).is_in(hit_rows.implode()))

    def overlap_share(self, texts: pl.Series) -> pl.Series:
        """Per text, the share of its distinct n-grams that are benchmark n-grams (0 for a text with no word)."""
        grams = ngram_hashes(texts, self.ngram).unique()
        shares = grams.group_by(ROW).agg(pl.col("hash").is_in(self.hashes.implode()).mean().alias("share"))
        frame = pl.DataFrame({ROW: pl.int_range(len(texts), eager=True, dtype=shares[ROW].dtype)})
        return frame.join(shares, on=ROW, how="left")["share"].fill_null(0.0)


@dataclass
class ContaminationFilter(Step):
    """Drops rows whose `text` column overlaps a benchmark (computed once per distinct text)."""

    benchmark: BenchmarkNgrams
    text: str = "question"
    reason = "contaminated"
    row_local = True

    def keep(self, frame: pl.DataFrame) -> pl.Series:
        distinct = frame[self.text].unique(maintain_order=True)
        dirty = distinct.filter(self.benchmark.contaminated(distinct))
        return frame.select(~pl.col(self.text).is_in(dirty.implode())).to_series()


def contamination_step(config: DedupConfig) -> ContaminationFilter | None:
    """Decontamination against the benchmark files the shared settings name; None when they name none."""
    if not config.decontam_files:
        return None
    return ContaminationFilter(BenchmarkNgrams.from_files(config.decontam_files, config.decontam_ngram))
