"""Attacks, grouped by the secret they infer (``labels/``: the active party's labels; ``features/``: a victim party's
raw features), each registered in ``vflpriv.attacks`` and declaring its ``secret`` and the ``roles`` that may run it.

May import: common, config, store, data, models, engine.
"""
