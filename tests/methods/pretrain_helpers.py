"""Helpers of the method tests: tiny pretraining settings, a federation built as the runner builds one."""

from __future__ import annotations

from vflpriv import run as runner
from vflpriv.config import RunConfig
from vflpriv.engine import Federation
from vflpriv.planning import Plan, plan

#: Small heads and one short global iteration: every method runs in about a second on digits.
TINY_SSL = {"batch_size": 256, "projector_hidden": 64, "projector_dim": 32, "predictor_hidden": 16, "queue_size": 256}
TINY_MODEL = {"hidden": 64, "out_dim": 32}


def tiny_options(method: str, **changes) -> dict:
    """TINY_SSL plus one epoch / global iteration, for any registered pretraining method name."""
    if not method.startswith(("local-", "cssl-", "gssl-", "fedhssl")):
        return dict(changes)
    opts = dict(TINY_SSL)
    opts["epochs" if method.startswith("local-") else "global_iterations"] = 1
    opts.update(changes)
    return opts


def build_federation(config: RunConfig) -> tuple[Plan, Federation]:
    """The plan and the federation of ``config`` (as ``vflpriv.run.execute`` builds them), untrained."""
    p = plan(config)
    return p, runner.build_federation(p)


def pretrain_config(method: str, *, parties: int = 2, seed: int = 0, defenses=(), **options) -> RunConfig:
    return RunConfig.model_validate({
        "partition": {"parties": parties, "labeled": 100, "aux": 40},
        "model": TINY_MODEL,
        "method": {"name": method, "options": tiny_options(method, **options)},
        "defenses": list(defenses),
        "seed": seed,
    })
