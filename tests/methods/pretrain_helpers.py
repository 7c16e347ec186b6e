"""Helpers of the method tests: tiny pretraining settings, a federation built as the runner builds one."""

from __future__ import annotations

from vflpriv.config.schema import RunConfig
from vflpriv.engine import Federation
from vflpriv.runner import execution as runner
from vflpriv.runner.planning import Plan, plan

#: Small heads and one short global iteration: every method runs in about a second on digits.
TINY_SSL = {"batch_size": 256, "projector_hidden": 64, "projector_dim": 32, "predictor_hidden": 16, "queue_size": 256}
TINY_MODEL = {"hidden": 64, "out_dim": 32}


#: Short settings of the methods of papers 001 and 003 and the references.
TINY_OTHER = {
    "vflhlp": {"supervised_epochs": 2, "scarf_epochs": 1, "scarf_batch_size": 256},
    "local-a": {"supervised_epochs": 2},
    "ssvfl": {**TINY_SSL, "epochs": 1},
    "centralized-lr": {"max_iter": 200},
    "centralized-gbdt": {"max_iter": 20},
    "oneshot": {"client_epochs": 1, "server_epochs": 2},
    "fewshot": {"client_epochs": 1, "server_epochs": 2},
}


def tiny_options(method: str, **changes) -> dict:
    """Short settings (one epoch / global iteration, small heads) for any built-in method name."""
    for prefix, options in TINY_OTHER.items():
        if method.startswith(prefix):
            return {**options, **changes}
    if not method.startswith(("local-", "cssl-", "gssl-", "fedhssl")):
        return dict(changes)
    opts = dict(TINY_SSL)
    opts["epochs" if method.startswith("local-") else "global_iterations"] = 1
    opts.update(changes)
    return opts


def build_federation(config: RunConfig) -> tuple[Plan, Federation]:
    """The plan and the federation of ``config`` (as ``vflpriv.runner.execution.execute`` builds them), untrained."""
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
