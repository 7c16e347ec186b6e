"""What a feature defense adds to the training it protects, as ratios measured in one process (issue 47's bound: at most
1.5x, attacker-aware training with its imagined decoder at most 2x).

Finetuning: splitnn's whole training (federation, finetuning, test prediction) with each feature defense at the middle
of its default strengths, against the undefended training. Pretraining: local-simsiam's and fedhssl's pretraining
(``Method.pretrain``, no cache) with nopeek and fi-adversarial in it, against the undefended pretraining. Runs are
interleaved (undefended, then each defense, repeated), one intra-op thread as the runner trains, after a warm-up;
prints per case the median over repetitions of defended seconds / undefended seconds of the same repetition.

    python benchmarks/feature_defense_overhead.py [--dataset digits] [--repeats 5] [--image]

``--image``: Fashion-MNIST halves (1500 rows, the CNN bottom) instead, finetuning only: a bottom large next to the
defenses' own networks, where digits' (a 32 -> 128 -> 128 MLP) is small next to them. ``--clock cpu``: the process's CPU
seconds instead of wall seconds (steadier on a shared machine; the training runs on one thread). ``--only NAME``: those
defenses' cases only (repeatable). ``--method NAME``: the finetuning cases on that method's training instead of
splitnn's (``oneshot``, ``fewshot``: the defenses in their local semi-supervised training; ``ssvfl-i``: embedding-dp
on its one release); ``--finetune-only``: no pretraining cases.

``--against DIR``: A/B against another checkout's code (``git archive main | tar -x -C DIR``): each repetition runs
this checkout's and DIR's code in turn, each in a fresh process of this interpreter (DIR imported first on its path,
through a folder of links that lays it out as installed), and prints per case both medians and their ratio;
``--per-process N``: each of those processes runs N interleaved repetitions and reports their medians (steadier on a
shared machine than one defended training per process).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
import tomllib
from pathlib import Path

import torch

from vflpriv.config.registry import DEFENSES
from vflpriv.config.schema import RunConfig
from vflpriv.runner.execution import build_federation, train
from vflpriv.runner.planning import plan

FINETUNE = ["nopeek", "mid-sender", "fi-adversarial", "embedding-dp"]
#: Cheaper settings of a defense whose anchor's network outweighs digits' bottom, measured beside its default.
CHEAPER = {"mid-sender": {"decoder_scale": 1}}
PRETRAIN = ["nopeek", "fi-adversarial"]
BOUND = {"fi-adversarial": 2.0}
CLOCKS = {"wall": time.perf_counter, "cpu": time.process_time}
clock = time.perf_counter


def _bound(case: str) -> float:
    """The issue's bound for a case ("finetune DEFENSE ..." or "pretrain METHOD DEFENSE")."""
    words = case.split()
    return BOUND.get(words[1] if words[0] == "finetune" else words[2], 1.5)


