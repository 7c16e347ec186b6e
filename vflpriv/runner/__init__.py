"""One training and its attacks: planning resolves and validates everything into a :class:`Plan` before any
training; execution trains the federation once and runs every planned attack and the adversary's prior on it,
yielding one record per attack.

May import: common, config, store, data, models, engine, methods, attacks, defenses.
"""

from vflpriv.data.load import data_by_key, data_of
from vflpriv.runner.execution import run
from vflpriv.runner.planning import Plan, plan

__all__ = ["Plan", "data_by_key", "data_of", "plan", "run"]
