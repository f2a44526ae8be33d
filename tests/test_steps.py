"""The filter steps on small crafted tables: each drop reason, dedup and decontamination."""

from __future__ import annotations

import json

import polars as pl
import pytest

from agentdata.errors import InputFileError
from agentdata.steps import (
    BenchmarkNgrams,
    ContaminationFilter,
    ExactDuplicateFilter,
    IncorrectFilter,
    MalformedToolCallFilter,
    NearDuplicateFilter,
    NoAnswerFilter,
    ToolCallBandFilter,
    ToolErrorRatioFilter,
    TooLongFilter,
    find_near_duplicates,
    minhash_signatures,
    run_steps,
)
from agentdata.steps.text import ngram_hashes

LONG_QUESTION = (
    "A farmer has a rectangular field whose length is three times its width and whose perimeter is "
    "two hundred metres; find the area of the field in square metres."
)


def reasons(frame: pl.DataFrame, steps) -> dict[str, str]:
    result = run_steps(frame.with_row_index("row"), steps)
    return dict(result.rejected.select(pl.col("row").cast(pl.String), "drop_reason").iter_rows())


def test_rule_steps_drop_with_their_reason():
    frame = pl.DataFrame(
        {
            "final_answer": ["1", None, " ", "1", "1", "1", "1", "1"],
            "correct": [True, False, False, False, True, True, True, True],
            "malformed_tool_calls": [0, 0, 0, 0, 1, 0, 0, 0],
            "num_tool_calls": [2, 2, 2, 2, 2, 4, 0, 9],
            "num_tool_errors": [1, 0, 0, 0, 0, 3, 0, 0],
            "total_tokens": [10, 10, 10, 10, 10, 10, 10, 10],
        }
    )
    steps = [
        NoAnswerFilter(),
        IncorrectFilter(),
        MalformedToolCallFilter(),
        ToolErrorRatioFilter(0.5),
        ToolCallBandFilter(1, 8),
        TooLongFilter(100),
    ]
    assert reasons(frame, steps) == {
        "1": "no_answer",
        "2": "no_answer",
        "3": "incorrect",
        "4": "malformed_tool_call",
        "5": "tool_error_ratio",
        "6": "no_tool_call",
        "7": "too_many_tool_calls",
    }


def test_too_long_and_counts():
    frame = pl.DataFrame({"total_tokens": [5, 50, 500]})
    result = run_steps(frame, [TooLongFilter(50)])
    assert result.kept["total_tokens"].to_list() == [5, 50]
    assert result.stats() == {"dropped_too_long": 1}


def test_exact_duplicate_keeps_first():
    frame = pl.DataFrame({"text_hash": [3, 1, 3, 2, 1], "id": list("abcde")})
    result = run_steps(frame, [ExactDuplicateFilter()])
    assert result.kept["id"].to_list() == ["a", "b", "d"]
    assert result.rejected["drop_reason"].to_list() == ["duplicate", "duplicate"]


def test_minhash_signatures_agree_with_jaccard():
    texts = pl.Series(
        [
            LONG_QUESTION,
            LONG_QUESTION.replace("two hundred", "two hundred and forty"),
            "An entirely different question about the probability of rolling two sixes with dice.",
        ]
    )
    signatures = minhash_signatures(texts, num_perm=256)
    same = (signatures[0] == signatures[1]).mean()
    different = (signatures[0] == signatures[2]).mean()
    assert same > 0.5 and different < 0.1


def test_near_duplicate_drops_reworded_copy_but_not_changed_numbers():
    reworded = LONG_QUESTION.replace("A farmer has", "A  farmer owns").upper()
    short_a, short_b = "What is 12 times 13?", "What is 12 times 14?"
    frame = pl.DataFrame({"question": [LONG_QUESTION, reworded, short_a, short_b, ""]})
    result = run_steps(frame, [NearDuplicateFilter(threshold=0.7)])
    assert result.rejected["question"].to_list() == [reworded]


def test_near_duplicate_by_group_drops_whole_group_and_ignores_own_group():
    frame = pl.DataFrame(
        {
            "problem_id": ["p1", "p1", "p2", "p2", "p3"],
            "question": [LONG_QUESTION, LONG_QUESTION, LONG_QUESTION + " ", LONG_QUESTION, "Something else entirely."],
        }
    )
    keep = NearDuplicateFilter(group="problem_id").keep(frame)
    assert keep.to_list() == [True, True, False, False, True]


def test_find_near_duplicates_on_empty_input():
    import numpy as np

    assert find_near_duplicates(np.zeros((0, 128), dtype=np.uint32)).size == 0


def test_ngrams_of_short_text_are_one_gram():
    grams = ngram_hashes(pl.Series(["one two three", "", "a b c d e f"]), n=4)
    assert grams.group_by("_row").len().sort("_row").rows() == [(0, 1), (2, 3)]


