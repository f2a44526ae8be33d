"""Writing an SFT set: canonical rows (as collect stores them) in the form asked for (formats/forms.py).

`synth stitch` writes its stitched rows through `write_sft_form`, in the canonical form curate writes
by default, so the two sets load together (curate writes its canonical set straight from the shards, and
an export through here). `writer.py` picks the form: canonical (Parquet) as it is; the `hf` export
(Parquet) column by column (`hf_form.py`, with `arrow_nest.py`, `json_arrow.py` and `codeblock_form.py`);
the `openai` export (JSONL) row by row.
"""
