"""The dataset card of an SFT set or RL pool: the Hub's YAML front matter and a text saying how it was made.

The YAML is built with the libraries that read it: `huggingface_hub.DatasetCardData` for the Hub's fields
(license, size category, task tags), `datasets`' own `MetadataConfigs` (the `configs:` block naming the data
files) and `DatasetInfosDict` (the `dataset_info:` block with the features, from the file's Arrow schema).
`check_card` reads a card back through the same code, offline, as `datasets.load_dataset` and the Hub do.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from agentdata.errors import UserError
from agentdata.publish.layout import SetLayout
from agentdata.records import atomic_write

# The Hub's size categories (huggingface_hub's DatasetCardData docs), by their upper bound.
SIZE_CATEGORIES = ((1_000, "n<1K"), (10_000, "1K<n<10K"), (100_000, "10K<n<100K"), (1_000_000, "100K<n<1M"))
SIZE_CATEGORY_LARGE = ((10_000_000, "1M<n<10M"), (100_000_000, "10M<n<100M"), (1_000_000_000, "100M<n<1B"))
TASKS = {"sft": ["text-generation"], "pool": ["text-generation", "question-answering"]}
TAGS = {"sft": ["agentdata", "sft", "tool-use", "agentic"], "pool": ["agentdata", "rl", "grpo", "tool-use"]}
TITLES = {"sft": "SFT set", "pool": "RL pool"}


def size_category(rows: int) -> str:
    for bound, name in SIZE_CATEGORIES + SIZE_CATEGORY_LARGE:
        if rows < bound:
            return name
    return "n>1B"


def card_yaml_data(layout: SetLayout, kind: str, rows: int, license: str | None) -> Any:
    """The front matter as a `DatasetCardData`: Hub fields, `configs` and (for Parquet) `dataset_info`."""
    from datasets import DatasetInfo, Features, SplitDict, SplitInfo
    from datasets.info import DatasetInfosDict
    from datasets.utils.metadata import MetadataConfigs
    from huggingface_hub import DatasetCardData

    data = DatasetCardData(
        license=license or "unknown",
        size_categories=[size_category(rows)],
        task_categories=TASKS[kind],
        tags=TAGS[kind],
        pretty_name=f"agentdata {TITLES[kind]}",
    )
    files = [{"split": "train", "path": layout.data_path_in_card}]
    MetadataConfigs({"default": {"data_files": files}}).to_dataset_card_data(data)
    if layout.data.suffix == ".parquet":
        import pyarrow.parquet as pq

        file = pq.ParquetFile(layout.data)
        features = Features.from_arrow_schema(file.schema_arrow)
        size = sum(file.metadata.row_group(i).total_byte_size for i in range(file.metadata.num_row_groups))
        splits = SplitDict({"train": SplitInfo("train", num_bytes=size, num_examples=rows)})  # bytes in memory
        info = DatasetInfo(features=features, splits=splits, config_name="default")
        DatasetInfosDict({"default": info}).to_dataset_card_data(data)
    return data


def write_card(layout: SetLayout, kind: str, rows: int, provenance: dict[str, Any], license: str | None) -> Path:
    """Write the card of the set at `layout.data` (already written): front matter and the provenance as text."""
    from huggingface_hub import DatasetCard

    card = DatasetCard(
        f"---\n{card_yaml_data(layout, kind, rows, license).to_yaml()}\n---\n{card_text(kind, rows, provenance)}"
    )
    return atomic_write(layout.card, lambda tmp: Path(tmp).write_text(str(card), encoding="utf-8"))


def check_card(path: str | Path) -> Any:
    """Read a card back as the Hub and `datasets` read it (offline): its front matter must be a mapping
    `DatasetCardData` takes, its `configs` valid for `datasets` and naming files that exist, its features
    readable; returns the `DatasetCard`. A card that fails is a UserError naming the file and the field."""
    from datasets.info import DatasetInfosDict
    from datasets.utils.metadata import MetadataConfigs
    from huggingface_hub import DatasetCard

    path = Path(path)
    try:
        card = DatasetCard.load(path)
        configs = MetadataConfigs.from_dataset_card_data(card.data)
        DatasetInfosDict.from_dataset_card_data(card.data)
    except (ValueError, TypeError, KeyError) as error:
        raise UserError(f"{path}: not a dataset card the Hub reads ({error})") from None
    for name, config in configs.items():
        for entry in config.get("data_files", []):
            if not (path.parent / entry["path"]).is_file():
                raise UserError(f"{path}: config {name!r} names {entry['path']}, which is not there")
    if card.data.size_categories is None or card.data.license is None:
        raise UserError(f"{path}: the card gives no size_categories or license")
    return card


def card_text(kind: str, rows: int, provenance: dict[str, Any]) -> str:
    """The card's Markdown: what the set is, how it was made, how to rebuild and load it."""
    lines = [f"\n# agentdata {TITLES[kind]}\n", f"{rows:,} rows, written by `agentdata {provenance['stage']}`.\n"]
    lines += ["## How it was made\n"]
    if provenance.get("command"):
        lines += ["Rebuild it (from the folder it was made in, `" + provenance.get("cwd", ".") + "`):\n"]
        lines += ["```bash", provenance["command"], "```\n"]
    else:
        lines += ["Made from Python (no command line); the settings below rebuild it.\n"]
    sources = provenance.get("sources", [])
    if sources:
        lines += [
            "### Source runs\n",
            "| run | teacher | protocol | settings digest | agentdata | rows in | rows kept |",
        ]
        lines += ["|---|---|---|---|---|---|---|"]
        for source in sources:
            lines.append(
                f"| `{source['path']}` | {source.get('teacher')} | {source.get('protocol')} | "
                f"{source.get('settings_digest')} | {source.get('agentdata_version')} | {source.get('rows')} | "
                f"{source.get('kept')} |"
            )
        lines.append("")
    for title, key in (("Rows per source", "by_source"), ("Rows per domain", "by_domain")):
        counts = provenance.get("counts", {}).get(key)
        if counts:
            lines += [f"### {title}\n", "| name | rows |", "|---|---|"]
            lines += [f"| {name} | {count} |" for name, count in counts.items()] + [""]
    if provenance.get("dropped"):
        lines += ["### What was dropped, and why\n", "| reason | rows |", "|---|---|"]
        lines += [f"| {reason} | {count} |" for reason, count in provenance["dropped"].items()] + [""]
    if provenance.get("secrets"):
        lines += ["### Secrets found before writing\n", "```json", json.dumps(provenance["secrets"], indent=2), "```\n"]
    if provenance.get("profile"):
        lines += [f"### Pass-rate band and profile\n\nBand: {provenance.get('band')}.\n"]
        lines += ["```json", json.dumps(provenance["profile"], indent=2, sort_keys=True), "```\n"]
    lines += [
        "### Versions\n",
        "```json",
        json.dumps(provenance.get("versions", {}), indent=2, sort_keys=True),
        "```\n",
    ]
    lines += ["### Settings\n", f"Digest `{provenance.get('settings_digest')}`.\n"]
    lines += ["```json", json.dumps(provenance.get("settings", {}), indent=2, sort_keys=True, default=str), "```\n"]
    lines += ["## Load it\n", "```python", "import datasets", "", 'rows = datasets.load_dataset("DIR", split="train")']
    lines += ["```\n", "The same provenance is in the Parquet file's metadata (`agentdata.provenance`): "]
    lines += ["`agentdata inspect` shows it.\n"]
    return "\n".join(lines)