def test_contamination_on_13_grams_and_short_benchmark_questions():
    benchmark = BenchmarkNgrams.from_questions([LONG_QUESTION, "What is 2 + 2?"])
    texts = pl.Series(
        [
            "Warm-up. " + LONG_QUESTION[:120] + " Then something new.",  # shares a 13-gram
            "What is 2 + 2?",  # short question copied verbatim
            "A farmer has a field.",  # shares words, no 13-gram
        ]
    )
    assert benchmark.contaminated(texts).to_list() == [True, True, False]
    frame = pl.DataFrame({"question": texts})
    result = run_steps(frame, [ContaminationFilter(benchmark)])
    assert result.counts == {"contaminated": 2}


def test_a_share_of_ngrams_tells_a_copy_from_a_sibling_of_the_same_template():
    template = "What is the sum of the squares of the integers from 1 to {}? Put the final answer in \\boxed{{}}."
    benchmark = BenchmarkNgrams.from_questions([template.format(481), template.format(410)])
    texts = pl.Series([template.format(481), template.format(226), "", "Something else entirely."])
    shares = benchmark.overlap_share(texts).to_list()
    assert shares[0] == 1.0 and 0 < shares[1] <= 0.2 and shares[2:] == [0.0, 0.0]  # the sibling shares its prefix
    assert benchmark.contaminated(texts).to_list() == [True, True, False, False]  # any 13-gram: the sibling too
    assert benchmark.contaminated(texts, min_share=0.5).to_list() == [True, False, False, False]


def test_benchmark_from_files_in_any_layout(tmp_path):
    jsonl = tmp_path / "aime.jsonl"
    jsonl.write_text(json.dumps({"problem": LONG_QUESTION, "answer": "1875"}) + "\n")
    parquet = tmp_path / "verl.parquet"
    pl.DataFrame({"prompt": [[{"role": "user", "content": "What is 2 + 2?"}]]}).write_parquet(parquet)
    benchmark = BenchmarkNgrams.from_files([jsonl, parquet])
    assert benchmark.questions == 2
    assert benchmark.contaminated(pl.Series(["What is 2 + 2?", LONG_QUESTION])).to_list() == [True, True]


def test_benchmark_missing_file_is_a_user_error(tmp_path):
    with pytest.raises(InputFileError, match="no such file"):
        BenchmarkNgrams.from_files([tmp_path / "missing.jsonl"])


# --------------------------------------------------------------------------- the stages' built-in steps by name


def test_curate_settings_produce_its_named_steps_in_order(tmp_path):
    from agentdata.curate.config import CurateConfig
    from agentdata.curate.steps import CURATE_STEPS, FEATURE_STEPS, SCALAR_STEPS, curate_steps
    from agentdata.judge.config import ScoringConfig
    from agentdata.steps import DedupConfig

    benchmark = tmp_path / "bench.jsonl"
    benchmark.write_text(json.dumps({"question": LONG_QUESTION, "answer": "1"}) + "\n")
    prm = tmp_path / "prm.py"
    prm.write_text(
        "from agentdata.judge.prm import ProcessRewardModel\n\n"
        "class Constant(ProcessRewardModel):\n"
        "    def __init__(self, target, *, spec, batch_size=8):\n"
        "        self.spec = spec\n"
    )
    scoring = ScoringConfig(prm=f"{prm}:Constant", judge="smollm2")  # the judge's engine loads when it first runs
    everything_on = CurateConfig(
        dedup=DedupConfig(decontam_files=[str(benchmark)]), balance_sources=0.5, scoring=scoring
    )
    scalar, feature = curate_steps(everything_on)
    assert [step.reason for step in scalar] == list(SCALAR_STEPS)  # a built-in step's name is its drop reason
    assert [step.reason for step in feature] == list(FEATURE_STEPS)
    assert all(name in CURATE_STEPS for name in SCALAR_STEPS + FEATURE_STEPS)
    scalar, feature = curate_steps(CurateConfig(keep_incorrect=True, max_per_problem=0, extra_steps=["no_answer"]))
    assert "incorrect" not in [step.reason for step in scalar]
    assert [step.reason for step in feature] == [
        "no_model_turn",
        "malformed_tool_call",
        "health",
        "duplicate",
        "near_duplicate",
        "no_answer",
    ]


def test_pool_settings_produce_its_named_steps_in_order():
    from agentdata.filter.config import PoolConfig
    from agentdata.filter.steps import POOL_STEP_NAMES, pool_steps
    from agentdata.steps import DedupConfig

    steps = pool_steps(PoolConfig(band=(0.2, 0.8), dedup=DedupConfig(near_dup_threshold=0)))
    assert [step.reason for step in steps] == [
        name for name in POOL_STEP_NAMES if name not in ("contaminated", "near_duplicate")
    ]
    assert steps[2].band == (0.2, 0.8)


def test_an_unknown_step_lists_the_stage_built_ins():
    from agentdata.curate.config import CurateConfig
    from agentdata.curate.steps import curate_steps
    from agentdata.errors import UserError

    with pytest.raises(UserError, match=r"unknown filter step 'nope': use one of .*too_long.*malformed_tool_call"):
        curate_steps(CurateConfig(extra_steps=["nope"]))
