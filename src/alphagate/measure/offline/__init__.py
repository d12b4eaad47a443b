"""``alphagate measure offline``: α of a candidate drafter on logged traffic, before speculation is
turned on (:mod:`.run`).

- :mod:`.config` — the run's settings and the ``--drafter`` spec;
- :mod:`.requests` — request logs to what was asked and answered (bench ``--save-text`` records,
  OpenAI JSONL, ShareGPT), their classes and the sample;
- :mod:`.score` — a batch of requests scored and walked, in this process or a Ray worker;
- :mod:`.models` — the target in transformers + torch (the ``offline`` extra, imported only
  when a run loads its models) and the teacher-forced pass;
- :mod:`.proposers` — one proposer per drafter behind one protocol (n-gram, draft model, EAGLE-3);
- :mod:`.eagle3` — an EAGLE-3 head in vLLM's format: its config parsed, its forward and chains;
- :mod:`.ngram` — vLLM's n-gram proposer replayed at every context length, in numpy;
- :mod:`.walk` — the speculative chain walk: vLLM's counters per request for every K;
- :mod:`.stats` — acceptance from per-request counters, with bootstrap intervals;
- :mod:`.results` — what ``measure offline`` adds to a result;
- :mod:`.ray` — ``--ray``: the batches scored by Ray actors.

Nothing is imported here, so that reading a result (``measure.results``) loads no model code.
"""
