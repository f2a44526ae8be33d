"""The one check every command makes on where it will write, before any work starts.

An output file must name a file (not a folder) with a suffix of a form the command writes:
a name such as `x.csv` for a Parquet set is refused rather than silently written as Parquet
under the wrong name. An output folder must not be a file. Either must be creatable: the
nearest existing folder above it must be a folder this user may write in.

An output never destroys what the command reads: a path that is one of its inputs (by name,
through a link, or as a second hard link to the same file) or lies inside an input folder is
refused, and so is any path inside a run dir's `trajectories/` folder, which holds nothing but
that run's shards (a file written there would be read back as one). The same holds for what a
command writes besides the path it is given: the companions of an output file (its report,
rejects and plot, named after it) and what lands in an output folder (a run dir is the command's
own, so no input may lie inside it).
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path

from agentdata.errors import UserError

Inputs = Iterable["str | os.PathLike | None"]

# What commands write beside an output file, named after it: filter's rejects, plot and report, curate's
# and validate's report. The writers name them through `companion`, so the check sees every one.
COMPANION_SUFFIXES = (".report.json", ".rejects.parquet", ".pass_rate.png")


def companion(out: str | os.PathLike, suffix: str) -> Path:
    """The file written beside `out` with `suffix` (`pool.parquet` -> `pool.report.json`)."""
    out = Path(out)
    return out.with_name(out.stem + suffix)


def check_output_file(
    path: str | os.PathLike, flag: str, suffixes: Sequence[str], what: str = "the output", inputs: Inputs = ()
) -> Path:
    """`path` can be written as a file of one of `suffixes`, apart from `inputs`; else a UserError naming `flag`."""
    path = Path(path)
    with _os_errors_named(flag, path):
        _check_file(path, flag, suffixes, what)
        inputs = list(inputs)
        _check_apart_from_inputs(path, flag, inputs, path)
        _check_companions(path, flag, inputs)
    return path


def _check_file(path: Path, flag: str, suffixes: Sequence[str], what: str) -> None:
    if path.is_dir():
        raise UserError(f"{flag} {path} is a folder; give a file name such as {path / ('out' + suffixes[0])}")
    if path.suffix.lower() not in suffixes:
        forms = " or ".join(suffixes)
        raise UserError(
            f"{flag} {path}: expected a file name ending in {forms} ({what}); nothing is written under another suffix"
        )
    if path.exists() and not path.is_file():
        raise UserError(f"{flag} {path} exists and is not a regular file")
    _check_creatable(path.parent, flag, path)


def check_output_dir(
    path: str | os.PathLike, flag: str, inputs: Inputs = (), writes: Sequence[str] | None = None
) -> Path:
    """`path` is, or can be made, a writable folder apart from `inputs`; else a UserError naming `flag`.
    `writes`: the names the command writes in it; None (a run dir, a report folder): the whole folder."""
    path = Path(path)
    with _os_errors_named(flag, path):
        if path.exists() and not path.is_dir():
            raise UserError(f"{flag} {path} is a file; it names a folder to write into: give a folder")
        _check_creatable(path, flag, path)
        inputs = list(inputs)
        _check_apart_from_inputs(path, flag, inputs, path / "_")
        _check_no_input_inside(path, flag, inputs, writes)
    return path


def check_outputs_apart(outputs: dict[str, str | os.PathLike | None]) -> None:
    """Two outputs of one command (by flag) that are one file, by name or through a link: the later write would
    replace the earlier (`validate P --out x.json --report x.json`); a UserError naming both flags."""
    seen: dict[Path, tuple[str, str | os.PathLike]] = {}
    for flag, path in outputs.items():
        if path is None:
            continue
        with _os_errors_named(flag, Path(path)):
            target = Path(path).resolve()
        if target in seen:
            other_flag, other = seen[target]
            raise UserError(
                f"{flag} {path} is also {other_flag} {other}: one would be written over the other; "
                "give each output a file of its own"
            )
        seen[target] = (flag, path)


def _check_companions(path: Path, flag: str, inputs: list) -> None:
    """An input where a companion of the output would be written (`filter pool.rejects.parquet --out pool.parquet`)."""
    for suffix in COMPANION_SUFFIXES:
        beside = companion(path, suffix).resolve()
        for given, source in _read_parts(inputs):
            if beside == source:
                raise UserError(
                    f"{flag} {path} writes {companion(path, suffix).name} beside it, which is the input {given}: "
                    "writing it would destroy what is being read; give another path"
                )


def _check_no_input_inside(path: Path, flag: str, inputs: list, writes: Sequence[str] | None) -> None:
    """An input inside the output folder, where the command writes (`collect D/stats.json --out D`)."""
    target = path.resolve()
    places = [target] if writes is None else [target / name for name in writes]
    for given in inputs:
        if given is None or not Path(given).exists():
            continue
        source = Path(given).resolve()
        hit = next((place for place in places if source == place or source.is_relative_to(place)), None)
        if hit is None or source == target:
            continue
        where = "a folder this command writes whole" if writes is None else f"where it writes {hit.name}"
        raise UserError(
            f"{flag} {path}: the input {given} lies inside it, {where}: writing there could destroy what is "
            "being read; keep the input outside it or give another folder"
        )


def _check_apart_from_inputs(path: Path, flag: str, inputs: Inputs, written: Path) -> None:
    """Writing `path` would replace or change an input: refused before anything is read. `written` is
    what lands on disk (`folder/_` for an output folder, so a folder in trajectories/ counts)."""
    target = path.resolve()  # through every link, so a link to an input is that input
    parts = list(_read_parts(inputs))
    for given, source in parts:
        if target == source or (path.exists() and source.exists() and os.path.samefile(path, source)):
            what = f"the input {given}" if source == Path(given).resolve() else f"{source.name} of the input {given}"
            raise UserError(f"{flag} {path} is {what}: writing it would destroy what is being read; give another path")
    _check_not_in_shards(written, flag)
    for given, source in parts:
        if source.is_dir() and target.is_relative_to(source):
            raise UserError(
                f"{flag} {path} lies inside the input {given}: writing there would change what is being read; "
                "give a path outside it"
            )


def _read_parts(inputs: Inputs) -> Iterator[tuple[str | os.PathLike, Path]]:
    """(as given, resolved) for each existing input; a run dir is read only in its shards, journal and manifest,
    so a file written beside them (`RUN/sft.parquet`) is fine."""
    for given in inputs:
        if given is None or not Path(given).exists():
            continue
        source = Path(given).resolve()
        if source.is_dir() and is_run_dir(source):
            parts = [path.name for path in source.glob("shard-*-of-*.*")]  # a sharded run's: shard-I-of-N.manifest.json
            for name in ("trajectories", "journal.jsonl", "manifest.json", *parts):
                yield given, source / name
        else:
            yield given, source


def _check_not_in_shards(path: Path, flag: str) -> None:
    """`path` (a file, or `folder/_` for a folder) must not sit in a run dir's `trajectories/`."""
    target = path.resolve()
    for folder in target.parents:
        if folder.name == "trajectories" and is_run_dir(folder.parent):
            raise UserError(
                f"{flag} {path} is inside the run dir {folder.parent}'s trajectories/ folder, which holds only "
                "its shards (anything written there is read back as one); write it elsewhere"
            )


