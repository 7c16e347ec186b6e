"""Sweeps over defense strength x seeds, executors, resume through the store, and CAP."""

from vflpriv.tradeoff.cap import cap, cap_table, strength_summary

__all__ = ["cap", "cap_table", "strength_summary"]
