"""What outlives a run: the run records, the SQLite results store they are kept in, the verified cache of
pretrainings, priors and datasets, and the folders and versions they are written with.

May import: common, config.
"""
