"""What the ownership test (``vflpriv_own``, review final14 F5) adds to a run's keys, which now mark each defense and
attack with ``code_mark``: a key of a dp-gaussian run, with each class's verdict kept (``_own_members``) against the
verdict judged again at every call, and against a key without the defense's code mark; measured in one process,
interleaved rounds.

    python benchmarks/ownership_keys.py [--calls 2000] [--rounds 3]
"""

from __future__ import annotations

import argparse
import timeit

import vflpriv.common.declarations as declarations
from vflpriv.config import keys
from vflpriv.config.registry import DEFENSES
from vflpriv.config.schema import RunConfig


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=2000)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    cfg = RunConfig.model_validate({"partition": {"labeled": 100, "aux": 40}, "attack": {"name": "gc"},
                                    "defenses": [{"name": "dp-gaussian", "strength": 1.0, "sweep": True}]})
    kept, mark = declarations._own_members, keys.code_mark

    def judged_again(k: type) -> bool:
        declarations._JUDGED.pop(k, None)
        return kept(k)

    variants = {"kept verdicts": (kept, mark), "judged at every call": (judged_again, mark),
                "no defense code mark": (kept, lambda registry, name: {} if registry is DEFENSES
                                         else mark(registry, name))}
    times: dict[str, list[float]] = {name: [] for name in variants}
    for _ in range(args.rounds):
        for name, (members, code_mark) in variants.items():
            declarations._own_members, keys.code_mark = members, code_mark
            cfg.key()
            times[name].append(timeit.timeit(cfg.key, number=args.calls) / args.calls * 1e6)
    declarations._own_members, keys.code_mark = kept, mark
    best = {name: min(t) for name, t in times.items()}
    for name, t in times.items():
        print(f"{name:22s} {' '.join(f'{x:7.1f}' for x in t)} us per key (min {best[name]:.1f})")
    print(f"judged at every call / kept: {best['judged at every call'] / best['kept verdicts']:.1f}x; "
          f"kept / no defense code mark: {best['kept verdicts'] / best['no defense code mark']:.2f}x")


if __name__ == "__main__":
    main()
