"""filter's domain_mix=: the pool moves toward target domain shares after the band; per-domain report."""

from __future__ import annotations

import json

import polars as pl
import pytest

from agentdata.agent.config import CollectConfig
from agentdata.errors import UserError
from agentdata.filter.build import PoolConfig, build_pool, problems_table
from agentdata.filter.mix import domain_quotas, parse_domain_mix
from agentdata.filter.profile import profile_dir_for
from agentdata.filter.run import default_profiling, run_filter
from agentdata.records import Problem
from agentdata.steps.config import DedupConfig
from tests.test_filter import write_profile


def mixed_problems(counts: dict[str, int]) -> list[Problem]:
    return [
        Problem(f"{domain} problem number {index} about topic {index * 7 % 5}", "1", source="s", domain=domain)
        for domain, count in counts.items()
        for index in range(count)
    ]


def test_parse_domain_mix_normalises_and_refuses_nonsense():
    assert parse_domain_mix("math=0.5,code=0.3,science=0.2") == pytest.approx(
        {"math": 0.5, "code": 0.3, "science": 0.2}
    )
    assert parse_domain_mix("math=2,code=2") == {"math": 0.5, "code": 0.5}
    for bad in ("math", "math=x", "math=-1", "math=0"):
        with pytest.raises(UserError, match="domain_mix: "):
            parse_domain_mix(bad)


def test_quotas_hit_the_shares_when_there_is_enough():
    assert domain_quotas(
        {"math": 100, "code": 100, "science": 100}, {"math": 0.5, "code": 0.3, "science": 0.2}, 10
    ) == {"math": 5, "code": 3, "science": 2}


def test_a_short_domain_gives_what_it_lacks_to_the_others():
    quotas = domain_quotas({"math": 100, "code": 1, "science": 100}, {"math": 0.5, "code": 0.3, "science": 0.2}, 10)
    assert quotas["code"] == 1 and sum(quotas.values()) == 10 and quotas["math"] > quotas["science"]


def test_without_size_the_largest_pool_that_holds_the_shares():
    assert domain_quotas({"math": 50, "code": 6}, {"math": 0.5, "code": 0.5}, None) == {"math": 6, "code": 6}
    assert domain_quotas({"math": 50}, {"math": 0.5, "code": 0.5}, None) == {"math": 50}  # no code at all


def test_build_pool_selects_toward_the_mix_after_the_band():
    problems = mixed_problems({"math": 12, "code": 6, "science": 6})  # the last science one is out of band
    rates = pl.DataFrame(
        {"problem_id": [p.id for p in problems], "pass_rate": [0.5] * 23 + [1.0], "n_rollouts": [4] * 24}
    )
    config = PoolConfig(
        size=10,
        embedding="tfidf",
        dedup=DedupConfig(near_dup_threshold=None),
        domain_mix=parse_domain_mix("math=0.5,code=0.3,science=0.2"),
        band=(0.0, 1.0),
    )
    result = build_pool(problems_table(problems), rates, config)
    shares = dict(result.pool.group_by("domain").len().iter_rows())
    assert shares == {"math": 5, "code": 3, "science": 2}
    assert result.counts["out_of_band"] == 1 and result.counts["domain_mix"] == 13


def test_report_has_per_domain_rows_and_histograms(tmp_path):
    problems = mixed_problems({"math": 4, "code": 4})
    out = tmp_path / "pool.parquet"
    write_profile(profile_dir_for(out, CollectConfig()), problems, 4, [1, 2, 3, 2, 1, 1, 2, 3])
    config = PoolConfig(
        embedding="tfidf", dedup=DedupConfig(near_dup_threshold=None), domain_mix={"math": 0.75, "code": 0.25}
    )
    run = run_filter(problems, out, config, CollectConfig(samples=4))
    report = json.loads(run.report.read_text())
    by_domain = {row["domain"]: row for row in report["per_domain"]}
    assert by_domain["math"]["selected"] == 4 and by_domain["code"]["selected"] == 1
    assert by_domain["code"]["target_share"] == 0.25 and by_domain["code"]["mean_pass_rate"] == pytest.approx(0.4375)
    assert run.plot.read_bytes().startswith(b"\x89PNG")


def test_cli_filter_domain_mix(tmp_path, capsys):
    from tests.cli_helpers import run_cli

    problems = mixed_problems({"math": 4, "science": 4})
    problems_file = tmp_path / "problems.jsonl"
    problems_file.write_text(
        "".join(
            json.dumps({"id": p.id, "question": p.question, "answer": p.answer, "domain": p.domain}) + "\n"
            for p in problems
        )
    )
    out = tmp_path / "pool.parquet"
    write_profile(profile_dir_for(out, default_profiling()), problems, 4, [1, 2, 3, 2, 1, 1, 2, 3])
    code = run_cli(
        [
            "filter",
            str(problems_file),
            "--out",
            str(out),
            "--k",
            "4",
            "embedding=tfidf",
            "domain_mix=math=3,science=1",
            "near_dup_threshold=0",
        ]
    )
    output = capsys.readouterr().out
    assert code == 0, output
    assert "per domain" in output and "domain_mix" in output
    assert dict(pl.read_parquet(out).group_by("domain").len().iter_rows()) == {"math": 4, "science": 1}
    assert run_cli(["filter", str(problems_file), "--out", str(out), "domain_mix=math"]) == 2
    assert "domain_mix: " in capsys.readouterr().err
