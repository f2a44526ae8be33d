"""The one place that reads a user's input file into rows, whatever its form.

Every command that takes problems, benchmarks, solutions or trajectory files reads them
here, so every file form follows the same rules (docs/input-files.md):

- JSONL (one object per line), JSON (a list of objects, or {"data": [...]} / {"rows": [...]}),
  CSV (a header row), Parquet, a directory saved with `datasets.save_to_disk`, or a dataset folder in the
  Hub's layout (a README.md card and data/: what `curate` and `filter` write with `--out DIR`).
- Text is UTF-8; a UTF-8 byte-order mark (as spreadsheet programs write) is accepted and
  dropped. Other encodings are refused, naming the line and byte, rather than guessed:
  a wrong guess would silently change the questions.
- An input is a regular file (or a dataset dir), read within a size bound: a FIFO would wait for
  a writer for ever, a link to /dev/zero or /dev/urandom would read until memory runs out.
- Anything wrong raises `InputFileError`: one line naming the file and, when known, the row.
"""

from __future__ import annotations

import csv
import errno
import io
import json
import os
import stat
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any, BinaryIO

from agentdata.errors import InputFileError

SUFFIXES = (".jsonl", ".json", ".parquet", ".csv")
UTF8_BOM = b"\xef\xbb\xbf"
OTHER_BOMS = {
    b"\xff\xfe\x00\x00": "UTF-32",
    b"\x00\x00\xfe\xff": "UTF-32",
    b"\xff\xfe": "UTF-16",
    b"\xfe\xff": "UTF-16",
}
SAVE_AS_UTF8 = "save it as UTF-8 (e.g. `iconv -f latin1 -t utf-8 FILE > NEW`)"
# The largest input file read (it is read whole): far above any real problem set, far below a machine's memory.
MAX_INPUT_BYTES = 8 * 2**30
_SPECIAL = {
    stat.S_IFIFO: "a named pipe (FIFO)",
    stat.S_IFCHR: "a character device",
    stat.S_IFBLK: "a block device",
    stat.S_IFSOCK: "a socket",
}


def check_input(path: str | Path, max_bytes: int | None = None) -> os.stat_result:
    """`path` is a readable regular file of at most `max_bytes`, or a folder; else an InputFileError saying
    what it is instead (a broken link, a loop of links, a FIFO, a device, too big)."""
    path = Path(path)
    max_bytes = MAX_INPUT_BYTES if max_bytes is None else max_bytes
    try:
        status = path.stat()
    except OSError as error:
        raise InputFileError(path, _stat_problem(path, error)) from None
    _check_status(path, status, max_bytes)
    return status


def check_regular_file(path: str | Path) -> os.stat_result:
    """`path` is a regular file (of any size: a run's own shard, manifest or index, not a user's input to read
    whole); else an InputFileError saying what it is instead (a FIFO, a device, a folder, a broken link)."""
    path = Path(path)
    try:
        status = path.stat()
    except OSError as error:
        raise InputFileError(path, _stat_problem(path, error)) from None
    _check_regular(path, status)
    return status


def open_regular_file(path: str | Path) -> BinaryIO:
    """`path` opened for reading in binary, without waiting: a FIFO or a device (even one swapped in after a
    check) is an InputFileError saying what it is, never waited on or read without end."""
    try:
        descriptor = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
    except OSError as error:
        raise InputFileError(path, f"cannot read the file ({_stat_problem(Path(path), error)})") from None
    handle = os.fdopen(descriptor, "rb")
    try:
        _check_regular(Path(path), os.fstat(descriptor))
    except InputFileError:
        handle.close()
        raise
    return handle


def _check_regular(path: Path, status: os.stat_result) -> None:
    if not stat.S_ISREG(status.st_mode):
        kind = "a folder" if stat.S_ISDIR(status.st_mode) else _SPECIAL.get(stat.S_IFMT(status.st_mode), "no file")
        shown = f" (through the link to {os.path.realpath(path)})" if path.is_symlink() else ""
        raise InputFileError(path, f"is {kind}{shown}, not a regular file")


def _check_status(path: Path, status: os.stat_result, max_bytes: int) -> None:
    if stat.S_ISDIR(status.st_mode):
        return
    kind = _SPECIAL.get(stat.S_IFMT(status.st_mode))
    if kind is not None:
        shown = f" (through the link to {os.path.realpath(path)})" if path.is_symlink() else ""
        raise InputFileError(path, f"is {kind}{shown}, not a regular file: give a file or a dataset dir")
    if status.st_size > max_bytes:
        raise InputFileError(
            path, f"is {_size(status.st_size)}, more than the {_size(max_bytes)} an input may be: split it"
        )


