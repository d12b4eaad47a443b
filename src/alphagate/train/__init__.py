"""``alphagate train-head``: a domain EAGLE-3 head trained on a team's own request log, and the
gain measured on held-out requests of the same log (:mod:`.run`).

- :mod:`.config` — the run's settings, validated once, and what a resumed run must repeat;
- :mod:`.split` — the log's requests filtered to a class and split into train and held-out;
- :mod:`.capture` — the target's hidden states on the train split, in the ``speculators``
  hidden-state file layout, resumable (torch);
- :mod:`.head` — the head as the ``speculators`` library defines it: new, or started from an
  existing head in vLLM's or the ``speculators`` format (torch, speculators);
- :mod:`.loop` — the training loop: packed batches, training-time test, checkpoints (torch);
- :mod:`.speculators` — the same job as ``speculators train`` commands for a GPU machine;
- :mod:`.results` — what ``train-head`` writes and prints;
- :mod:`.run` — the phases, in order.

Nothing is imported here, so that reading a result loads no model code; torch and speculators
are imported only by the modules that run a model.
"""
