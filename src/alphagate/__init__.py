"""alphagate — measure α before you flip the flag.

Models, simulates, measures, benchmarks, gates and plans speculative decoding
(EAGLE-3, EAGLE, draft models, n-gram, MTP) for vLLM and SGLang deployments.
"""

__version__ = "0.1.0"

__all__ = ["__version__"]
