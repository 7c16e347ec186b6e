"""Tables, plots, HTML reports and the audit's text, built from records only (pandas DataFrames read
from a store), never from the engine.

May import: common, config, store, tradeoff.
"""
