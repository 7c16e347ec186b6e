"""What produced a result: vflpriv's own version and those of the libraries it ran on."""

from __future__ import annotations

import platform
from importlib.metadata import PackageNotFoundError, version


def own_version() -> str:
    try:
        return version("vflpriv")
    except PackageNotFoundError:  # a source tree that is not installed
        return "unknown"


def versions() -> str:
    """``vflpriv X, torch Y, pandas Z, python W``, for reports."""
    import pandas as pd
    import torch

    return (f"vflpriv {own_version()}, torch {torch.__version__}, pandas {pd.__version__}, "
            f"python {platform.python_version()}")
