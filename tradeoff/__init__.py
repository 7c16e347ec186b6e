"""Sweeps over defense strength x seeds (grids, executors, resume through the store), CAP, DCS and the
leakage statistics.

May import: common, config, store, runner.
"""

__all__ = ["cap_table", "strength_summary"]


def __getattr__(name: str):
    """``vflpriv.tradeoff.cap_table`` and ``strength_summary``, imported at first use (PEP 562): a sweep's workers and
    the command line import ``vflpriv.tradeoff.executors`` and the like, which need no pandas. (``cap``, the
    function, is ``vflpriv.tradeoff.cap.cap``: the package's ``cap`` is its module.)"""
    if name in __all__:
        from vflpriv.tradeoff import cap

        return getattr(cap, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
