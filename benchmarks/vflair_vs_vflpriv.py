"""VFLAIR's breast-cancer MixMatch experiment against vflpriv's, on this machine (issue 49; issue 16, item 4).

The experiment: breast cancer, 2 parties, split learning for 50 epochs at batch 256 and lr 0.05, then Fu et al.'s
passive MixMatch model completion (10 epochs x 1024 steps at batch 16, lr 2e-3, 10 auxiliary labels per class) at 6
noise levels. VFLAIR runs its own code (``src/main_pipeline.py`` with its breast-cancer config reduced to
``PassiveModelCompletion``, one config per noise level: none and GaussianDP 1e-4 ... 1); vflpriv runs the command of
issue 16 (``VFLPRIV_COMMAND``, its default 512-wide bottom and Linear top) and, as the architecture VFLAIR's config
names (MLP2_128 bottoms whose logits are summed), ``--set finetune.top=sum --set model.hidden=128``.

VFLAIR at its full budget costs hours of CPU here, so it is timed at 1 and 2 MixMatch epochs of one noise level
(both with the 50-epoch training and its start-up), and the full experiment is extrapolated: 6 x (fixed + 10 x
per epoch), fixed = t(1) - per epoch, per epoch = t(2) - t(1). CPU seconds (user + system, of the process and its
children) are the figure on a shared machine; wall seconds are printed beside them. VFLAIR runs on one thread, as
each vflpriv worker does: with torch's default two threads on two busy cores its CPU seconds counted spinning (its
second MixMatch epoch cost twice its first, training and start-up included).

Setting VFLAIR up, once (nothing of it is committed; only PyPI is used):

- ``fetch`` github:FLAIR-THU/VFLAIR and copy ``src/**/*.py``, ``*.json`` and ``src/models/124M/*`` (a GPT-2 vocabulary
  one of its utilities reads at import) to ``ROOT/x/y/src`` (its data path is ``../../../share_dataset``);
- ``ROOT/share_dataset/BreastCancer/wdbc.data``: scikit-learn's bundled copy of the same UCI data, written by
  ``--write-data``;
- its imports that this experiment never computes with (tensorflow, torchvision, datasets, sentencepiece, loguru,
  its web ``framework``) are stand-ins (``--stubs`` writes ``sitecustomize.py`` for them); transformers 4.39, peft
  0.10, accelerate 0.28, tokenizers 0.15 and huggingface_hub 0.20 (pure Python or wheels) go in ``ROOT/deps`` with
  ``pip install --target ROOT/deps --no-deps ...``; torch, numpy, pandas and scikit-learn are vflpriv's;
- its attacks call ``.cuda(non_blocking=True)``: on a CPU those stay on the CPU (the stand-in makes them the
  identity).

    python benchmarks/vflair_vs_vflpriv.py --root /tmp/vflair --write-data --stubs      # once
    python benchmarks/vflair_vs_vflpriv.py --root /tmp/vflair --base /tmp/base [--record FILE]
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

STUBBED = "tensorflow,loguru,torchvision,sentencepiece,datasets,framework"
VFLPRIV_COMMAND = [
    "evaluate", "--method", "splitnn", "--attack", "mc-mixmatch", "--dataset", "breast-cancer",
    "--strengths", "0,0.1,1,5,10,25", "--seeds", "0", "--set", "partition.aligned_fraction=1.0",
    "--set", "partition.labeled=455", "--set", "partition.aux=20", "--set", "partition.aux_source=labeled",
    "--set", "finetune.epochs=50", "--set", "finetune.batch_size=256", "--set", "finetune.lr=0.05",
    "--set", "attack.options.epochs=10", "--set", "attack.options.iterations=1024",
    "--set", "attack.options.batch_size=16", "--set", "attack.prior=none"]
MATCHED = ["--set", "finetune.top=sum", "--set", "model.hidden=128", "--set", "model.out_dim=128"]
LEVELS, EPOCHS = 6, 10

SITECUSTOMIZE = '''"""Stand-ins for the modules VFLAIR imports but its breast-cancer MixMatch path does not compute with."""
import importlib.abc, importlib.machinery, os, sys, types

STUBBED = set(os.environ.get("VFLAIR_STUBS", "").split(","))


class _Anything(type):
    def __getattr__(cls, name):
        if name.startswith("__"):
            raise AttributeError(name)
        return _Anything(name, (), {})

    def __call__(cls, *args, **kwargs):  # module-level set-up only (transforms.Compose(...), logger.add(...))
        return cls


class _Module(types.ModuleType):
    __path__ = []

    def __getattr__(self, name):
        if name.startswith("__"):
            raise AttributeError(name)
        return _Anything(name, (), {})


class _Finder(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    def find_spec(self, fullname, path, target=None):
        if fullname.split(".")[0] in STUBBED:
            return importlib.machinery.ModuleSpec(fullname, self, is_package=True)
        return None

    def create_module(self, spec):
        return _Module(spec.name)

    def exec_module(self, module):
        module.__path__ = []


sys.meta_path.insert(0, _Finder())

if os.environ.get("VFLAIR_CPU_CUDA") == "1":  # its attacks call .cuda(non_blocking=True): on a CPU, stay there
    import torch

    torch.Tensor.cuda = lambda self, *args, **kwargs: self
    torch.nn.Module.cuda = lambda self, *args, **kwargs: self
'''


def write_data(root: Path) -> None:
    """wdbc.data (id, diagnosis M/B, 30 features) from scikit-learn's bundled copy of the UCI breast-cancer data."""
    import numpy as np
    from sklearn.datasets import load_breast_cancer

    data = load_breast_cancer()
    folder = root / "share_dataset" / "BreastCancer"
    folder.mkdir(parents=True, exist_ok=True)
    rows = [[str(i), "M" if t == 0 else "B", *map(repr, x)] for i, (x, t) in enumerate(zip(data.data, data.target))]
    (folder / "wdbc.data").write_text("\n".join(",".join(r) for r in rows) + "\n")
    assert np.isfinite(data.data).all()


