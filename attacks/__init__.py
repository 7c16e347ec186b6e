"""Label-inference attacks, grouped by what they infer from; each registered in ``vflpriv.attacks``.

May import: common, config, store, data, models, engine.
"""
