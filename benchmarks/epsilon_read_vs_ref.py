"""A read's epsilon check here against another revision's (task acct: the counts from the settings, an entry per
claiming defense): ``load_results`` of :mod:`epsilon_read_cost`'s store (written by this tree, and again under the
reference's ``CLAIM_VERSION`` so that its check runs too), caches cleared, each tree in its own process, interleaved;
CPU seconds (``time.process_time``, the min of 3 reads a process) and the ratio of the mins. ``--seeds`` scales the
store (15 records a seed: 67 make 1005).

    python benchmarks/epsilon_read_vs_ref.py --ref main --rounds 4 [--seeds 20]"""

from __future__ import annotations

import argparse
import re
import subprocess
import sys
import tempfile
import time
from dataclasses import replace
from pathlib import Path

HERE = Path(__file__).resolve().parent.parent
#: The read's caches, cleared before each read (module, name): where a tree has them.
CACHES = [("accountants", "_spent"), ("accountants", "_noise_for"), ("naming", "_noise_for"),
          ("accountants", "_gaussian"), ("naming", "_guards")]


def _build(store: Path, ref_store: Path, ref_version: int, seeds: int) -> int:
    """Both stores of the benchmark's records: this tree's claim rules, and the reference's; their count."""
    sys.path.insert(0, str(HERE / "benchmarks"))
    from epsilon_read_cost import _records

    from vflpriv.store.sqlite import Store

    records = _records(seeds)
    with Store(store) as s:
        s.put_many(records)
    with Store(ref_store) as s:
        s.put_many([replace(r, claim_version=ref_version) for r in records])
    return len(records)


def _read(tree: str, store: Path, n: int) -> None:
    """Prints the min CPU seconds of 3 cold reads of ``store`` by the code of ``tree`` (the editable install's folders
    remapped to it before any import)."""
    finder = next(m for name, m in sys.modules.items() if name.startswith("__editable___vflpriv"))
    finder.MAPPING.update({k: str(Path(tree) / Path(v).name) for k, v in finder.MAPPING.items()})
    import vflpriv
    from vflpriv.reports.results import load_results
    from vflpriv.runner import accountants, naming

    assert vflpriv.__file__.startswith(tree), vflpriv.__file__
    load_results(store)  # imports and registries warmed
    cpu = []
    for _ in range(3):
        for module, name in CACHES:  # the solver's cache is accountants' in a tree before hunt3 P11
            if hasattr(module := {"accountants": accountants, "naming": naming}[module], name):
                getattr(module, name).cache_clear()
        start = time.process_time()
        frame = load_results(store)
        cpu.append(time.process_time() - start)
        assert len(frame) == n and not frame.attrs["damaged"], frame.attrs["damaged"][:1]
    print(min(cpu))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ref", default="main")
    parser.add_argument("--rounds", type=int, default=4)
    parser.add_argument("--seeds", type=int, default=20)
    parser.add_argument("--read", nargs=3, help=argparse.SUPPRESS)  # a child: TREE STORE N
    args = parser.parse_args()
    if args.read:
        _read(args.read[0], Path(args.read[1]), int(args.read[2]))
        return
    with tempfile.TemporaryDirectory() as tmp:
        ref = Path(tmp) / "ref"
        ref.mkdir()
        archive = subprocess.run(["git", "-C", str(HERE), "archive", args.ref], check=True, capture_output=True)
        subprocess.run(["tar", "-x", "-C", str(ref)], input=archive.stdout, check=True)
        version = int(re.search(r"^CLAIM_VERSION = (\d+)", (ref / "vflpriv/store/records.py").read_text(), re.M)[1])
        stores = {"here": Path(tmp) / "here.sqlite", args.ref: Path(tmp) / "ref.sqlite"}
        n = _build(stores["here"], stores[args.ref], version, args.seeds)
        trees = {"here": str(HERE), args.ref: str(ref)}
        cpu: dict[str, list[float]] = {name: [] for name in (args.ref, "here")}
        for _ in range(args.rounds):
            for name in cpu:
                out = subprocess.run([sys.executable, __file__, "--read", trees[name], str(stores[name]), str(n)],
                                     check=True, capture_output=True, text=True).stdout
                cpu[name].append(float(out))
    print(f"load_results of {n} records with the epsilon check, CPU s (min of 3 cold reads a process), "
          f"{args.rounds} interleaved rounds:")
    for name, values in cpu.items():
        print(f"  {name:10s} " + "  ".join(f"{v:.3f}" for v in values) + f"   min {min(values):.3f}")
    print(f"  ratio here / {args.ref} (min over rounds): {min(cpu['here']) / min(cpu[args.ref]):.2f}x")


if __name__ == "__main__":
    main()
