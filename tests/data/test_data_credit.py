"""Credit card default loader on fixture files in the UCI (.xls / header row X1..) and Kaggle CSV formats."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import torch

from vflpriv.common.errors import DataError
from vflpriv.data import credit
from vflpriv.data.prep import fixed_split

UCI_NAMES = ["ID", "LIMIT_BAL", "SEX", "EDUCATION", "MARRIAGE", "AGE", "PAY_0", "PAY_2", "PAY_3", "PAY_4",
             "PAY_5", "PAY_6", *(f"BILL_AMT{i}" for i in range(1, 7)), *(f"PAY_AMT{i}" for i in range(1, 7)),
             "default payment next month"]  # fmt: skip


def _frame(n=50):
    rng = np.random.default_rng(0)
    frame = pd.DataFrame(rng.integers(-2, 9, (n, len(UCI_NAMES))), columns=UCI_NAMES)
    frame["ID"] = np.arange(1, n + 1)
    frame["LIMIT_BAL"] = rng.integers(1, 50, n) * 10_000
    frame["default payment next month"] = (np.arange(n) % 4 == 0).astype(int)
    return frame


def test_kaggle_csv_two_parties_standardised_on_train(tmp_path):
    frame = _frame().rename(columns={"default payment next month": "default.payment.next.month"})
    frame.to_csv(tmp_path / "UCI_Credit_Card.csv", index=False)
    ds = credit.load_credit_default(root=tmp_path)
    assert [tuple(x.shape) for x in ds.x_train] == [(40, 18), (40, 5)] and len(ds.y_test) == 10
    assert ds.metric == "auc" and torch.bincount(ds.y_train).tolist() == [30, 10]
    train = torch.cat(ds.x_train, 1)
    assert torch.allclose(train.mean(0), torch.zeros(23), atol=1e-5)
    tr, te = fixed_split(frame["default.payment.next.month"].to_numpy(), test_size=0.2)
    behaviour, profile = _scaled(frame, credit.BEHAVIOUR, tr), _scaled(frame, credit.PROFILE, tr)
    assert torch.allclose(ds.x_train[0], behaviour[tr], atol=1e-5)
    assert torch.allclose(ds.x_test[0], behaviour[te], atol=1e-5)
    assert torch.allclose(ds.x_test[1], profile[te], atol=1e-5)


def _scaled(frame, columns, tr):
    values = frame[list(columns)].to_numpy(float)
    std = values[tr].std(0)
    std[std == 0] = 1
    return torch.from_numpy((values - values[tr].mean(0)) / std).float()


def test_uci_layout_with_the_x1_row_and_pay_1_alias(tmp_path):
    frame = _frame().rename(columns={"PAY_0": "PAY_1"})
    rows = [
        ["", *[f"X{i}" for i in range(1, 24)], "Y"],
        list(frame.columns),
        *frame.astype(str).values.tolist(),
    ]
    pd.DataFrame(rows).to_csv(tmp_path / "default of credit card clients.csv", index=False, header=False)
    ds = credit.load_credit_default(root=tmp_path)
    tr, _ = fixed_split(frame["default payment next month"].to_numpy(), test_size=0.2)
    assert torch.allclose(ds.x_train[0][:, 0], _scaled(frame, ["PAY_1"], tr)[tr, 0], atol=1e-5)
    capped = credit.load_credit_default(root=tmp_path, max_samples=20, seed=1)
    again = credit.load_credit_default(root=tmp_path, max_samples=20, seed=1)
    assert len(capped.y_train) == 20 and torch.equal(capped.x_train[0], again.x_train[0])
    assert len(capped.y_test) == 10


def test_xls_sheet(tmp_path):
    """The UCI file as published (.xls, the X1.. row above the names): a fixture of ``_frame()`` written once with
    xlwt (not a dependency: the file is in tests/data/fixtures), read through python-calamine (the data extra)."""
    import shutil

    pytest.importorskip("python_calamine", reason="the data extra is not installed: pip install 'vflpriv[data]'")
    name = "default of credit card clients.xls"
    shutil.copy(Path(__file__).parent / "fixtures" / name, tmp_path / name)
    ds = credit.load_credit_default(root=tmp_path)
    assert [tuple(x.shape) for x in ds.x_train] == [(40, 18), (40, 5)]
    tr, te = fixed_split(_frame()["default payment next month"].to_numpy(), test_size=0.2)
    assert torch.allclose(ds.x_test[1], _scaled(_frame(), credit.PROFILE, tr)[te], atol=1e-5)


def test_bad_files_name_the_file(tmp_path):
    with pytest.raises(
        DataError, match=r"credit-default: cannot find default of credit card clients\.xls or"
    ):
        credit.load_credit_default(root=tmp_path)
    _frame().drop(columns="BILL_AMT3").to_csv(tmp_path / "UCI_Credit_Card.csv", index=False)
    with pytest.raises(DataError, match=r"UCI_Credit_Card\.csv: missing columns BILL_AMT3"):
        credit.load_credit_default(root=tmp_path)
    (tmp_path / "UCI_Credit_Card.csv").write_text("a,b\n1,2\n")
    with pytest.raises(DataError, match=r"UCI_Credit_Card\.csv: no header row naming LIMIT_BAL"):
        credit.load_credit_default(root=tmp_path)
    (tmp_path / "UCI_Credit_Card.csv").unlink()
    (tmp_path / "default of credit card clients.xls").write_bytes(b"not a spreadsheet")
    with pytest.raises(DataError, match=r"default of credit card clients\.xls"):
        credit.load_credit_default(root=tmp_path)
