"""Settings files: a YAML or JSON mapping of setting names to values, read with care.

A settings file is a page of text someone wrote; whatever else a path holds is refused in one line
(no regular file, too large, a key given twice, a key that is not text, a YAML alias bomb).
"""

from __future__ import annotations

import json
import stat
from pathlib import Path
from typing import Any

from agentdata.errors import UserError
from agentdata.settings.fields import show_cut as _showcut

MAX_SETTINGS_BYTES = 16 * 2**20  # a settings file is a page of text; this bounds a mistaken path
MAX_SETTINGS_VALUES = 100_000  # values in a file once YAML aliases are expanded: an alias bomb stops here


def read_settings_file(path: str | Path) -> dict[str, Any]:
    """A YAML or JSON mapping of setting names to values (nested sections allowed).

    Refused in one line: a path that is no regular file, more than 16 MiB, a key given twice in one
    mapping (which one was meant?), a key that is not text, and YAML whose aliases expand past
    MAX_SETTINGS_VALUES values (a "billion laughs" bomb).
    """
    from agentdata.inputs import check_input, read_text

    path = Path(path)
    if stat.S_ISDIR(check_input(path, MAX_SETTINGS_BYTES).st_mode):
        raise UserError(f"{path}: is a folder, not a config file")
    text = read_text(path, MAX_SETTINGS_BYTES)  # UTF-8 (a byte-order mark is fine), else one line naming the byte
    kind = "JSON" if path.suffix == ".json" else "YAML"
    try:
        data = json.loads(text, object_pairs_hook=_unique_keys) if kind == "JSON" else _load_yaml(text)
    except _DuplicateKey as error:
        raise UserError(f"{path}: {error}") from None
    except Exception as error:  # yaml and json raise several types for malformed text
        first_line = str(error).splitlines()[0] if str(error) else type(error).__name__
        raise UserError(f"{path}: not valid {kind} ({first_line})") from None
    data = {} if data is None else data
    if not isinstance(data, dict):
        raise UserError(f"{path}: expected a mapping of setting names to values, got {type(data).__name__}")
    _check_shape(path, data)
    return data


class _DuplicateKey(ValueError):
    pass


def _unique_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    seen: dict[str, Any] = {}
    for key, value in pairs:
        if key in seen:
            raise _DuplicateKey(f"the key {_showcut(key)} is given twice in one mapping; keep one")
        seen[key] = value
    return seen


def _load_yaml(text: str) -> Any:
    import yaml

    class UniqueKeyLoader(getattr(yaml, "CSafeLoader", yaml.SafeLoader)):  # libyaml's parser when there
        """safe_load, but a mapping that names one key twice is refused (PyYAML keeps the last)."""

        def construct_mapping(self, node: Any, deep: bool = False) -> dict:
            seen: dict[Any, Any] = {}
            for key_node, _ in node.value:
                if key_node.tag == "tag:yaml.org,2002:merge":  # `<<: *base`: overriding its keys is the point
                    continue
                key = self.construct_object(key_node, deep=True)
                if isinstance(key, (str, int, float, bool)) or key is None:
                    if key in seen:
                        line = key_node.start_mark.line + 1
                        raise _DuplicateKey(
                            f"line {line}: the key {_showcut(key)} is given twice in one mapping; keep one"
                        )
                    seen[key] = True
            return super().construct_mapping(node, deep=deep)

    return yaml.load(text, Loader=UniqueKeyLoader)  # a SafeLoader: no Python objects


def _check_shape(path: Path, data: Any) -> None:
    """Every key is text, and the values, aliases expanded, stay within MAX_SETTINGS_VALUES."""
    count = 0
    pending: list[tuple[Any, str]] = [(data, "")]
    while pending:
        value, where = pending.pop()
        count += 1
        if count > MAX_SETTINGS_VALUES:
            raise UserError(
                f"{path}: more than {MAX_SETTINGS_VALUES:,} values once YAML aliases are expanded "
                "(an alias bomb?); write the values out"
            )
        if isinstance(value, dict):
            for key, inner in value.items():
                if not isinstance(key, str):
                    raise UserError(
                        f"{path}: {where or 'top level'}: the key {_showcut(key)} is {type(key).__name__}, "
                        "not text; quote it"
                    )
                pending.append((inner, f"{where}.{key}" if where else key))
        elif isinstance(value, (list, tuple)):
            pending.extend((inner, f"{where}[{index}]") for index, inner in enumerate(value))
