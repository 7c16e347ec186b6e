"""A Table IV analogue of the FedHSSL paper: finetuned accuracy of FedSplitNN, FedLocalSSL, FedCSSL,
FedGSSL and FedHSSL (x SimSiam, BYOL, MoCo) with few labels, mean +- std over seeds.

Every cell is ``vflpriv.runner.execution.run(RunConfig)[0]`` with no defense and the ``mc`` attack (its accuracy is kept
in the CSV too; the prior is skipped), registered default method options, and the default finetuning
except its learning rate, which is swept (``--finetune-lrs``). Two tables are written:

- **best lr**: per method and label count, the finetuning lr with the best mean over seeds, as the paper
  does ("the best result is selected" among lr 0.005, 0.01, 0.03). It is selected on the test labels,
  hence optimistic for every method alike;
- **default lr**: the ``FinetuneConfig`` default (Adam 1e-3), no selection.

    python benchmarks/table_iv.py [--datasets digits,fashion-mnist] [--labels 200,400] [--aligned 0.2]
        [--seeds 0,1,2] [--methods NAME,...] [--finetune-lrs 0.0003,0.001,0.003,0.01] [--jobs 2]
        [--max-samples-fashion 10000] [--encoder auto|mlp|cnn] [--pretrain-epochs N] [--tag NAME]
        [--out DIR] [--report-only]

``--pretrain-epochs`` sets FedCSSL/FedGSSL/FedHSSL's ``global_iterations`` and FedLocal's ``epochs`` (the
same SSL budget for both); ``--tag`` names the result files ``table_iv_<dataset>-<tag>.*``. Cells run seed
by seed, so an interrupted run leaves whole seeds; within a seed, label count by label count: method
pretrainings are cached and shared by the label counts (pretraining reads no labels), and parallel
workers never pretrain the same method at once.

Datasets whose files are missing are skipped with a note. When a label count exceeds the aligned
samples (digits: 20% of 1437 = 287 < 400), that column uses 40% aligned (the paper's main setting)
and says so. Runs are appended to ``benchmarks/results/table_iv_<dataset>.csv`` as they finish (a rerun
skips finished cells); ``table_iv_<dataset>.md`` holds the tables and whether FedHSSL > FedLocal >
FedSplitNN held for each SSL method and label count.
"""

from __future__ import annotations

import argparse
import csv
import math
import statistics
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from joblib import Parallel, delayed

from vflpriv.common.errors import DataError
from vflpriv.config.schema import DatasetConfig, FinetuneConfig, RunConfig
from vflpriv.data.load import load_dataset

RESULTS = Path(__file__).resolve().parent / "results"
FLAVOURS = {"simsiam": "SimSiam", "byol": "BYOL", "moco": "MoCo"}
STEPS = {"local": "FedLocal", "cssl": "FedCSSL", "gssl": "FedGSSL", "fedhssl": "FedHSSL"}
METHODS = ["splitnn"] + [f"{s}-{f}" for s in STEPS for f in FLAVOURS]
DEFAULT_LR = FinetuneConfig().lr
COLUMNS = ["dataset", "method", "labels", "aligned", "lr", "seed", "utility", "metric", "attack_accuracy",
           "comm_mb_pretrain", "seconds", "status", "error"]

Key = tuple[str, int, float, int]  # method, labels, finetune lr, seed


def display(method: str) -> str:
    if method == "splitnn":
        return "FedSplitNN"
    step, flavour = method.split("-")
    return f"{STEPS[step]}{'-' if step != 'local' else ''}{FLAVOURS[flavour]}"


def aligned_for(labels: int, aligned: float, n_train: int) -> float:
    """``aligned`` when it holds ``labels`` aligned samples, else the paper's 40% (or more)."""
    for fraction in (aligned, 0.4, 0.6, 0.8, 1.0):
        if fraction >= aligned and labels <= round(fraction * n_train):
            return fraction
    raise SystemExit(f"{labels} labels do not fit in {n_train} training samples")


def read_done(path: Path) -> dict[Key, dict]:
    if not path.exists():
        return {}
    with path.open() as f:
        rows = list(csv.DictReader(f))
    return {
        (r["method"], int(r["labels"]), float(r.get("lr") or DEFAULT_LR), int(r["seed"])): r
        for r in rows
        if r["status"] == "ok"
    }


@dataclass(frozen=True)
class Setting:
    """What every cell of one table shares besides method, labels, lr and seed."""

    dataset: str
    max_samples: int | None
    encoder: str
    pretrain_epochs: int | None

    def method_options(self, method: str) -> dict:
        if self.pretrain_epochs is None or method == "splitnn":
            return {}
        return {"epochs" if method.startswith("local-") else "global_iterations": self.pretrain_epochs}


