"""--push-to-hub: the upload through huggingface_hub's API up to the network call (faked at HfApi, the boundary),
and the one-line failures before any work: offline, no token, an unreachable Hub, a bad repo id."""

from __future__ import annotations

import json
from pathlib import Path

import huggingface_hub
import pytest
from huggingface_hub import CommitOperationAdd, HfApi, constants

from agentdata.errors import UserError
from agentdata.publish.hub import check_hub
from tests.cli_helpers import run_cli
from tests.test_provenance import made_run


@pytest.fixture
def online(monkeypatch):
    """The Hub switched on (the tests run with HF_HUB_OFFLINE=1), with a token; nothing is sent anywhere."""
    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", False)
    monkeypatch.setenv("HF_TOKEN", "hf_" + "x" * 34)


@pytest.fixture
def hub(online, monkeypatch):
    """HfApi's three calls a push makes, recorded: the network call itself is the only thing replaced."""
    calls: dict[str, list] = {"whoami": [], "create_repo": [], "create_commit": []}
    monkeypatch.setattr(HfApi, "whoami", lambda self, *a, **k: calls["whoami"].append(k) or {"name": "me"})

    def create_repo(self, repo_id, **options):
        calls["create_repo"].append({"repo_id": repo_id, **options})
        return f"https://huggingface.co/datasets/{repo_id}"

    def create_commit(self, repo_id, operations, **options):
        assert all(isinstance(operation, CommitOperationAdd) for operation in operations)
        calls["create_commit"].append(
            {"repo_id": repo_id, "files": {op.path_in_repo: Path(op.path_or_fileobj) for op in operations}, **options}
        )
        return huggingface_hub.CommitInfo(
            commit_url=f"https://huggingface.co/datasets/{repo_id}/commit/abc",
            commit_message=options["commit_message"],
            commit_description="",
            oid="abc",
        )

    monkeypatch.setattr(HfApi, "create_repo", create_repo)
    monkeypatch.setattr(HfApi, "create_commit", create_commit)
    return calls


def test_a_folder_is_pushed_whole_to_a_private_dataset_repo(tmp_path, monkeypatch, hub, capsys):
    monkeypatch.chdir(tmp_path)
    made_run(Path("run"))
    assert run_cli(["curate", "run", "--out", "sft", "--push-to-hub", "me/sft-set"]) == 0
    (repo,) = hub["create_repo"]
    assert repo == {"repo_id": "me/sft-set", "repo_type": "dataset", "private": True, "exist_ok": True}
    (commit,) = hub["create_commit"]
    assert commit["repo_type"] == "dataset" and sorted(commit["files"]) == ["README.md", "data/train.parquet"]
    assert commit["files"]["README.md"].resolve() == (tmp_path / "sft" / "README.md").resolve()
    assert "pushed to https://huggingface.co/datasets/me/sft-set/commit/abc" in capsys.readouterr().out


def test_a_file_is_pushed_with_its_card_as_the_readme_and_public_when_asked(tmp_path, monkeypatch, hub):
    monkeypatch.chdir(tmp_path)
    made_run(Path("run"))
    assert run_cli(["curate", "run", "--out", "sft.parquet", "--push-to-hub", "me/sft-set", "--public"]) == 0
    assert hub["create_repo"][0]["private"] is False
    files = hub["create_commit"][0]["files"]
    assert files == {"README.md": Path("sft.README.md"), "sft.parquet": Path("sft.parquet")}


def test_a_pool_is_pushed(tmp_path, hub):
    from agentdata.agent.config import CollectConfig
    from agentdata.filter.build import PoolConfig
    from agentdata.filter.profile import profile_dir_for
    from agentdata.filter.run import run_filter
    from agentdata.publish.config import PublishConfig
    from tests.test_filter import crafted_problems, write_profile

    problems = crafted_problems(1)
    write_profile(profile_dir_for(tmp_path / "pool", CollectConfig(samples=4)), problems, 4, [1, 2, 3])
    config = PoolConfig(embedding="tfidf", publish=PublishConfig(push_to_hub="me/pool"))
    run = run_filter(problems, tmp_path / "pool", config, CollectConfig(samples=4))
    assert run.pushed["files"] == ["README.md", "data/train.parquet"] and run.pushed["private"] is True


@pytest.mark.parametrize(
    "repo, message", [("no-owner", "OWNER/NAME"), ("me/bad name!", "not a Hub repo id"), ("a/b/c", "not a Hub repo id")]
)
def test_a_bad_repo_id_is_one_line(repo, message):
    with pytest.raises(UserError, match=message):
        check_hub(repo)


def test_offline_the_push_fails_in_one_line_before_any_work(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    made_run(Path("run"))
    assert constants.is_offline_mode()  # as every test runs: HF_HUB_OFFLINE=1
    assert run_cli(["curate", "run", "--out", "sft", "--push-to-hub", "me/sft-set"]) == 2
    error = capsys.readouterr().err.strip()
    assert "HF_HUB_OFFLINE is set" in error and len(error.splitlines()) == 1
    assert not Path("sft").exists() and not Path("sft.report.json").exists()  # nothing was done
    # filter takes the push as a key, and its error names the key the user wrote, not a flag it has not got
    Path("problems.jsonl").write_text(json.dumps({"question": "1+1?", "answer": "2"}) + "\n")
    assert run_cli(["filter", "problems.jsonl", "--out", "pool.parquet", "push_to_hub=me/pool"]) == 2
    error = capsys.readouterr().err.strip()
    assert error.count("push_to_hub=me/pool: ") == 1 and "--push-to-hub" not in error and "HF_HUB_OFFLINE" in error
    assert not Path("pool.parquet").exists()


def test_an_unreachable_hub_and_a_missing_token_are_one_line_each(online, monkeypatch):
    monkeypatch.setattr(constants, "ENDPOINT", "http://127.0.0.1:9")  # HfApi() reads it: nothing listens there
    with pytest.raises(UserError, match="cannot reach the Hub at http://127.0.0.1:9"):
        check_hub("me/sft-set")  # a real connection refused on a closed local port
    monkeypatch.delenv("HF_TOKEN")
    monkeypatch.setattr(huggingface_hub.hf_api, "get_token", lambda: None)
    with pytest.raises(UserError, match="no Hugging Face token"):
        check_hub("me/sft-set")


def test_the_session_traces_are_pushed_and_offline_nothing_is_written(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    made_run(Path("run"))
    assert run_cli(["view", "run", "--sts", "traces", "--push-to-hub", "me/traces"]) == 2  # offline: refused first
    assert "HF_HUB_OFFLINE is set" in capsys.readouterr().err and not Path("traces").exists()
    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", False)
    monkeypatch.setenv("HF_TOKEN", "hf_" + "x" * 34)
    pushed = []
    monkeypatch.setattr(HfApi, "whoami", lambda self, *a, **k: {"name": "me"})
    monkeypatch.setattr(HfApi, "create_repo", lambda self, repo_id, **options: pushed.append(options))
    monkeypatch.setattr(
        HfApi,
        "create_commit",
        lambda self, repo_id, operations, **options: pushed.append(sorted(op.path_in_repo for op in operations)),
    )
    assert run_cli(["view", "run", "--sts", "traces", "--push-to-hub", "me/traces"]) == 0
    assert pushed[0]["private"] is True and pushed[0]["repo_type"] == "dataset"
    assert pushed[1] == sorted(p.relative_to("traces").as_posix() for p in Path("traces").rglob("*.jsonl"))
    assert len(pushed[1]) == 8