def is_run_dir(folder: Path) -> bool:
    """A collect run dir: its manifest, its journal, or trajectory shards (of a sharded run, any part's)."""
    shards = folder / "trajectories"
    return (
        (folder / "manifest.json").is_file()
        or (folder / "journal.jsonl").exists()
        or any(folder.glob("shard-*-of-*.manifest.json"))
        or (shards.is_dir() and any(shards.glob("*part-*.parquet")))
    )


@contextmanager
def _os_errors_named(flag: str, path: Path) -> Iterator[None]:
    """A path the system refuses to even look at (a name too long, a loop of links) is the user's to fix."""
    try:
        yield
    except OSError as error:
        raise UserError(f"{flag} {str(path)[:200]}: {error.strerror or error}") from None
    except RuntimeError as error:  # Path.resolve on a loop of links (Python < 3.13)
        if "loop" not in str(error).lower():
            raise
        raise UserError(f"{flag} {str(path)[:200]}: a loop of symbolic links") from None


def _check_creatable(folder: Path, flag: str, target: Path) -> None:
    existing = folder.absolute()
    while not existing.exists():
        existing = existing.parent
    if not existing.is_dir():
        raise UserError(f"{flag} {target}: {existing} is a file, so no folder can be made under it")
    if not os.access(existing, os.W_OK | os.X_OK):
        raise UserError(f"{flag} {target}: no permission to write in {existing}")
