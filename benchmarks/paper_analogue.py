"""A paper analogue's table from its stores (issue 24): per method (and its options) and the ``--by`` setting, the
mean ± std over seeds of utility, finetuning messages and MB, attack and prior accuracy and leakage (the table
``vflpriv reproduce`` writes, for stores made with ``vflpriv sweep``).

    python benchmarks/paper_analogue.py STORE [STORE ...] --by partition.labeled
"""

from __future__ import annotations

import argparse
from pathlib import Path

import pandas as pd

from vflpriv.workflows.reproductions.report import records, table


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("stores", nargs="+", type=Path)
    parser.add_argument("--by", required=True, help="dotted setting that separates rows, e.g. partition.labeled")
    args = parser.parse_args()
    runs = pd.concat([records(store, args.by) for store in args.stores])
    print(table(runs, args.by).markdown())


if __name__ == "__main__":
    main()
