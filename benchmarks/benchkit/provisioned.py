"""What scripts/provision_sglang_cpu.sh provisioned: the SGLang venv's python, the tiny model."""

from __future__ import annotations

import os
from pathlib import Path

DEFAULT_SGLANG_PYTHON = Path.home() / ".cache/pytest-ppsweep/venv-sglang-0.5.23/bin/python"
DEFAULT_MODELS = Path.home() / ".cache/pytest-ppsweep/models"


def sglang_python() -> str:
    """The SGLang venv's python: $PPSWEEP_SGLANG_PYTHON, else the provisioning default."""
    path = os.environ.get("PPSWEEP_SGLANG_PYTHON") or str(DEFAULT_SGLANG_PYTHON)
    if not Path(path).exists():
        raise SystemExit(
            f"no SGLang python at {path}: run `bash scripts/provision_sglang_cpu.sh` "
            "(or set PPSWEEP_SGLANG_PYTHON)"
        )
    return path


def tiny_tokenizer() -> str:
    """A tiny model dir with a 256-id tokenizer: $PPSWEEP_MODEL_TINY_LLAMA_H4 or the default."""
    path = os.environ.get("PPSWEEP_MODEL_TINY_LLAMA_H4") or str(DEFAULT_MODELS / "tiny-llama-h4")
    if not Path(path).is_dir():
        raise SystemExit(f"no tiny model at {path}: run `bash scripts/provision_sglang_cpu.sh`")
    return path
