"""Non-federated upper references: every party's features of the aligned labeled samples, pooled in one place.

- ``centralized-lr``: logistic regression (scikit-learn, L-BFGS) on standardised pooled features.
- ``centralized-gbdt``: gradient-boosted trees, scikit-learn's ``HistGradientBoostingClassifier``, or
  LightGBM with ``backend=lightgbm`` when it is installed.

They train on exactly what split learning trains on (the labeled aligned samples, with the active party's
labels as any label defense left them) but without party lines: an upper bound on utility at this label
budget, marked non-federated in every table. No message crosses, so attacks record "not applicable".
Utility is computed from the log of the predicted class probabilities.
"""

from __future__ import annotations

import importlib.util
from typing import ClassVar, Literal

import numpy as np
import torch
from pydantic import Field
from sklearn.ensemble import HistGradientBoostingClassifier
from sklearn.linear_model import LogisticRegression
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler
from torch import nn

from vflpriv.common.errors import ConfigError
from vflpriv.config.options import Options
from vflpriv.engine import Federation
from vflpriv.methods.base import Method
from vflpriv.methods.finetune import Trained


class PooledEstimator(nn.Module):
    """A fitted scikit-learn classifier behind the module interface: pooled features in, log-probabilities out."""

    def __init__(self, estimator, num_classes: int):
        super().__init__()
        self.estimator = estimator
        self.num_classes = num_classes

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        proba = self.estimator.predict_proba(x.detach().cpu().double().numpy())
        full = np.zeros((proba.shape[0], self.num_classes))
        full[:, np.asarray(self.estimator.classes_, dtype=int)] = proba  # a class absent from training: p = 0
        return torch.from_numpy(np.log(np.clip(full, 1e-12, None))).float().to(x.device)


def pooled(fed: Federation, split: str, rows: torch.Tensor | None = None) -> torch.Tensor:
    """Every party's features of ``rows`` side by side (all rows of ``split`` when None)."""
    xs = [(p.x_train if split == "train" else p.x_test) for p in fed.parties]
    return torch.cat([(x if rows is None else x[rows]).flatten(1) for x in xs], dim=1)


class CentralizedOptions(Options):
    pass


class LROptions(CentralizedOptions):
    C: float = Field(1.0, gt=0, description="inverse L2 regularisation strength (scikit-learn's default)")
    max_iter: int = Field(1000, ge=1)


class GBDTOptions(CentralizedOptions):
    backend: Literal["sklearn", "lightgbm"] = Field("sklearn", description="lightgbm needs the lightgbm package")
    max_iter: int = Field(100, ge=1, description="boosting rounds (scikit-learn's default)")
    learning_rate: float = Field(0.1, gt=0)
    max_leaf_nodes: int = Field(31, ge=2)


class Centralized(Method):
    """Base of the pooled references: fit the subclass's ``estimator(seed)`` on the pooled labeled aligned samples."""

    Options: ClassVar[type[CentralizedOptions]] = CentralizedOptions
    sends = frozenset()
    federated = False
    supports = frozenset({"top:linear"})  # no split learning: no top, no exchange, no hook point

    def label_uses(self) -> tuple[str, ...]:
        return ("not federated: the estimator fits the labels of the pooled features",)

    def feature_uses(self) -> tuple[str, ...]:
        return ("not federated: every party's features are pooled in one place and the estimator fits them",)

    def finetune(self, fed: Federation, pretrained: list[nn.Module] | None) -> Trained:
        ids = fed.labeled_aligned()
        x = pooled(fed, "train", ids).double().cpu().numpy()
        y = fed.active.labels[ids].cpu().numpy()
        estimator = self.estimator(fed.generator.initial_seed() % (2**32)).fit(x, y)
        return Trained([], PooledEstimator(estimator, fed.num_classes))

    def predict(self, fed: Federation, trained: Trained, *, ids: torch.Tensor | None = None) -> torch.Tensor:
        return trained.top(pooled(fed, "test") if ids is None else pooled(fed, "train", ids))


class CentralizedLR(Centralized):
    """Logistic regression on standardised pooled features."""

    Options = LROptions

    def label_uses(self) -> tuple[str, ...]:
        """Declared beside ``estimator`` (read: the estimator the base class fits): the base class's uses."""
        return super().label_uses()

    def feature_uses(self) -> tuple[str, ...]:
        """Declared beside ``estimator`` (read): the base class's uses."""
        return super().feature_uses()

    def estimator(self, seed: int):
        return make_pipeline(StandardScaler(), LogisticRegression(C=self.options.C, max_iter=self.options.max_iter))


class CentralizedGBDT(Centralized):
    """Gradient-boosted trees on pooled features (scikit-learn, or LightGBM)."""

    Options = GBDTOptions

    def label_uses(self) -> tuple[str, ...]:
        """Declared beside ``estimator`` (read: the estimator the base class fits): the base class's uses."""
        return super().label_uses()

    def feature_uses(self) -> tuple[str, ...]:
        """Declared beside ``estimator`` (read): the base class's uses."""
        return super().feature_uses()

    def __init__(self, options: GBDTOptions):
        super().__init__(options)
        if options.backend == "lightgbm" and importlib.util.find_spec("lightgbm") is None:
            raise ConfigError("method.options.backend=lightgbm needs the lightgbm package: pip install lightgbm")

    def estimator(self, seed: int):
        o = self.options
        if o.backend == "lightgbm":
            from lightgbm import LGBMClassifier

            return LGBMClassifier(n_estimators=o.max_iter, learning_rate=o.learning_rate, num_leaves=o.max_leaf_nodes,
                                  random_state=seed, n_jobs=1, verbose=-1)
        return HistGradientBoostingClassifier(max_iter=o.max_iter, learning_rate=o.learning_rate,
                                              max_leaf_nodes=o.max_leaf_nodes, random_state=seed)
