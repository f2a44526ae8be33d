"""Write the learning demo's inputs: worked solutions of generated problems, and the held-out set.

Training problems come from `agentdata.synth.generators` (seed given on the command line),
each with its short worked solution (`worked_solution`); the held-out set is the 16
built-in problems. A training question equal to a held-out one (after normalising
whitespace and case) is refused, and `agentdata curate --decontam` checks n-gram overlap
again on the stitched set.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from agentdata.synth.builtin import builtin_problems
from agentdata.synth.generators import generate_problems
from agentdata.synth.solutions import worked_solution


def normalised(text: str) -> str:
    return " ".join(text.lower().split())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--n", type=int, default=400, help="worked solutions to write")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--out", type=Path, default=Path("runs/learning"))
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)

    held_out = builtin_problems()
    held_out_questions = {normalised(p.question) for p in held_out}
    solutions = []
    for problem in generate_problems(args.n * 3, seed=args.seed):
        solution = worked_solution(problem)
        if solution is None:
            continue
        if normalised(problem.question) in held_out_questions:
            raise SystemExit(f"training problem {problem.id} is a held-out problem; pick another seed")
        solutions.append(
            {
                "id": problem.id,
                "question": problem.question,
                "solution": solution,
                "answer": problem.answer,
                "source": problem.source,
            }
        )
        if len(solutions) == args.n:
            break
    with open(args.out / "solutions.jsonl", "w", encoding="utf-8") as handle:
        handle.writelines(json.dumps(row) + "\n" for row in solutions)
    with open(args.out / "heldout.jsonl", "w", encoding="utf-8") as handle:
        handle.writelines(json.dumps({"id": p.id, "question": p.question, "answer": p.answer}) + "\n" for p in held_out)
    print(f"{len(solutions)} worked solutions, {len(held_out)} held-out problems -> {args.out}")


if __name__ == "__main__":
    main()