def _stat_problem(path: Path, error: OSError) -> str:
    if error.errno == errno.ELOOP:
        return "a loop of symbolic links: it points back at itself"
    if error.errno == errno.ENOENT and path.is_symlink():
        return f"a symbolic link to {os.readlink(path)}, which does not exist"
    if error.errno == errno.ENOTDIR:
        return "a part of the path is a file, not a folder"
    return error.strerror.lower() if error.strerror else str(error)


def _size(count: int) -> str:
    for unit, scale in (("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if count >= scale:
            return f"{count / scale:.1f} {unit}"
    return f"{count} bytes"


def read_rows(path: str | Path) -> Iterator[dict[str, Any]]:
    """The raw rows of an input file, in order; a bad file raises InputFileError."""
    path = Path(path)
    if stat.S_ISDIR(check_input(path).st_mode):
        yield from _read_dataset_dir(path)
        return
    suffix = path.suffix.lower()
    readers = {".jsonl": _read_jsonl, ".json": _read_json, ".parquet": _read_parquet, ".csv": _read_csv}
    if suffix not in readers:
        raise InputFileError(path, f"unknown file type {suffix!r}; use one of {', '.join(SUFFIXES)} or a dataset dir")
    yield from readers[suffix](path)


def read_nonempty_rows(path: str | Path) -> list[dict[str, Any]]:
    """All rows of `path`; a file with none is an InputFileError."""
    rows = list(read_rows(path))
    if not rows:
        raise InputFileError(path, "no rows: the file is empty")
    return rows


def first_row(path: str | Path) -> dict[str, Any] | None:
    """The first row of a JSONL file or the column names of a Parquet file (as keys), to tell what a file holds."""
    path = Path(path)
    check_input(path)
    if path.suffix.lower() == ".parquet":
        return dict.fromkeys(_parquet_schema_names(path))
    for row in read_rows(path):
        return row
    return None


# --------------------------------------------------------------------------- text


def read_text(path: Path, max_bytes: int | None = None) -> str:
    """The whole file as text: UTF-8, a leading byte-order mark dropped; anything else is refused."""
    data = _read_bytes(path, max_bytes)
    _refuse_other_boms(path, data)
    return _decode(path, data.removeprefix(UTF8_BOM), line_offset=0)


def _read_bytes(path: Path, max_bytes: int | None = None) -> bytes:
    """The file's bytes, at most `max_bytes` (MAX_INPUT_BYTES). Opened without blocking and checked on the
    open file, so a path swapped for a FIFO or a device after the first check is refused too, never waited on."""
    max_bytes = MAX_INPUT_BYTES if max_bytes is None else max_bytes
    with open_regular_file(path) as handle:
        status = os.fstat(handle.fileno())
        _check_status(Path(path), status, max_bytes)
        try:
            chunks = [handle.read(status.st_size + 1)]
            size = len(chunks[0])
            while size > status.st_size and size <= max_bytes:  # it grew, or the system does not know its size
                chunk = handle.read(2**20)
                if not chunk:
                    break
                chunks.append(chunk)
                size += len(chunk)
        except OSError as error:
            raise InputFileError(path, f"cannot read the file ({error.strerror or error})") from None
    if size > max_bytes:
        raise InputFileError(path, f"is more than the {_size(max_bytes)} an input may be: split it")
    return b"".join(chunks) if len(chunks) > 1 else chunks[0]


def _refuse_other_boms(path: Path, data: bytes) -> None:
    for bom, encoding in OTHER_BOMS.items():
        if data.startswith(bom):
            raise InputFileError(
                path, f"the file is {encoding} text (it starts with a {encoding} byte-order mark); save it as UTF-8"
            )


def _decode(path: Path, data: bytes, line_offset: int) -> str:
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as error:
        line = line_offset + data.count(b"\n", 0, error.start) + 1
        column = error.start - (data.rfind(b"\n", 0, error.start) + 1) + 1
        byte = data[error.start : error.start + 1].hex().upper()
        raise InputFileError(
            path, f"not UTF-8 text (byte 0x{byte} at line {line}, column {column}); {SAVE_AS_UTF8}"
        ) from None


def _loads(path: Path, text: str, row: int | None = None) -> Any:
    try:
        value = json.loads(text)
    except json.JSONDecodeError as error:
        where = "" if row is not None else f" at line {error.lineno}"
        raise InputFileError(path, f"not valid JSON ({error.msg}{where})", row=row) from None
    except RecursionError:
        raise InputFileError(path, "JSON nested too deeply to read", row=row) from None
    if "\\ud" in text.lower():  # a \uD800-\uDFFF escape may be half a pair: no UTF-8 file can hold that
        try:
            json.dumps(value, ensure_ascii=False).encode("utf-8")
        except UnicodeEncodeError:
            raise InputFileError(
                path, "a string holds an unpaired UTF-16 surrogate escape (\\uD800-\\uDFFF)", row=row
            ) from None
    return value


# --------------------------------------------------------------------------- forms


def _read_jsonl(path: Path) -> Iterator[dict[str, Any]]:
    data = _read_bytes(path)
    _refuse_other_boms(path, data)
    for number, line in enumerate(data.removeprefix(UTF8_BOM).split(b"\n"), start=1):
        if not line.strip():
            continue
        row = _loads(path, _decode(path, line, line_offset=number - 1), row=number)
        if not isinstance(row, dict):
            raise InputFileError(path, f"expected a JSON object, got {kind_of(row)}", row=number)
        yield row


def _read_json(path: Path) -> Iterator[dict[str, Any]]:
    data = _loads(path, read_text(path) or "[]")
    if isinstance(data, dict):
        data = data.get("data", data.get("rows", [data]))
    if not isinstance(data, list):
        raise InputFileError(path, f"expected a list of objects, got {kind_of(data)}")
    for number, row in enumerate(data, start=1):
        if not isinstance(row, dict):
            raise InputFileError(path, f"expected a JSON object, got {kind_of(row)}", row=number)
        yield row


def _read_csv(path: Path) -> Iterator[dict[str, Any]]:
    # A worked solution easily passes csv's default 128 KiB field limit; the file is in memory anyway.
    csv.field_size_limit(min(sys.maxsize, 2**31 - 1))
    reader = csv.DictReader(io.StringIO(read_text(path), newline=""))
    number = 0
    try:
        for number, row in enumerate(reader, start=1):
            if None in row:  # DictReader files surplus fields under the key None
                raise InputFileError(path, f"{len(row[None])} more field(s) than the header has columns", row=number)
            yield row
    except csv.Error as error:
        raise InputFileError(path, f"not valid CSV ({error})", row=number + 1) from None


def _read_parquet(path: Path) -> Iterator[dict[str, Any]]:
    import pyarrow.parquet as pq

    try:
        rows = pq.read_table(path).to_pylist()
    except Exception as error:  # pyarrow raises several types for a broken file
        raise InputFileError(path, f"not a readable Parquet file ({_one_line(error)})") from None
    yield from rows


def _parquet_schema_names(path: Path) -> list[str]:
    import pyarrow.parquet as pq

    try:
        return list(pq.read_schema(path).names)
    except Exception as error:  # pyarrow raises several types for a broken file
        raise InputFileError(path, f"not a readable Parquet file ({_one_line(error)})") from None


def _read_dataset_dir(path: Path) -> Iterator[dict[str, Any]]:
    import datasets

    if (path / "README.md").is_file() or (path / "data").is_dir():  # the Hub's layout (a set agentdata wrote)
        yield from _read_hub_folder(path)
        return
    try:
        dataset = datasets.load_from_disk(str(path))
    except Exception as error:
        raise InputFileError(path, f"not a dataset saved with save_to_disk ({_one_line(error)})") from None
    if isinstance(dataset, datasets.DatasetDict):
        if not dataset:
            raise InputFileError(path, "the saved DatasetDict has no splits")
        split = "test" if "test" in dataset else next(iter(dataset))
        dataset = dataset[split]
    yield from dataset


def _read_hub_folder(path: Path) -> Iterator[dict[str, Any]]:
    """A folder `datasets.load_dataset(DIR)` reads (its card's `configs`, else the files under data/); the
    one Parquet file of a folder agentdata wrote is read directly (no copy into datasets' cache)."""
    import datasets

    files = sorted((path / "data").glob("*.parquet"))
    if len(files) == 1 and not (path / "data" / "train.jsonl").exists():
        yield from _read_parquet(files[0])
        return
    try:
        dataset = datasets.load_dataset(str(path))
    except Exception as error:  # datasets raises many types for a folder it cannot read
        raise InputFileError(path, f"not a dataset folder datasets can load ({_one_line(error)})") from None
    split = "train" if "train" in dataset else next(iter(dataset))
    yield from dataset[split]


def kind_of(value: Any) -> str:
    """What a JSON-ish value is, as a message says it: "an object", "a list", "a number", ..."""
    return {dict: "an object", list: "a list", str: "a string", bool: "a boolean", type(None): "null"}.get(
        type(value), "a number"
    )


def _one_line(error: BaseException) -> str:
    return " ".join(str(error).split())[:300]
