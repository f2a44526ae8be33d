"""Where an SFT set or RL pool and its dataset card go: a folder the Hub and `datasets` read, or a file.

`--out NAME.parquet` (or `.jsonl`), the form every release before cards wrote, is still one file: its card
is `NAME.README.md` beside it (the Hub reads only `README.md`, so pushing that form uploads the card under
that name). `--out DIR` (no suffix) is a dataset folder: `DIR/README.md` and `DIR/data/train.parquet`,
which `datasets.load_dataset(DIR)` loads as it is and `train --sft-data DIR` / `--rl-pool DIR` read.
The report, rejects and plots stay beside either (`outputs.companion`: `NAME.report.json`), out of the folder a
push uploads.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

CARD_NAME = "README.md"
DATA_DIR = "data"
FILE_SUFFIXES = (".parquet", ".jsonl", ".json")


@dataclass(frozen=True)
class SetLayout:
    out: Path  # what the user gave
    data: Path  # the rows
    card: Path  # the dataset card

    @property
    def folder(self) -> bool:
        return self.card.name == CARD_NAME

    @property
    def data_path_in_card(self) -> str:
        """The data file as the card's `configs` name it: relative to the card's folder."""
        return self.data.relative_to(self.card.parent).as_posix()


def is_folder_out(out: Path) -> bool:
    return out.suffix.lower() not in FILE_SUFFIXES


def set_layout(out: str | Path, suffix: str = ".parquet") -> SetLayout:
    """The layout `--out` names; `suffix` is the data file's in a folder (`.jsonl` for the openai form)."""
    out = Path(out)
    if is_folder_out(out):
        return SetLayout(out, out / DATA_DIR / f"train{suffix}", out / CARD_NAME)
    return SetLayout(out, out, out.with_name(f"{out.stem}.{CARD_NAME}"))


def data_file(path: str | Path) -> Path:
    """The data file of a set given as a folder written by agentdata (or any folder with one Parquet file
    under `data/`), or `path` itself."""
    path = Path(path)
    if not path.is_dir():
        return path
    found = sorted((path / DATA_DIR).glob("*.parquet")) + sorted((path / DATA_DIR).glob("*.jsonl"))
    return found[0] if len(found) == 1 else path


def is_dataset_folder(path: str | Path) -> bool:
    """A folder in the Hub's layout (a card or a `data/` folder), which `datasets.load_dataset(DIR)` reads."""
    path = Path(path)
    return path.is_dir() and ((path / CARD_NAME).is_file() or (path / DATA_DIR).is_dir())


def remove_earlier_set(layout: SetLayout) -> list[Path]:
    """Remove the data file and card an earlier run left where this one writes (a run that keeps no row
    writes none, since a 0-row Parquet file loads nowhere), so the earlier set never passes for this run's.
    In a folder, a data file of either form goes. Returns what was removed."""
    candidates = [layout.data, layout.card]
    if layout.folder:
        candidates += [layout.data.with_suffix(suffix) for suffix in FILE_SUFFIXES]
    removed = []
    for path in dict.fromkeys(candidates):
        if path.is_file() or path.is_symlink():
            path.unlink()
            removed.append(path)
    return removed


def removed_note(removed: list[Path]) -> str:
    """What `remove_earlier_set` removed, said after a command's "nothing was written" line."""
    if not removed:
        return ""
    return f" (the earlier set there was removed, so it is not taken for this run's: {', '.join(map(str, removed))})"
