"""How far one run's code walks: trace ``vflpriv.runner.run`` (0.1: ``vflpriv.run.run``) on one small training
(FedHSSL on digits, ISO in finetuning, tuned mc with its A_SimSiam prior, a cold cache) and count, per module, the
distinct cross-module calls into it: a call from one function into a function of another module counts once, however
often it runs. "Modules entered" is how many modules the run reaches, "returns" how many further distinct calls come
back into a module already entered, and the most visited module is the one the run consults from most places.

    python benchmarks/walk.py                  # every vflpriv module
    python benchmarks/walk.py --ground-floor   # the orchestration: calls into modules outside the component families
"""
from __future__ import annotations

import argparse
import os
import sys
import tempfile
from collections import Counter, defaultdict
from pathlib import Path


def _entry():
    try:
        from vflpriv.runner import run  # 0.2: vflpriv.runner.execution
    except ImportError:
        from vflpriv.run import run  # 0.1's flat layout, for the figures before the regroup
    return run


CONFIG = {
    "dataset": {"name": "digits"},
    "method": {"name": "fedhssl", "options": {"global_iterations": 1}},
    "finetune": {"epochs": 2},
    "defenses": [{"name": "iso", "phase": "finetune", "sweep": True, "strength": 1.0}],
    "attack": {"name": "mc", "tune": True, "search_budget": 2, "prior_epochs": 5, "options": {"epochs": 10}},
    "seed": 0,
}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--top", type=int, default=12)
    parser.add_argument("--into", help="list the distinct calls into this module")
    parser.add_argument("--ground-floor", action="store_true",
                        help="count only calls into modules outside methods, models, ssl, engine, data, attacks, defenses")
    args = parser.parse_args()
    os.environ["VFLPRIV_CACHE"] = tempfile.mkdtemp()  # a cold cache: the run computes what it would fetch
    import vflpriv
    from vflpriv import __file__ as init
    run = _entry()
    roots = [str(Path(init).parent.resolve())] + [str(Path(p).resolve()) for p in getattr(vflpriv, "__path__", [])]
    try:
        from vflpriv.config.schema import RunConfig
    except ImportError:
        from vflpriv.config import RunConfig
    import vflpriv.attacks, vflpriv.defenses, vflpriv.tradeoff, vflpriv.reports  # noqa: E401
    for pkg in (vflpriv.attacks, vflpriv.defenses, vflpriv.tradeoff, vflpriv.reports):
        roots += [str(Path(p).resolve()) for p in pkg.__path__]
    ours = tuple(roots)
    start_module = run.__module__
    edges: set[tuple[str, str, str, str]] = set()

    def module_of(frame):
        return frame.f_globals.get("__name__", "")

    def is_ours(frame) -> bool:
        return frame.f_code.co_filename.startswith(ours)

    def profile(frame, event, arg):
        if event != "call" or not is_ours(frame):
            return
        caller = frame.f_back
        while caller is not None and not is_ours(caller):
            caller = caller.f_back
        if caller is None:
            return
        a, b = module_of(caller), module_of(frame)
        if a != b and b != "vflpriv.common.moved":  # the finder of moved paths, consulted by the import system
            edges.add((a, caller.f_code.co_name, b, frame.f_code.co_name))

    config = RunConfig.model_validate(CONFIG)
    sys.setprofile(profile)
    try:
        run(config)
    finally:
        sys.setprofile(None)
    components = ("vflpriv.methods", "vflpriv.models", "vflpriv.ssl", "vflpriv.engine", "vflpriv.data",
                  "vflpriv.attacks", "vflpriv.defenses")
    if args.ground_floor:  # the orchestration: calls into modules that are not a component family's
        edges = {e for e in edges if not e[2].startswith(components)}
    into = Counter(b for _, _, b, _ in edges)
    into.pop(start_module, None)
    rooms = Counter(".".join(b.split(".")[:2]) for _, _, b, _ in edges if b != start_module)
    print(f"from {start_module}:run -> modules entered {len(into)}, distinct cross-module calls "
          f"{sum(into.values())}, returns {sum(into.values()) - len(into)}")
    print("most visited modules:", ", ".join(f"{m} {n}" for m, n in into.most_common(args.top)))
    if args.into:
        for edge in sorted(e for e in edges if e[2] == args.into):
            print("  ", edge)
    print(f"packages entered {len(rooms)}:", ", ".join(f"{m} {n}" for m, n in rooms.most_common()))


if __name__ == "__main__":
    main()
