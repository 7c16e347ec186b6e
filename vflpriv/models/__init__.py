"""Encoders, heads, optimisers, training helpers and the SSL building blocks (``models.ssl``) that
methods, priors and attacks compose.

May import: common, config, store, data.
"""

from vflpriv.models.encoders import build_encoder, init_parameters, mlp_block

__all__ = ["build_encoder", "init_parameters", "mlp_block"]
