"""The in-memory form every dataset loader returns.

A loader is a callable registered in the ``vflpriv.datasets`` entry-point group with the signature
``load(*, parties: int = 2, root: Path | None = None, max_samples: int | None = None, seed: int = 0)``
returning a :class:`VerticalDataset`. It raises :class:`vflpriv.common.errors.DataError` for a missing or
malformed file (naming the file and the expected layout) and :class:`vflpriv.common.errors.ConfigError`
for an unsupported number of parties.
"""

from __future__ import annotations

import hashlib
import json
import math
import unicodedata
from dataclasses import dataclass
from functools import cached_property
from typing import Literal

import torch

from vflpriv.common.errors import class_named

Modality = Literal["tabular", "image"]


@dataclass(frozen=True)
class PartySpec:
    """What one party's feature tensor holds.

    ``shape`` is the shape of one sample (``(d,)`` for tabular, ``(C, H, W)`` for images).
    ``cardinalities`` lists, for each of the *leading* columns that are categorical, the number of
    embedding indices it uses (index 0 is reserved for "unknown"); those columns hold integer
    indices stored as float32. The remaining columns are numeric.
    """

    modality: Modality
    shape: tuple[int, ...]
    cardinalities: tuple[int, ...] = ()

    @property
    def n_categorical(self) -> int:
        return len(self.cardinalities)


#: The longest a party's ``fitted_features`` entry may be: a withheld epsilon's note quotes it in every record (review
#: hunt H3: a 6.5 MB one made 6.5 MB records); the built-in loaders' longest is 121 characters.
MAX_DECLARED = 200


def declaration_problem(fitted: object, parties: int) -> str:
    """'' where ``fitted`` is a valid ``VerticalDataset.fitted_features`` for ``parties`` parties, else what it got and
    what is valid: the planner reads it per party (a dict crashed it, a str was read letter by letter) and quotes it."""
    if fitted is None:
        return ""
    if type(fitted) not in (tuple, list):  # a subclass could mask its entries (its __len__, __iter__, __getitem__)
        got = f"a {class_named(fitted)}"
    elif len(fitted) != parties:
        got = f"{len(fitted)} entries for {parties} parties"
    elif wrong := [p for p, f in enumerate(fitted) if type(f) is not str]:  # a subclass could mask its text
        got = f"a {class_named(fitted[wrong[0]])} for party {wrong[0]}"
    elif long := [p for p, f in enumerate(fitted) if len(f) > MAX_DECLARED]:
        got = f"{len(fitted[long[0]])} characters for party {long[0]}"
    elif control := [(p, i, c) for p, f in enumerate(fitted) for i, c in enumerate(f) if _splits_a_line(c)]:
        party, position, char = control[0]
        got = f"a control character or line break U+{ord(char):04X} at position {position} for party {party}"
    else:
        return ""
    return (f"fitted_features got {got}; valid: None (undeclared) or a tuple or list of {parties} str, one per party "
            f"('' where none is fitted), each at most {MAX_DECLARED} characters and no control character (a tab "
            "aside) or line break; format characters such as U+200C are kept; the tuple, list and str exactly, no "
            "subclass")


def _splits_a_line(char: str) -> bool:
    """A control character other than a tab (Unicode category Cc) or a line break (``str.splitlines``'s, U+2028 and
    U+2029 too): quoted in a note, it would break or garble the line; a format character (Cf) would not."""
    return char != "\t" and (unicodedata.category(char) == "Cc" or len(f"x{char}x".splitlines()) > 1)


def values_problem(dataset: VerticalDataset) -> str:
    """'' where every feature is finite and every label in 0..C-1, else the first problem's party, split, count and
    position (a NaN was scored or read as 'training diverged': review hunt3 P7); min and max first, then details."""
    for split, xs in (("training", dataset.x_train), ("test", dataset.x_test)):
        for party, x in enumerate(xs):
            if x.is_floating_point() and not all(map(math.isfinite, _extremes(x))):
                bad = ~torch.isfinite(x)
                row, *rest = (int(i) for i in bad.nonzero()[0])
                where = f"column {rest[0]}" if len(rest) == 1 else f"position {tuple(rest)}"
                count = int(bad.sum())
                return (f"party {party}'s {split} features hold {count} non-finite value{'s' * (count > 1)} (first at "
                        f"row {row}, {where}); clean or impute them in the loader")
    top = dataset.num_classes - 1
    for split, y in (("training", dataset.y_train), ("test", dataset.y_test)):
        low, high = _extremes(y)
        if not 0 <= low <= high <= top:
            bad = ~((y >= 0) & (y <= top))
            row, count = int(bad.nonzero()[0][0]), int(bad.sum())
            return (f"its {split} labels hold {count} value{'s' * (count > 1)} outside 0..{top} (first at row {row}: "
                    f"{y[row].item():g}); give labels 0..{top} for its {dataset.num_classes} classes")
    return ""