def config(setting: Setting, method: str, labels: int, aligned: float, lr: float, seed: int) -> RunConfig:
    return RunConfig.model_validate({
        "dataset": {"name": setting.dataset, "max_samples": setting.max_samples},
        "partition": {"labeled": labels, "aligned_fraction": aligned},
        "model": {"encoder": setting.encoder},
        "method": {"name": method, "options": setting.method_options(method)},
        "finetune": {"lr": lr},
        "attack": {"name": "mc", "prior": "none"},
        "defenses": [],
        "seed": seed,
    })


def one_run(setting: Setting, key: Key, aligned: float, threads: int) -> dict:
    import torch

    from vflpriv.runner.execution import run

    torch.set_num_threads(threads)
    method, labels, lr, seed = key
    start = time.perf_counter()
    row = {"dataset": setting.dataset, "method": method, "labels": labels, "aligned": aligned, "lr": lr, "seed": seed}
    try:
        (r,) = run(config(setting, method, labels, aligned, lr, seed))
        row |= {"utility": r.utility, "metric": r.utility_metric, "attack_accuracy": r.attack_accuracy,
                "comm_mb_pretrain": r.comm_mb_pretrain, "status": "ok", "error": ""}
    except Exception as exc:  # keep going; the row records the failure
        row |= {"status": "error", "error": f"{type(exc).__name__}: {exc}"}
    row["seconds"] = round(time.perf_counter() - start, 2)
    return row


def mean_std(values: list[float]) -> tuple[float, float]:
    return statistics.fmean(values), (statistics.stdev(values) if len(values) > 1 else 0.0)


Cell = tuple[list[float], float]  # utilities in seed order, finetuning lr


def ordering_lines(get, labels: list[int]) -> list[str]:
    """Whether FedHSSL > FedLocal > FedSplitNN held on the means, per label count and SSL flavour, with the
    paired (same seed = same labeled and aligned samples) differences that say how far apart they are."""
    def paired(a: Cell, b: Cell) -> str:
        diffs = [x - y for x, y in zip(a[0], b[0])]
        m, s = mean_std(diffs)
        return f"{m:+.3f} ± {s:.3f} ({sum(d > 0 for d in diffs)}/{len(diffs)} seeds > 0)"

    out = ["FedHSSL > FedLocal > FedSplitNN (means; paired differences over seeds):", ""]
    for n in labels:
        split = get("splitnn", n)
        for f in FLAVOURS:
            local, hssl = get(f"local-{f}", n), get(f"fedhssl-{f}", n)
            if None in (split, local, hssl):
                continue
            means = [statistics.fmean(c[0]) for c in (hssl, local, split)]
            held = means[0] > means[1] > means[2]
            out.append(f"- {n} labels, {FLAVOURS[f]}: FedHSSL {means[0]:.3f}, FedLocal {means[1]:.3f}, "
                       f"FedSplitNN {means[2]:.3f}: **{'held' if held else 'did not hold'}**; FedHSSL − FedLocal "
                       f"{paired(hssl, local)}, FedLocal − FedSplitNN {paired(local, split)}")
    return out + [""]


def tables(dataset: str, rows: dict[Key, dict], methods: list[str], labels: list[int], lrs: list[float],
           aligned: dict[int, float], seeds: list[int], note: str) -> str:
    def cell(method: str, n: int, lr: float) -> Cell | None:
        values = [float(rows[(method, n, lr, s)]["utility"]) for s in seeds if (method, n, lr, s) in rows]
        return (values, lr) if len(values) == len(seeds) else None

    def best(method: str, n: int) -> Cell | None:
        cells = [c for lr in lrs if (c := cell(method, n, lr))]
        return max(cells, key=lambda c: statistics.fmean(c[0])) if len(cells) == len(lrs) else None

    metric = next((r["metric"] for r in rows.values()), "accuracy")
    head = [f"{n} labels ({aligned[n]:.0%} aligned)" for n in labels]
    out = [f"# Table IV analogue: {dataset}", "",
           f"Finetuned {metric} on the test set, mean ± std over seeds {','.join(map(str, seeds))}; registered "
           f"default method options unless noted; no defense. {note}", ""]
    sections = []
    if len(lrs) > 1:
        sections.append((f"Best finetuning lr per method among {', '.join(map(str, lrs))} (selected on the "
                         "test mean, as the paper does; optimistic for every method alike)", best, True))
    for lr in ([DEFAULT_LR] if DEFAULT_LR in lrs else lrs[:1]):
        sections.append((f"Finetuning lr {lr:g}" + (" (the default)" if lr == DEFAULT_LR else ""),
                         lambda m, n, lr=lr: cell(m, n, lr), False))
    for title, get, show_lr in sections:
        out += [f"## {title}", "", "| method | " + " | ".join(head) + " |", "|---|" + "---|" * len(labels)]
        top = {n: max((statistics.fmean(c[0]) for m in methods if (c := get(m, n))), default=math.nan)
               for n in labels}
        for m in methods:
            texts = []
            for n in labels:
                c = get(m, n)
                if c is None:
                    texts.append("—")
                    continue
                mean, std = mean_std(c[0])
                text = f"{mean:.3f} ± {std:.3f}" + (f" (lr {c[1]:g})" if show_lr else "")
                texts.append(f"**{text}**" if mean == top[n] else text)
            out.append(f"| {display(m)} | " + " | ".join(texts) + " |")
        out += [""] + ordering_lines(get, labels)
    return "\n".join(out)


