"""Writing an SFT set: canonical rows (as collect stores them) in the form each reader takes (formats/forms.py).

curate writes its kept rows through `write_sft_form` and `synth stitch` its stitched ones, so the two
sets load together. `writer.py` picks the form; the `hf` form (Parquet) is written column by column
(`hf_form.py`, with `arrow_nest.py`, `json_arrow.py` and `codeblock_form.py`), the `openai` form (JSONL)
row by row.
"""
