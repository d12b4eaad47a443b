"""The simulator: a continuous-batching server on a roofline step-time model, and its sweeps.

Layers inside: :mod:`~alphagate.sim.cost` (step time), :mod:`~alphagate.sim.kernel` (acceptance,
counting, prefill allocation), :mod:`~alphagate.sim.engine` and :mod:`~alphagate.sim.closed_loop`
(two simulators of one server), :mod:`~alphagate.sim.results` (summaries and speedups),
:mod:`~alphagate.sim.predict` (closed-form answers from the step-time model) and
:mod:`~alphagate.sim.sweep` (what ``alphagate simulate`` runs).
"""
