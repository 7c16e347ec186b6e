"""Sweeps over defense strength x seeds (grids, executors, resume through the store), CAP, DCS and the
leakage statistics.

May import: common, config, store, runner.
"""

from vflpriv.tradeoff.cap import cap, cap_table, strength_summary

__all__ = ["cap", "cap_table", "strength_summary"]
