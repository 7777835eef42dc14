"""pytest-ppsweep: sweep pipeline/tensor/expert parallel layouts of a multi-node SGLang service
as pytest test cases, with medians and baseline deltas in an HTML report."""

__version__ = "0.1.0"
