"""The bottom layer: the record base class, the glossary, model shapes, traffic classes, errors.

Everything above imports from here; this package imports only pydantic and numpy.
"""

from alphagate.core.errors import ConfigError, SpecError
from alphagate.core.glossary import GLOSSARY
from alphagate.core.records import RESULTS_SCHEMA, Frozen, Results, finite, results_payload
from alphagate.core.shapes import TransformerShape
from alphagate.core.traffic import TrafficClass, parse_traffic_class, validate_classes

__all__ = [
    "GLOSSARY",
    "RESULTS_SCHEMA",
    "ConfigError",
    "Frozen",
    "Results",
    "SpecError",
    "TrafficClass",
    "TransformerShape",
    "finite",
    "parse_traffic_class",
    "results_payload",
    "validate_classes",
]
