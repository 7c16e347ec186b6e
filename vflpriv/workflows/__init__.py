"""What each command does end to end, shared by the command line and the Python API: evaluate and sweep into a
store with their outputs, the audit and its conformance checks, describe, and the papers' reproductions.

May import: common, config, store, data, models, engine, methods, attacks, defenses, runner, tradeoff, reports.
"""
