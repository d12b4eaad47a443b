"""Calibration: fit the step-time model's coefficients to a real server's measurements.

:mod:`~alphagate.calibrate.observations` reads measured levels (``alphagate bench`` results,
``vllm bench serve`` result files), :mod:`~alphagate.calibrate.sweep` measures them against a
live endpoint, and :mod:`~alphagate.calibrate.fit` fits the coefficients and writes the
:class:`~alphagate.specs.calibration.CalibrationProfile` that ``simulate``, ``plan`` and ``twin``
read with ``--calibration``.
"""

from alphagate.calibrate.fit import FUNCTIONAL_FORM, fit_profile
from alphagate.calibrate.observations import Observation, read_observations

__all__ = ["FUNCTIONAL_FORM", "Observation", "fit_profile", "read_observations"]
