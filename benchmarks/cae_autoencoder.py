"""CAE's label autoencoder (``defenses/cae.py`` ``train_autoencoder``, SecretFlow's recipe: 30000 rows, 20 epochs,
batch 128, Adam 5e-4) trained by this checkout's code and by another checkout's, interleaved in one process: process
CPU seconds per training (one thread, glibc's malloc as in a training process), their ratio, the per-op profile of
both (``--profile``), and whether the two are the same autoencoder (the largest difference of their outputs on the C
one-hot rows and on 1000 random soft rows, and whether each decodes every class back from its fake label).

    git archive main | tar -x -C /tmp/main-tree
    python benchmarks/cae_autoencoder.py --against /tmp/main-tree [--repeats 3] [--profile 200] [--classes 10]

``--against DIR``: the other checkout's ``defenses/cae.py`` is loaded from its file (with this checkout's vflpriv for
what it imports). ``--profile STEPS``: torch.profiler's per-op table of each training over STEPS steps (one epoch of
STEPS x 128 rows) instead of the timing. ``--rounding``: this checkout's training once more on rows moved by one unit
in the last place (``torch.nextafter``), and the same differences against it: how far 4700 Adam steps carry a
change of float rounding's size, the scale on which to read the two checkouts' differences.
"""

from __future__ import annotations

import argparse
import importlib.util
import statistics
import time
from pathlib import Path

import torch

import vflpriv.defenses.cae as here
from vflpriv.models.allocator import reuse_freed_memory


def _load(tree: Path):
    spec = importlib.util.spec_from_file_location("cae_there", tree / "defenses" / "cae.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _train(module, classes: int, options) -> tuple[float, torch.nn.Module]:
    start = time.process_time()
    model = module.train_autoencoder(classes, strength=0.5, options=options, generator=torch.Generator().manual_seed(0),
                                     device=torch.device("cpu"))
    return time.process_time() - start, model


def _profile(modules: dict, classes: int, steps: int) -> None:
    from torch.profiler import ProfilerActivity, profile

    options = here.CAEOptions(samples=128 * steps, epochs=1)
    for name, module in modules.items():
        _train(module, classes, here.CAEOptions(samples=1280, epochs=1))  # warm-up
        with profile(activities=[ProfilerActivity.CPU]) as prof:
            _train(module, classes, options)
        print(f"{name}: {steps} steps")
        print(prof.key_averages().table(sort_by="self_cpu_time_total", row_limit=12))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--against", required=True, help="another checkout's folder (git archive main | tar -x -C DIR)")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--classes", type=int, default=10)
    parser.add_argument("--profile", type=int, default=0, metavar="STEPS", help="per-op profiles instead of timings")
    parser.add_argument("--rounding", action="store_true", help="also this checkout's training on rows one ulp away")
    args = parser.parse_args()
    torch.set_num_threads(1)
    reuse_freed_memory()
    modules = {"here": here, "there": _load(Path(args.against).resolve())}
    if args.profile:
        _profile(modules, args.classes, args.profile)
        return
    options = here.CAEOptions()
    seconds: dict[str, list[float]] = {name: [] for name in modules}
    models = {}
    for r in range(args.repeats):  # alternate which goes first
        for name in (("here", "there") if r % 2 == 0 else ("there", "here")):
            spent, models[name] = _train(modules[name], args.classes, options)
            seconds[name].append(spent)
    ratios = [a / b for a, b in zip(seconds["here"], seconds["there"])]
    print(f"CAE's autoencoder, {args.classes} classes, {options.samples} rows x {options.epochs} epochs, batch "
          f"{options.batch_size}: CPU s here {', '.join(f'{s:.2f}' for s in seconds['here'])}; there "
          f"{', '.join(f'{s:.2f}' for s in seconds['there'])}; here / there median **{statistics.median(ratios):.2f}x**")
    pairs = [("here against there", models["here"], models["there"])]
    if args.rounding:
        sharpen = here.sharpen
        here.sharpen = lambda p, temperature: torch.nextafter(sharpen(p, temperature=temperature), p.new_tensor(2.0))
        try:
            pairs.append(("here against here on rows one ulp away", models["here"],
                          _train(here, args.classes, options)[1]))
        finally:
            here.sharpen = sharpen
    eye = torch.eye(args.classes)
    rows = torch.rand(1000, args.classes, generator=torch.Generator().manual_seed(1)).softmax(1)
    ways = (lambda m: m.encode, lambda m: m.decode, lambda m: lambda v: m.decode(m.encode(v)))
    with torch.no_grad():
        for pair, a, b in pairs:
            for label, x in (("one-hot rows", eye), ("1000 random rows", rows)):
                diffs = [float((f(a)(x) - f(b)(x)).abs().max()) for f in ways]
                print(f"{pair}, {label}: largest difference encode {diffs[0]:.2e}, decode {diffs[1]:.2e}, "
                      f"decode(encode) {diffs[2]:.2e}")
        for name, m in models.items():
            decoded = m.decode(m.encode(eye)).argmax(1)
            print(f"{name}: decodes {int((decoded == torch.arange(args.classes)).sum())} of {args.classes} classes")


if __name__ == "__main__":
    main()
