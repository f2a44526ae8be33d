"""Per-trajectory columns the filters read, computed from the stored trajectory columns.

All are polars expressions over the Parquet columns of `agentdata.records.Trajectory`,
so a lazy scan of the shards computes them without building Python objects.
"""

from __future__ import annotations

import polars as pl

from agentdata.records import TOOL_NAME
from agentdata.steps.text import normalised

_ASSISTANT = pl.element().struct.field("role") == "assistant"
# A tool's name in the `tools` JSON text: `"name": "..."` (a parameter's schema is an object, never a string).
DECLARED_NAME = r'"name":\s*"((?:[^"\\]|\\.)*)"'


def tool_calls() -> pl.Expr:
    """Every tool call of a trajectory, in order, as one list of structs."""
    per_message = pl.col("messages").list.eval(pl.element().struct.field("tool_calls"))
    return per_message.list.eval(pl.element().list.explode(keep_nulls=False, empty_as_null=False))


def malformed_tool_calls() -> pl.Expr:
    """Calls that could not run as written: a call of the code tool whose arguments are not JSON holding a
    `code` string, a call of another tool whose arguments are not a JSON object, and each tool named in a
    call that the trajectory does not declare in its `tools` (an imported trace's own tools, `python_exec`
    say, are declared there and are its tools as much as the code interpreter is agentdata's).

    A trajectory may also carry the protocol parser's own count in
    `metadata.malformed_tool_calls` (markup the parser could not turn into a call);
    both are added.
    """
    functions = tool_calls().list.eval(pl.element().struct.field("function"))
    arguments, name = pl.element().struct.field("arguments"), pl.element().struct.field("name")
    json_object = arguments.str.json_path_match("$").is_not_null() & arguments.str.strip_chars().str.starts_with("{")
    bad_arguments = functions.list.eval(
        pl.when(name == TOOL_NAME).then(arguments.str.json_path_match("$.code").is_null()).otherwise(~json_object)
    ).list.sum()
    named = functions.list.eval(name.fill_null(""))
    undeclared = named.list.set_difference(declared_tools()).list.len()
    from_parser = pl.col("metadata").str.json_path_match("$.malformed_tool_calls").cast(pl.Int64, strict=False)
    total = bad_arguments.cast(pl.Int64).fill_null(0) + undeclared.cast(pl.Int64).fill_null(0)
    return (total + from_parser.fill_null(0)).alias("malformed_tool_calls")


def declared_tools() -> pl.Expr:
    """The names of the tools a trajectory declares, and the code tool (rows written before `tools` was kept
    declare none). Read from the JSON text as patterns: a `tools` list of another shape must not stop a scan."""
    names = pl.col("tools").fill_null("").str.extract_all(DECLARED_NAME)
    names = names.list.eval(pl.element().str.extract(DECLARED_NAME, 1))
    return pl.concat_list([names, pl.lit([TOOL_NAME])])


def model_turns() -> pl.Expr:
    """The trajectory's assistant messages: what of it the model wrote."""
    return pl.col("messages").list.eval(_ASSISTANT).list.sum().cast(pl.Int64).alias("model_turns")


def call_code() -> pl.Expr:
    """The arguments of every tool call, joined: what the trajectory computed."""
    return tool_calls().list.eval(pl.element().struct.field("function").struct.field("arguments")).list.join("\n")


def solution_text() -> pl.Expr:
    """What the model wrote: assistant contents and the code of its calls, normalised."""
    contents = pl.col("messages").list.eval(pl.element().filter(_ASSISTANT).struct.field("content")).list.join("\n")
    return normalised(pl.concat_str([contents, call_code()], separator="\n")).alias("solution_text")


def trajectory_features(with_text: bool = False) -> list[pl.Expr]:
    """The columns a curate run needs besides the stored scalars."""
    total_tokens = (pl.col("prompt_tokens") + pl.col("completion_tokens")).alias("total_tokens")
    features = [malformed_tool_calls(), model_turns(), total_tokens]
    text = solution_text()
    exact_key = pl.concat_str([normalised(pl.col("question")), text], separator="\n").hash(seed=0)
    features.append(exact_key.alias("text_hash"))
    features.append(normalised(call_code()).hash(seed=0).alias("code_hash"))
    if with_text:
        features.append(text)
    return features
