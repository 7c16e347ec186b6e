"""Synthetic feature views and datasets for feature-attack tests (explicit generators)."""

from __future__ import annotations

import torch

from vflpriv.config.registry import DATASETS
from vflpriv.data.base import PartySpec, VerticalDataset
from vflpriv.engine import ACTIVE, EMBEDDING, FINETUNE, Inbox
from vflpriv.engine.adversary import FeatureView


def linear_view(*, n_aux: int = 400, n_test: int = 200, dim: int = 6, width: int = 6, seed: int = 0,
                bottom=None) -> tuple[FeatureView, dict[str, torch.Tensor]]:
    """A view whose received rows are ``bottom(x)`` (default: an invertible linear map, ``width`` >= ``dim``) of the
    victim's U(0, 1) features x; returns it and the true features of its targets."""
    g = torch.Generator().manual_seed(seed)
    w = torch.randn(dim, width, generator=g)
    bottom = bottom or (lambda x: x @ w)
    x = {name: torch.rand(n, dim, generator=g) for name, n in (("aux", n_aux), ("train", n_test), ("test", n_test))}
    own = {name: torch.rand(v.shape[0], 3, generator=g) for name, v in x.items()}
    view = FeatureView(
        party=ACTIVE, victim=1, phase=FINETUNE, kind=EMBEDDING, victim_spec=PartySpec("tabular", (dim,)),
        spec=PartySpec("tabular", (3,)), received={k: bottom(v) for k, v in x.items()}, own=own,
        aux_ids=torch.arange(n_aux), aux_victim=x["aux"], target_ids={"train": torch.arange(n_aux, n_aux + n_test)},
        inbox=Inbox(owner=ACTIVE), models={}, generator=torch.Generator().manual_seed(seed), device=torch.device("cpu"))
    return view, {"train": x["train"], "test": x["test"]}


def independent_dataset(*, n_train: int = 1000, n_test: int = 300, dim: int = 6, seed: int = 0) -> VerticalDataset:
    """Two tabular parties with independent U(0, 1) features (the active party's own features say nothing of the
    passive party's: its feature prior is the mean); the label is a threshold on the sum of both."""
    g = torch.Generator().manual_seed(seed)

    def draw(m: int):
        xa, xp = torch.rand(m, dim, generator=g), torch.rand(m, dim, generator=g)
        return xa, xp, ((xa.sum(1) + xp.sum(1)) > dim).long()

    xa, xp, y = draw(n_train)
    ta, tp, ty = draw(n_test)
    spec = PartySpec("tabular", (dim,))
    return VerticalDataset("independent", (xa, xp), y, (ta, tp), ty, 2, (spec, spec))


def register_independent() -> str:
    DATASETS.register("test-independent", lambda **_: independent_dataset())
    return "test-independent"
