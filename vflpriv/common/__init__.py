"""The foundation every layer may use: one-line errors, the console, named random streams, metrics.

May import: nothing of vflpriv.
"""
