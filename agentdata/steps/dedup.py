"""Exact and near-duplicate removal.

Near-dedup is the usual three passes, each a named function: MinHash signatures
(vectorised over all texts with numpy), candidate search in datasketch's MinHashLSH,
and the filter that keeps the first text of each group of near-duplicates.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import polars as pl
from datasketch import LeanMinHash, MinHash, MinHashLSH

from agentdata.steps.base import Step
from agentdata.steps.config import DedupConfig
from agentdata.steps.text import ROW, ngram_hashes

SCHEME = "affine32"
PERMUTATION_BLOCK = 16  # permutations computed at once: (n-grams of a chunk x 16) uint32 in memory
TEXT_CHUNK = 50_000  # texts whose n-grams are hashed at once: about 1M n-grams, 64 MB of permuted hashes


@dataclass
class ExactDuplicateFilter(Step):
    """Keeps the first row of each value of `key` (a hash of normalised text)."""

    key: str = "text_hash"
    reason = "duplicate"

    def keep(self, frame: pl.DataFrame) -> pl.Series:
        return frame.select(pl.col(self.key).is_first_distinct()).to_series()


# --------------------------------------------------------------------------- pass 1: signatures


def minhash_signatures(texts: pl.Series, num_perm: int = 128, ngram: int = 5, seed: int = 1) -> np.ndarray:
    """A (len(texts), num_perm) uint32 array of MinHash signatures over word n-grams.

    Uses datasketch's affine32 permutations (h -> a*h + b mod 2^32) on the n-gram hashes,
    computed for `TEXT_CHUNK` texts at once (their n-grams and one block of permutations are
    what is held besides the signatures). An empty text gets the all-max signature, which
    `find_near_duplicates` never pairs.
    """
    signatures = np.full((len(texts), num_perm), np.iinfo(np.uint32).max, dtype=np.uint32)
    a, b = MinHash(num_perm=num_perm, seed=seed, scheme=SCHEME).permutations
    for first in range(0, len(texts), TEXT_CHUNK):
        chunk = texts.slice(first, TEXT_CHUNK)
        _fill_signatures(signatures[first : first + len(chunk)], ngram_hashes(chunk, ngram), a, b)
    return signatures


def _fill_signatures(signatures: np.ndarray, grams: pl.DataFrame, a: np.ndarray, b: np.ndarray) -> None:
    """The signatures of one chunk's texts from their n-gram hashes (rows numbered from 0 in the chunk)."""
    rows = grams[ROW].to_numpy()  # ngram_hashes lists each text's n-grams together, in text order
    if rows.size == 0:
        return
    hashes = (grams["hash"].to_numpy() & np.uint64(0xFFFFFFFF)).astype(np.uint32)
    starts = np.flatnonzero(np.r_[True, rows[1:] != rows[:-1]])
    owners = rows[starts]
    permuted = np.empty((PERMUTATION_BLOCK, hashes.size), dtype=np.uint32)
    for first in range(0, signatures.shape[1], PERMUTATION_BLOCK):
        block = slice(first, first + PERMUTATION_BLOCK)
        width = len(a[block])
        # uint32 arithmetic, in place: the wraparound is the mod 2^32 of datasketch's affine32 scheme
        np.multiply(a[block, None], hashes[None, :], out=permuted[:width])
        np.add(permuted[:width], b[block, None], out=permuted[:width])
        signatures[owners, block] = np.minimum.reduceat(permuted[:width], starts, axis=1).T


# --------------------------------------------------------------------------- pass 2: find


def find_near_duplicates(signatures: np.ndarray, threshold: float = 0.8, seed: int = 1) -> np.ndarray:
    """Boolean array: True for a row whose estimated Jaccard similarity to an earlier kept row
    reaches `threshold`. Candidates come from MinHashLSH and are confirmed on the signatures."""
    rows, num_perm = signatures.shape
    duplicate = np.zeros(rows, dtype=bool)
    if rows == 0:
        return duplicate
    index = MinHashLSH(threshold=threshold, num_perm=num_perm)
    empty = (signatures == np.iinfo(np.uint32).max).all(axis=1)
    # Only rows that share a band with another row can be near-duplicates; the others
    # skip the per-row Python work of the index (most rows, in real data).
    for row in np.flatnonzero(shares_a_band(signatures, index.b, index.r) & ~empty):
        sketch = LeanMinHash(seed=seed, hashvalues=signatures[row], scheme=SCHEME)
        candidates = index.query(sketch)
        if candidates:
            similarity = (signatures[candidates] == signatures[row]).mean(axis=1)
            if similarity.max() >= threshold:
                duplicate[row] = True
                continue
        index.insert(int(row), sketch, check_duplication=False)
    return duplicate


def shares_a_band(signatures: np.ndarray, bands: int, rows_per_band: int) -> np.ndarray:
    """True for rows whose signature may equal another row's on all of some band (the LSH bucket
    rule). Each band is folded into one 64-bit key; a rare key collision only adds a candidate,
    which the index then checks exactly."""
    shared = np.zeros(len(signatures), dtype=bool)
    with np.errstate(over="ignore"):
        for band in range(bands):
            key = np.zeros(len(signatures), dtype=np.uint64)
            for column in range(band * rows_per_band, (band + 1) * rows_per_band):
                key = key * np.uint64(0x100000001B3) + signatures[:, column].astype(np.uint64)
            shared |= pl.Series(key).is_duplicated().to_numpy()
    return shared


# --------------------------------------------------------------------------- pass 3: filter


@dataclass
class NearDuplicateFilter(Step):
    """Drops rows whose `text` column is a near-duplicate (MinHash LSH) of an earlier row's.

    With `group` set, rows sharing a group value are compared once, by the group's first
    text, and a near-duplicate group is dropped whole (for curate: all trajectories of a
    problem whose question repeats another problem's). Rows of the same group never
    count as duplicates of each other.
    """

    text: str = "question"
    group: str | None = None
    threshold: float = 0.8
    num_perm: int = 128
    ngram: int = 5
    reason = "near_duplicate"

    def keep(self, frame: pl.DataFrame) -> pl.Series:
        if frame.height == 0:
            return pl.Series("keep", [], dtype=pl.Boolean)
        if self.group is None:
            return pl.Series("keep", ~self.duplicates(frame[self.text]))
        groups = frame.select(self.group, self.text).unique(self.group, keep="first", maintain_order=True)
        dropped = groups.filter(pl.Series(self.duplicates(groups[self.text])))[self.group]
        return frame.select(~pl.col(self.group).is_in(dropped.implode())).to_series()

    def duplicates(self, texts: pl.Series) -> np.ndarray:
        signatures = minhash_signatures(texts, num_perm=self.num_perm, ngram=self.ngram)
        return find_near_duplicates(signatures, threshold=self.threshold)


def near_duplicate_step(config: DedupConfig, text: str = "question", group: str | None = None) -> Step | None:
    """Near-dedup of `text` (by `group`) as the shared settings ask for it; None when they turn it off."""
    if config.near_dup_threshold is None:
        return None
    return NearDuplicateFilter(text=text, group=group, threshold=config.near_dup_threshold, ngram=config.near_dup_ngram)
