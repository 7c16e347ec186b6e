"""Feature-inference attacks: what an adversary (the active party, the server, or a passive party) infers about a
victim party's raw features from the per-sample messages it received about them, its own data and models, and the
victim features of its few known samples (``partition.aux_features``). Each returns reconstructions scaled to [0, 1];
the runner scores them against the truth it alone holds and against the adversary's feature prior."""
