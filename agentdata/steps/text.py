"""Text normalisation and word n-grams as polars expressions, shared by dedup and decontamination."""

from __future__ import annotations

import polars as pl

WORD_PATTERN = r"\w+"
ROW = "_row"


def normalised(text: pl.Expr) -> pl.Expr:
    """Lower case, whitespace collapsed, trimmed: two texts that differ only in spacing or case match."""
    return text.fill_null("").str.to_lowercase().str.replace_all(r"\s+", " ").str.strip_chars()


def ngram_hashes(texts: pl.Series, n: int) -> pl.DataFrame:
    """One row per (text index, hashed word n-gram); a text shorter than n words is one n-gram.

    Vectorised: the words of all texts are exploded once and the n-gram is the
    concatenation of the next n words of the same text (shifted columns: a text's words
    are contiguous, so the word `offset` places on is the text's own while its position
    is below the text's count), so no Python loop and no window over texts runs.
    """
    words = (
        pl.DataFrame({"text": texts})
        .with_row_index(ROW)
        .select(ROW, pl.col("text").fill_null("").str.to_lowercase().str.extract_all(WORD_PATTERN).alias("word"))
        .with_columns(pl.col("word").list.len().cast(pl.Int64).alias("_count"))
        .filter(pl.col("_count") > 0)
        .with_columns((pl.col("_count").cum_sum() - pl.col("_count")).alias("_first"))  # its first word, exploded
        .explode("word")
        .with_columns((pl.int_range(pl.len(), dtype=pl.Int64) - pl.col("_first")).alias("_position"))
    )
    window = [
        pl.when(pl.col("_position") + offset < pl.col("_count")).then(pl.col("word").shift(-offset))
        for offset in range(n)
    ]
    # A short text keeps its first word as the start of its only n-gram (of all its words).
    starts = (pl.col("_position") + n <= pl.col("_count")) | ((pl.col("_position") == 0) & (pl.col("_count") < n))
    grams = words.with_columns(pl.concat_str(window, separator=" ", ignore_nulls=True).alias("gram")).filter(starts)
    return grams.select(pl.col(ROW), pl.col("gram").hash(seed=0).alias("hash"))
