"""The version is written once (agentdata/__init__.py) and every run dir, set card and report records that one."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pyarrow.parquet as pq

import agentdata
from agentdata.publish.provenance import PROVENANCE_KEY
from agentdata.versions import VERSION_KEY, package_versions
from tests.cli_helpers import run_cli
from tests.test_provenance import made_run

ROOT = Path(__file__).resolve().parent.parent


def test_pyproject_reads_the_version_from_the_package():
    from setuptools.config.pyprojecttoml import read_configuration

    assert "version" in read_configuration(ROOT / "pyproject.toml", expand=False)["project"]["dynamic"]
    assert read_configuration(ROOT / "pyproject.toml")["project"]["version"] == agentdata.__version__


def test_no_module_but_the_packages_own_writes_a_version():
    written = re.compile(r"""__version__\s*=|["']\d+\.\d+\.\d+["']""")
    writers = [
        path.relative_to(ROOT).as_posix()
        for path in (ROOT / "agentdata").rglob("*.py")
        if any(written.search(line) for line in path.read_text(encoding="utf-8").splitlines() if "__version__" in line)
    ]
    assert writers == ["agentdata/__init__.py"]


def test_the_changelog_names_this_version_first():
    headings = re.findall(r"^## (\S+)", (ROOT / "CHANGELOG.md").read_text(encoding="utf-8"), re.MULTILINE)
    assert headings[0] == agentdata.__version__


def test_a_run_dir_a_card_and_a_report_record_the_packages_version(tmp_path, monkeypatch):
    from agentdata.agent.config import CollectConfig
    from agentdata.agent.rundir import RunDir
    from agentdata.agent.runner import run_record

    assert package_versions()["agentdata"] == agentdata.__version__  # the code that runs, not stale metadata
    record = run_record(CollectConfig(model="smollm2"), RunDir(tmp_path / "run"), problems=1)
    assert record[VERSION_KEY] == record["versions"]["agentdata"] == agentdata.__version__

    monkeypatch.chdir(tmp_path)
    made_run(Path("collected"))
    assert run_cli(["curate", "collected", "--out", "sft"]) == 0
    report = json.loads(Path("sft.report.json").read_text())
    provenance = json.loads(pq.read_metadata("sft/data/train.parquet").metadata[PROVENANCE_KEY.encode()])
    assert report[VERSION_KEY] == provenance["versions"]["agentdata"] == agentdata.__version__
    assert f'"agentdata": "{agentdata.__version__}"' in Path("sft/README.md").read_text()
