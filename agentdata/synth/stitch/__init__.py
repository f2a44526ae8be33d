"""The "stitched synthetic" baseline: text solutions turned into tool-use trajectories after the fact.

The findings compare SFT on real trajectories (a model that actually called the code tool
and read the output) with SFT on stitched ones. This module makes the stitched side from
worked text solutions, so the comparison can be run on any data:

1. The solution is cut into steps (lines; display math stays whole).
2. In each step, calculations are found: plain arithmetic chains (`3*4 = 12`), GSM8K
   calculator notes (`<<3*4=12>>`) and LaTeX math with a stated result
   (`$\\frac{3}{4}\\cdot 12 = 9$`, `$\\sum_{k=1}^{10} k = 55$`), parsed to SymPy. Names assigned in
   the text (`a = 3 \\cdot 4 = 12`) become Python variables later steps may use.
3. Each step with calculations becomes: the assistant's text of the step, then a code cell
   that recomputes them, run in a real sandbox session (one per solution, so cells share
   state), and its real output as the tool message.
4. The rest of the text closes the trajectory with `\\boxed{answer}`.

The code is pasted in after the reasoning, never chosen by a model: that is exactly the
"stitched" property the findings warn about.
"""

from agentdata.synth.stitch.build import StitchConfig, plan_steps, stitch_solution
from agentdata.synth.stitch.calculations import find_calculations, split_steps, split_top_level_equals
from agentdata.synth.stitch.files import StitchSummary, load_solutions, stitch_file, write_sft

__all__ = [
    "StitchConfig",
    "StitchSummary",
    "find_calculations",
    "load_solutions",
    "plan_steps",
    "split_steps",
    "split_top_level_equals",
    "stitch_file",
    "stitch_solution",
    "write_sft",
]
