"""The tool-using embedded model and its protocol: `--teacher smollm2-tir --protocol codeblock`.

`smollm2-tir` is SmolLM2-135M-Instruct shown two worked examples of the codeblock protocol
(engines.demonstrated); `smollm2` stays the plain model. Issue 14 makes these the no-argument
defaults of `collect` and `filter` (not wired yet: the settings dataclasses still say smollm2 /
hermes). Real work uses a real teacher.
"""

DEFAULT_ENGINE = "smollm2-tir"
DEFAULT_PROTOCOL = "codeblock"  # the protocol smollm2-tir's worked examples are written in