def configs(src: Path) -> None:
    """Its breast-cancer config with only PassiveModelCompletion, at 1 and 2 MixMatch epochs (no defense)."""
    base = json.loads((src / "configs/passive_party_attack/binary_class/breast_test_attack_nodefense.json").read_text())
    for epochs in (1, 2):
        base["attack_list"] = {"0": {"name": "PassiveModelCompletion", "parameters": {
            "party": [0], "val_iteration": 1024, "epochs": epochs, "batch_size": 16, "lr": 2e-3,
            "n_labeled_per_class": 10}}}
        (src / f"configs/bench_breast_mixmatch_e{epochs}.json").write_text(json.dumps(base, indent=1))


def timed(cmd: list[str], *, cwd: Path, env: dict) -> tuple[float, float]:
    """(CPU seconds of the command and its children, wall seconds)."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    done = subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True)
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if done.returncode != 0:
        raise SystemExit(f"{' '.join(cmd)} failed:\n{done.stderr[-3000:]}")
    return after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime, wall


def vflair(root: Path, say) -> float:
    src = root / "x" / "y" / "src"
    configs(src)
    env = {**os.environ, "PYTHONPATH": f"{root / 'stubs'}:{root / 'deps'}", "VFLAIR_STUBS": STUBBED,
           "VFLAIR_CPU_CUDA": "1", "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}  # one thread, as a vflpriv worker
    cpu, wall = {}, {}
    for epochs in (1, 2):
        cpu[epochs], wall[epochs] = timed([sys.executable, "main_pipeline.py", "--device", "cpu", "--configs",
                                           f"bench_breast_mixmatch_e{epochs}"], cwd=src, env=env)
        say(f"VFLAIR, one noise level, {epochs} MixMatch epoch(s) of 1024 steps: {cpu[epochs]:.0f} CPU s, "
            f"{wall[epochs]:.0f} s wall")
    per_epoch = cpu[2] - cpu[1]
    full = LEVELS * (cpu[1] - per_epoch + EPOCHS * per_epoch)
    say(f"VFLAIR, the whole experiment ({LEVELS} levels x {EPOCHS} epochs), extrapolated: {full:.0f} CPU s "
        f"({per_epoch:.0f} CPU s per MixMatch epoch, {cpu[1] - per_epoch:.0f} CPU s per level besides)")
    return full


def vflpriv(python: Path, name: str, extra: list[str], say) -> float:
    tmp = Path(tempfile.mkdtemp(prefix=f"vflair-vs-{name}-"))
    env = {**os.environ, "VFLPRIV_CACHE": str(tmp / "cache")}
    cpu, wall = timed([str(python), "-m", "vflpriv", *VFLPRIV_COMMAND, *extra, "--out", str(tmp / "out"), "--quiet"],
                      cwd=tmp, env=env)
    say(f"vflpriv ({name}), the whole experiment: {cpu:.0f} CPU s, {wall:.0f} s wall")
    return cpu


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--root", type=Path, required=True, help="VFLAIR's set-up folder (see the module)")
    parser.add_argument("--base", type=Path, default=None, help="checkout of 0c34d33 with .venv, for its figure too")
    parser.add_argument("--write-data", action="store_true", help="write wdbc.data from scikit-learn's copy, then stop")
    parser.add_argument("--stubs", action="store_true", help="write the stand-ins' sitecustomize.py, then stop")
    parser.add_argument("--record", type=Path, default=None)
    args = parser.parse_args()
    if args.write_data or args.stubs:
        if args.write_data:
            write_data(args.root)
        if args.stubs:
            (args.root / "stubs").mkdir(parents=True, exist_ok=True)
            (args.root / "stubs" / "sitecustomize.py").write_text(SITECUSTOMIZE)
        return
    lines: list[str] = []

    def say(text: str) -> None:
        print(text, flush=True)
        lines.append(text)

    say(f"load average at the start: {' '.join(f'{x:.1f}' for x in os.getloadavg())}")
    theirs = vflair(args.root, say)
    runs = [("this code", Path(sys.executable), []), ("this code, VFLAIR's MLP2_128 architecture", Path(sys.executable),
                                                        MATCHED)]
    if args.base is not None:
        runs.insert(0, ("0c34d33", args.base / ".venv" / "bin" / "python", []))
    for name, python, extra in runs:
        ours = vflpriv(python, name, extra, say)
        say(f"**VFLAIR / vflpriv ({name}): {theirs / ours:.1f}x in CPU seconds** (goal: 50x)")
    say(f"load average at the end: {' '.join(f'{x:.1f}' for x in os.getloadavg())}")
    if args.record:
        args.record.write_text("\n\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
