"""The tool-using embedded model and its protocol: `--teacher smollm2-tir --protocol codeblock`.

`smollm2-tir` is SmolLM2-135M-Instruct shown two worked examples of the codeblock protocol
(engines.demonstrated); `smollm2` stays the plain model. They are the no-argument defaults of
every command (the settings dataclasses read them here). Real work uses a real teacher.
"""

from agentdata.engines.smollm2 import SMOLLM2_TIR_SPEC

DEFAULT_ENGINE = SMOLLM2_TIR_SPEC
DEFAULT_PROTOCOL = "codeblock"  # the protocol smollm2-tir's worked examples are written in