def _extremes(t: torch.Tensor) -> tuple[float, float]:
    """A tensor's minimum and maximum (NaN where it holds one; 0, 0 where it is empty): one pass, nothing allocated."""
    return (0.0, 0.0) if t.numel() == 0 else tuple(v.item() for v in torch.aminmax(t))


@dataclass(frozen=True)
class VerticalDataset:
    """Train and test features split column-wise across parties (party 0 is the active party)."""

    name: str
    x_train: tuple[torch.Tensor, ...]
    y_train: torch.Tensor
    x_test: tuple[torch.Tensor, ...]
    y_test: torch.Tensor
    num_classes: int
    specs: tuple[PartySpec, ...]
    utility_metric: Literal["accuracy", "auc", "f1"] | None = None
    #: Per party, the preprocessing of its features fitted on the training rows ('' where none: raw values or a fixed
    #: scaling such as pixels / 255), e.g. "standardised with the training rows' mean and std": there one sample's raw
    #: features move every row, so no per-sample feature-DP claim holds (review fe F1). None: undeclared (a plugin's
    #: default), read as unknown: no feature epsilon is recorded (fail closed).
    fitted_features: tuple[str, ...] | None = None

    def __post_init__(self) -> None:
        k = len(self.specs)
        if not (len(self.x_train) == len(self.x_test) == k):
            raise ValueError("x_train, x_test and specs must have one entry per party")
        if problem := declaration_problem(self.fitted_features, k):
            raise ValueError(problem)
        if self.fitted_features is not None:  # a list kept as the tuple the field says (frozen, hashable)
            object.__setattr__(self, "fitted_features", tuple(self.fitted_features))
        for x in self.x_train:
            if x.shape[0] != self.y_train.shape[0]:
                raise ValueError("every party must hold the same number of training rows")
        for x in self.x_test:
            if x.shape[0] != self.y_test.shape[0]:
                raise ValueError("every party must hold the same number of test rows")

    @property
    def parties(self) -> int:
        return len(self.specs)

    def payload(self) -> dict:
        """Tensors, strings and numbers only (what ``torch.load(weights_only=True)`` reads back)."""
        return {"name": self.name, "x_train": list(self.x_train), "y_train": self.y_train,
                "x_test": list(self.x_test), "y_test": self.y_test, "num_classes": self.num_classes,
                "specs": [[s.modality, list(s.shape), list(s.cardinalities)] for s in self.specs],
                "utility_metric": self.utility_metric, "fitted_features": self.fitted_features}

    @classmethod
    def from_payload(cls, data: dict) -> VerticalDataset:
        """The dataset of :meth:`payload`; ``ValueError``/``KeyError``/``TypeError`` when it is not one."""
        specs = tuple(PartySpec(m, tuple(shape), tuple(cards)) for m, shape, cards in data["specs"])
        tensors = [*data["x_train"], data["y_train"], *data["x_test"], data["y_test"]]
        if not all(isinstance(t, torch.Tensor) for t in tensors):
            raise TypeError("dataset payload holds something other than tensors")
        fitted = data.get("fitted_features")  # absent from an entry written before the field: undeclared
        return cls(data["name"], tuple(data["x_train"]), data["y_train"], tuple(data["x_test"]), data["y_test"],
                   int(data["num_classes"]), specs, data["utility_metric"], None if fitted is None else tuple(fitted))

    @cached_property
    def digest(self) -> str:
        """SHA-256 of everything the dataset holds (its name, classes, specs, metric, and every tensor's dtype, shape
        and bytes), computed once per loaded dataset: what cached states and records derived from it are keyed by, so a
        changed data file is another key whatever loader read it (a plugin's included). The tensors are hashed rather
        than a loader's files because a loader need not say which files it read; SHA-256 through hashlib runs at
        memory-copy speed (Fashion-MNIST's 70000 x 784 floats: ``benchmarks/data_digest_cost.py``). ``fitted_features``
        is not hashed: it changes no number (a plugin's is in ``data_fingerprint``, a built-in's in the claim
        digest)."""
        head = [self.name, self.num_classes, self.utility_metric,
                [[s.modality, list(s.shape), list(s.cardinalities)] for s in self.specs]]
        digest = hashlib.sha256(json.dumps(head).encode())
        for t in [*self.x_train, self.y_train, *self.x_test, self.y_test]:
            digest.update(f"|{t.dtype}{list(t.shape)}|".encode())
            digest.update(t.detach().cpu().contiguous().reshape(-1).view(torch.uint8).numpy())
        return digest.hexdigest()

    @property
    def metric(self) -> str:
        """Utility metric: AUC for binary tasks, top-1 accuracy otherwise, unless the loader says."""
        if self.utility_metric is not None:
            return self.utility_metric
        return "auc" if self.num_classes == 2 else "accuracy"
