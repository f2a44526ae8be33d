"""Small crafted trajectories for the curate and filter tests (helpers, no tests)."""

from __future__ import annotations

from pathlib import Path

from agentdata.records import ToolCall, Trajectory, assistant_message, tool_message, write_records


def trajectory(
    id: str,
    problem_id: str = "p1",
    question: str = "What is the sum of the first ten prime numbers?",
    code: list[str] | None = None,
    answer_text: str = "The answer is \\boxed{129}.",
    final_answer: str | None = "129",
    correct: bool = True,
    num_tool_errors: int = 0,
    source: str = "math",
    tokens: int = 100,
    bad_arguments: bool = False,
) -> Trajectory:
    code = ["print(sum([2,3,5,7,11,13,17,19,23,29]))"] if code is None else code
    messages = [{"role": "user", "content": question}]
    for index, snippet in enumerate(code):
        call = ToolCall(snippet, id=f"call_{index}").to_message()
        if bad_arguments:
            call["function"]["arguments"] = "{not json"
        messages.append({"role": "assistant", "content": f"Step {index}: compute.", "tool_calls": [call]})
        messages.append(tool_message(f"call_{index}", "129"))
    messages.append(assistant_message(answer_text))
    return Trajectory(
        id=id,
        problem_id=problem_id,
        question=question,
        answer="129",
        messages=messages,
        source=source,
        final_answer=final_answer,
        correct=correct,
        num_tool_calls=len(code),
        num_tool_errors=num_tool_errors,
        num_turns=len(code) + 1,
        prompt_tokens=tokens // 2,
        completion_tokens=tokens - tokens // 2,
        teacher="crafted",
        format="hermes",
    )


def write_run(run_dir: Path, trajectories: list[Trajectory], per_shard: int = 3) -> Path:
    """Write `trajectories` as a collect run dir with several shards."""
    for start in range(0, len(trajectories), per_shard):
        shard = run_dir / "trajectories" / f"part-{start // per_shard:05d}.parquet"
        write_records(trajectories[start : start + per_shard], shard, Trajectory)
    return run_dir
