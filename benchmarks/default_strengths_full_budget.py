"""The default-strengths check of ``tests/defenses/test_default_strengths.py`` at the full budget of the defenses
the test runs cheaper (its ``CHEAPER``: CAE's and DCAE's autoencoder on SecretFlow's 30000 label rows): utility or an
attack's accuracy moves by more than 0.01 between the weakest and the strongest default strength (issue 49 moved
it here from the test suite, where it took 70 s of quiet 2-core time).

    python benchmarks/default_strengths_full_budget.py [--defenses cae,dcae]
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time

from vflpriv.config.registry import DEFENSES
from vflpriv.config.schema import RunConfig
from vflpriv.runner.execution import run


def moved(name: str) -> tuple[float, list[list[float]]]:
    """The largest change of utility, mc's and gc's accuracy between the weakest and strongest default strength."""
    cls = DEFENSES.get(name)
    strengths = cls.default_strengths("finetune")
    numbers = []
    for strength in (strengths[0], strengths[-1]):
        records = run([RunConfig.model_validate({
            "dataset": {"name": "breast-cancer" if cls.binary_only else "digits"},
            "attack": {"name": attack, "prior": "none"},
            "defenses": [{"name": name, "strength": strength, "sweep": True}]}) for attack in ("mc", "gc")])
        if any(r.status != "ok" for r in records):
            raise SystemExit(f"{name} at {strength:g}: " + "; ".join(r.error for r in records if r.error))
        numbers.append([records[0].utility, *(r.attack_accuracy for r in records)])
    return max(abs(a - b) for a, b in zip(*numbers)), numbers


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--defenses", default="cae,dcae", help="comma-separated defense names")
    args = parser.parse_args()
    os.environ["VFLPRIV_CACHE"] = tempfile.mkdtemp(prefix="full-budget-")  # one cache: DCAE reuses CAE's
    failed = False
    for name in args.defenses.split(","):
        start = time.perf_counter()
        change, numbers = moved(name)
        ok = change > 0.01
        failed |= not ok
        print(f"{name}: utility, mc, gc at the weakest {numbers[0]} and strongest {numbers[1]}: largest change "
              f"{change:.3f} ({'moves' if ok else 'DOES NOT MOVE'}; {time.perf_counter() - start:.0f} s)", flush=True)
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
