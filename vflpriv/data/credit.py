"""UCI "default of credit card clients" (30000 x 23, binary) as two parties, from its .xls or a .csv copy.

Party 0 (active, holds the label) has the 18 repayment-behaviour columns: PAY_0, PAY_2..PAY_6 (repayment
status), BILL_AMT1..6 and PAY_AMT1..6; party 1 has the 5 profile columns LIMIT_BAL, SEX, EDUCATION,
MARRIAGE, AGE, as a bank (behaviour + label) and a partner holding customer profiles would.
(The one-shot VFL paper instead follows FATE's 10/13 split of the columns in file order.)
There is no official split: a fixed stratified 80/20 split (``random_state=0``) stands in for one, and
features are standardised with train statistics.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from vflpriv.common.errors import DataError
from vflpriv.data.base import VerticalDataset
from vflpriv.data.paths import corrupt, locate
from vflpriv.data.prep import STANDARDISED, build, cap_rows, check_parties, fixed_split, standardize
from vflpriv.data.readers import read_table

if TYPE_CHECKING:  # imported where the files are read: every run\'s planning imports this module (the catalog)
    import pandas as pd

BEHAVIOUR = (
    "PAY_0", "PAY_2", "PAY_3", "PAY_4", "PAY_5", "PAY_6",
    *(f"BILL_AMT{i}" for i in range(1, 7)),
    *(f"PAY_AMT{i}" for i in range(1, 7)),
)  # fmt: skip
PROFILE = ("LIMIT_BAL", "SEX", "EDUCATION", "MARRIAGE", "AGE")
LABEL = "DEFAULT_PAYMENT_NEXT_MONTH"
CREDIT_FILES = (
    "default of credit card clients.xls",
    "default_of_credit_card_clients.xls",
    "UCI_Credit_Card.csv",
    "default of credit card clients.csv",
    "default_of_credit_card_clients.csv",
)
CREDIT_LAYOUT = (
    "one of " + ", ".join(CREDIT_FILES) + ": UCI's sheet (a row X1..X23, Y may precede the header) or a CSV "
    "with the columns LIMIT_BAL, SEX, EDUCATION, MARRIAGE, AGE, PAY_0 (or PAY_1), PAY_2..PAY_6, "
    "BILL_AMT1..6, PAY_AMT1..6 and 'default payment next month'"
)
_TEST_FRACTION = 0.2


def _column_key(name: object) -> str:
    key = str(name).strip().upper().replace(".", "_").replace(" ", "_")
    return "PAY_0" if key == "PAY_1" else key


def _read(path: Path) -> pd.DataFrame:
    """The raw sheet/CSV as strings, with the row naming LIMIT_BAL promoted to the header."""
    import pandas as pd

    if path.suffix.lower() == ".xls":
        try:
            raw = pd.read_excel(path, header=None, dtype=str, engine="calamine")
        except ImportError:
            need = "needs the 'python-calamine' package: pip install 'vflpriv[data]'"
            raise DataError(f"credit-default: reading {path} {need}") from None
        except Exception as exc:  # calamine and pandas raise several types for a malformed sheet
            raise corrupt(
                "credit-default", path, f"not a readable .xls file ({exc})", CREDIT_LAYOUT
            ) from None
    else:
        raw = read_table(path, dataset="credit-default", layout=CREDIT_LAYOUT, header=None, dtype=str)
    for row in range(min(3, len(raw))):
        keys = [_column_key(v) for v in raw.iloc[row]]
        if "LIMIT_BAL" in keys:
            frame = raw.iloc[row + 1 :].reset_index(drop=True)
            frame.columns = keys
            return frame
    raise corrupt("credit-default", path, "no header row naming LIMIT_BAL in the first 3 rows", CREDIT_LAYOUT)


def load_credit_default(
    *, parties: int = 2, root: Path | None = None, max_samples: int | None = None, seed: int = 0
) -> VerticalDataset:
    """Credit card default (binary, AUC): repayment behaviour (active) | customer profile (passive)."""
    import pandas as pd

    name = "credit-default"
    check_parties(name, parties, (2,))
    _, path = locate(name, root, CREDIT_FILES, CREDIT_LAYOUT)
    frame = _read(path)
    missing = [c for c in (*BEHAVIOUR, *PROFILE, LABEL) if c not in frame.columns]
    if missing:
        raise corrupt(name, path, f"missing columns {', '.join(missing)}", CREDIT_LAYOUT)
    try:
        values = frame[[*BEHAVIOUR, *PROFILE, LABEL]].apply(pd.to_numeric).to_numpy(np.float64)
    except ValueError as exc:
        raise corrupt(name, path, f"non-numeric value ({exc})", CREDIT_LAYOUT) from None
    if len(values) < 2 or np.isnan(values).any() or not np.isin(values[:, -1], (0, 1)).all():
        raise corrupt(name, path, "needs complete numeric rows and a 0/1 label", CREDIT_LAYOUT)
    y = values[:, -1].astype(np.int64)
    tr, te = fixed_split(y, test_size=_TEST_FRACTION)
    tr = tr[cap_rows(y[tr], max_samples, seed=seed)]
    x_tr, x_te = standardize(values[tr, :-1], values[te, :-1])
    cut = len(BEHAVIOUR)
    return build(
        name,
        [x_tr[:, :cut], x_tr[:, cut:]],
        [x_te[:, :cut], x_te[:, cut:]],
        y[tr],
        y[te],
        num_classes=2,
        modality="tabular",
        fitted=STANDARDISED,
    )


#: One-shot VFL's split (paper 002 §5.1): the non-aligned rows are "evenly and randomly separate[d] into two sets",
#: one per client, not shared (findings X1, M4).
load_credit_default.default_partition = {"unaligned": "disjoint"}
