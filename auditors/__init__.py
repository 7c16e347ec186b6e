"""Auditors of a DP defense's claim: measurements with privileges no party holds, never attacks; each registered in
``vflpriv.auditors``.

May import: common, config, store, data, models, engine, defenses.
"""