def _middle(name: str, phase: str) -> float:
    strengths = DEFENSES.get(name).default_strengths(phase)
    return strengths[len(strengths) // 2]


def _config(base: dict, method: str, defense: str | None, phase: str, options: dict | None = None) -> RunConfig:
    defenses = [] if defense is None else [{"name": defense, "strength": _middle(defense, phase), "phase": phase,
                                            "options": options or {}}]
    options = {"epochs": 2} if method.startswith("local-") else {"global_iterations": 2} if method.startswith(
        ("cssl-", "gssl-", "fedhssl")) else {}
    return RunConfig.model_validate({**base, "method": {"name": method, "options": options}, "defenses": defenses,
                                     "attack": {"name": "fi-decoder"}})


def _finetune_seconds(config: RunConfig) -> float:
    p = plan(config)  # planning (the dataset's load, the checks) is not the training's time
    start = clock()
    train(p)
    return clock() - start


def _pretrain_seconds(config: RunConfig) -> float:
    p = plan(config)
    fed = build_federation(p)
    start = clock()
    p.method.pretrain(fed)
    return clock() - start


def measure(base: dict, repeats: int, *, pretraining: bool = True, only: list[str] | None = None,
            method: str = "splitnn") -> list[tuple[str, float, float]]:
    """(case, median ratio, median undefended seconds) per case; the finetuning cases on ``method``'s training."""
    cases = [(f"finetune {d}", method, d, "finetune", _finetune_seconds, None) for d in FINETUNE]
    cases += [(f"finetune {d} ({', '.join(f'{k} {v}' for k, v in o.items())})", method, d, "finetune",
               _finetune_seconds, o) for d, o in CHEAPER.items()]
    cases += [(f"pretrain {m} {d}", m, d, "pretrain", _pretrain_seconds, None) for m in ("local-simsiam", "fedhssl")
              for d in PRETRAIN] if pretraining else []
    cases = [c for c in cases if not only or c[2] in only]
    baselines = {(m, ph): (_config(base, m, None, ph), fn) for _, m, _, ph, fn, _ in cases}
    for config, fn in baselines.values():  # warm-up: imports, allocator, first-call costs
        fn(config)
    ratios: dict[str, list[float]] = {c[0]: [] for c in cases}
    seconds: dict[str, list[float]] = {c[0]: [] for c in cases}
    for _ in range(repeats):
        undefended = {key: fn(config) for key, (config, fn) in baselines.items()}
        for name, method, defense, phase, fn, options in cases:
            defended = fn(_config(base, method, defense, phase, options))
            ratios[name].append(defended / undefended[(method, phase)])
            seconds[name].append(undefended[(method, phase)])
    return [(name, statistics.median(ratios[name]), statistics.median(seconds[name])) for name, *_ in cases]


def _layout(tree: Path, into: Path) -> Path:
    """A folder where ``tree``'s code imports as installed: vflpriv's entries and its pyproject's other package
    folders (defenses/, attacks/, ...) linked inside one ``vflpriv`` folder."""
    package = into / "vflpriv"
    package.mkdir()
    for entry in (tree / "vflpriv").iterdir():
        (package / entry.name).symlink_to(entry)
    dirs = tomllib.loads((tree / "pyproject.toml").read_text())["tool"]["setuptools"]["package-dir"]
    for name, folder in dirs.items():
        if name != "vflpriv":
            (package / name.split(".", 1)[1]).symlink_to(tree / folder)
    return into


def _child(args: argparse.Namespace, path: Path | None) -> list[list]:
    """One repetition in a fresh process (this checkout's code, or the one laid out at ``path``)."""
    cmd = [sys.executable, __file__, "--repeats", str(args.per_process), "--json", "--dataset", args.dataset,
           "--clock", args.clock, "--method", args.method] + ["--finetune-only"] * args.finetune_only
    cmd += ["--image"] * args.image + [a for d in args.only for a in ("--only", d)]
    env = {**os.environ, "PYTHONPATH": str(path)} if path else os.environ
    out = subprocess.run(cmd, env=env, check=True, capture_output=True, text=True).stdout
    return json.loads(out.strip().splitlines()[-1])


def against(args: argparse.Namespace) -> None:
    """This checkout's cases against ``args.against``'s, repetitions interleaved (ours, theirs, ours, ...)."""
    with tempfile.TemporaryDirectory() as tmp:
        path = _layout(Path(args.against).resolve(), Path(tmp))
        runs: dict[str, list[list]] = {"this": [], "against": []}
        for _ in range(args.repeats):
            runs["this"].append(_child(args, None))
            runs["against"].append(_child(args, path))
    print(f"{args.dataset if not args.image else 'fashion-mnist'}: defended / undefended training {args.clock} "
          f"seconds, median of {args.repeats} interleaved repetitions (each a fresh process, the median of its "
          f"{args.per_process} interleaved repetitions); this checkout against {args.against}")
    print("| case | ratio here | ratio there | defended here / there | bound | undefended s here / there |")
    print("|---|---|---|---|---|---|")
    for i, (name, *_) in enumerate(runs["this"][0]):
        here, there = ([r[i] for r in runs[k]] for k in ("this", "against"))
        ratio = statistics.median(r[1] for r in here), statistics.median(r[1] for r in there)
        base = statistics.median(r[2] for r in here), statistics.median(r[2] for r in there)
        speed = statistics.median((a[1] * a[2]) / (b[1] * b[2]) for a, b in zip(here, there))
        bound = _bound(name)
        print(f"| {name} | {ratio[0]:.2f}x{'' if ratio[0] <= bound else ' (over)'} | {ratio[1]:.2f}x | {speed:.2f} | "
              f"{bound:g}x | {base[0]:.3f} / {base[1]:.3f} |")


def count(text: str) -> int:
    """A whole number of at least 1 (argparse turns the ValueError into one ``error:`` line)."""
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"{text} is not a whole number of at least 1")
    return value


def arguments(argv: list[str] | None = None) -> argparse.Namespace:
    """The command line, checked: ``--per-process`` only with ``--against``, a whole number of at least 1."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dataset", default="digits")
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--image", action="store_true", help="Fashion-MNIST halves, 1500 rows, CNN bottom, finetuning")
    parser.add_argument("--clock", choices=sorted(CLOCKS), default="wall", help="wall or the process's CPU seconds")
    parser.add_argument("--only", action="append", default=[], choices=sorted({*FINETUNE, *PRETRAIN}),
                        help="only this defense's cases (repeatable)")
    parser.add_argument("--against", help="another checkout's folder: A/B, repetitions interleaved")
    parser.add_argument("--method", default="splitnn", help="the finetuning cases' method (default splitnn)")
    parser.add_argument("--finetune-only", action="store_true", help="no pretraining cases")
    parser.add_argument("--per-process", type=count, default=None, metavar="N",
                        help="with --against: N interleaved repetitions in each fresh process, their medians (1)")
    parser.add_argument("--json", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.per_process is not None and not args.against:
        parser.error("--per-process N needs --against DIR (without it every repetition already runs in this process)")
    args.per_process = args.per_process or 1
    return args


def main() -> None:
    global clock
    args = arguments()
    if args.against:
        against(args)
        return
    torch.set_num_threads(1)
    clock = CLOCKS[args.clock]
    base = {"dataset": {"name": args.dataset}}
    if args.image:
        base = {"dataset": {"name": "fashion-mnist", "max_samples": 1500}, "model": {"encoder": "cnn"}}
    rows = measure(base, args.repeats, pretraining=not (args.image or args.finetune_only), only=args.only,
                   method=args.method)
    if args.json:
        print(json.dumps(rows))
        return
    print(f"{base['dataset']['name']}, {args.method}: defended / undefended training {args.clock} seconds, median of "
          f"{args.repeats} interleaved repetitions")
    print("| case | ratio | bound | undefended s |")
    print("|---|---|---|---|")
    for name, ratio, undefended in rows:
        bound = _bound(name)
        print(f"| {name} | {ratio:.2f}x | {bound:g}x{'' if ratio <= bound else ' (over)'} | {undefended:.2f} |")


if __name__ == "__main__":
    main()
