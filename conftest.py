"""Repository-level pytest settings: keep outputs and benchmarks out of collection.

The plugin itself is loaded through its ``pytest11`` entry point (``pip install -e .``).
"""

collect_ignore = ["reports", "benchmarks", "build"]
