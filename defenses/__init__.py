"""Defenses, grouped by where they hook in; each registered in ``vflpriv.defenses``.

May import: common, config, store, data, models, engine.
"""