def run_cells(setting: Setting, todo: list[Key], aligned: dict[int, float], csv_path: Path, *, jobs: int,
              threads: int) -> None:
    """Run ``todo`` in parallel, appending each finished row to ``csv_path`` (so an interrupted run keeps it)."""
    new_file = not csv_path.exists()
    with csv_path.open("a", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=COLUMNS)
        if new_file:
            writer.writeheader()
        results = Parallel(n_jobs=jobs, return_as="generator_unordered")(
            delayed(one_run)(setting, key, aligned[key[1]], threads) for key in todo
        )
        for row in results:
            writer.writerow(row)
            f.flush()
            print(f"{setting.dataset} {row['labels']:4d} lr {row['lr']:<6g} {display(row['method']):18s} seed "
                  f"{row['seed']}: {row.get('utility', float('nan')):.3f} ({row['seconds']:.1f}s) {row['error']}",
                  flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--datasets", default="digits,fashion-mnist")
    parser.add_argument("--labels", default="200,400")
    parser.add_argument("--aligned", type=float, default=0.2)
    parser.add_argument("--seeds", default="0,1,2")
    parser.add_argument("--methods", default=",".join(METHODS))
    parser.add_argument("--finetune-lrs", default="0.0003,0.001,0.003,0.01")
    parser.add_argument("--jobs", type=int, default=1, help="parallel runs (each with --threads threads)")
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--max-samples-fashion", type=int, default=10000,
                        help="training rows kept of Fashion-MNIST (stratified), for CPU time; 0 = all 60000")
    parser.add_argument("--encoder", default="auto", choices=["auto", "mlp", "cnn"])
    parser.add_argument("--pretrain-epochs", type=int, default=None,
                        help="SSL budget: global iterations (FedCSSL/GSSL/HSSL) and epochs (FedLocal)")
    parser.add_argument("--tag", default="", help="suffix of the result files")
    parser.add_argument("--out", type=Path, default=RESULTS)
    parser.add_argument("--report-only", action="store_true",
                        help="run nothing: rewrite the .md from the runs already in the .csv")
    args = parser.parse_args()
    labels = [int(v) for v in args.labels.split(",")]
    seeds = [int(v) for v in args.seeds.split(",")]
    lrs = [float(v) for v in args.finetune_lrs.split(",")]
    methods = args.methods.split(",")
    args.out.mkdir(parents=True, exist_ok=True)
    for dataset in args.datasets.split(","):
        max_samples = (args.max_samples_fashion or None) if dataset == "fashion-mnist" else None
        try:
            ds = load_dataset(DatasetConfig(name=dataset, max_samples=max_samples), parties=2)
        except DataError as exc:
            print(f"skipping {dataset}: {exc}", file=sys.stderr)
            continue
        n_train = ds.y_train.shape[0]
        aligned = {n: aligned_for(n, args.aligned, n_train) for n in labels}
        setting = Setting(dataset, max_samples, args.encoder, args.pretrain_epochs)
        note = (f"{n_train} training rows" + (" (a stratified subset)" if max_samples else "")
                + f"; encoder {args.encoder}"
                + ("" if args.pretrain_epochs is None else f"; SSL budget {args.pretrain_epochs} global iterations "
                   "(FedCSSL/GSSL/HSSL) or epochs (FedLocal)") + ".")
        stem = f"table_iv_{dataset}" + (f"-{args.tag}" if args.tag else "")
        csv_path, md_path = args.out / f"{stem}.csv", args.out / f"{stem}.md"
        done = read_done(csv_path)
        # label counts outside methods: parallel workers never pretrain the same (method, seed) at once,
        # and the later label counts find that pretraining in the cache
        todo = [(m, n, lr, s) for s in seeds for n in labels for lr in lrs for m in methods
                if (m, n, lr, s) not in done and not args.report_only]
        if todo:
            run_cells(setting, todo, aligned, csv_path, jobs=args.jobs, threads=args.threads)
        done = read_done(csv_path)  # with the rows of any other process appending to the same file
        md_path.write_text(tables(dataset, done, methods, labels, lrs, aligned, seeds, note))
        print(md_path.read_text())


if __name__ == "__main__":
    main()
