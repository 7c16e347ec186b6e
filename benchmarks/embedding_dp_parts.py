"""Where embedding-dp's time goes per update on digits' passive bottom (32 -> 128 -> 128, Linear - BatchNorm - ReLU
twice, batch 64; issue 47's speed line): each part of its finetuning step timed alone, in one process on one thread,
as a ratio to the undefended bottom's forward and backward timed in the same repeat (the parts interleaved in each
repeat; CPU seconds; medians of the repeats' ratios).

    python benchmarks/embedding_dp_parts.py [--repeats 5]
    python benchmarks/embedding_dp_parts.py --against DIR [--bottom cnn] [--repeats 9]   # the step, this code vs DIR's
    python benchmarks/embedding_dp_parts.py --check [--bottom cnn]   # the rows check's cost, in steps
    python benchmarks/embedding_dp_parts.py --check --against DIR   # the step that checks, this code vs DIR's

With ``--against DIR`` (another checkout, e.g. main's worktree): its ``defenses/row_checks.py``, ``per_sample.py`` and
``embedding_dp.py`` loaded beside this checkout's, and the whole DP-SGD step of each (same bottom, same data,
same seeds) timed interleaved in every repeat, with the undefended baseline: each step's ratio to the baseline, and
this code's over DIR's (medians of the repeats' ratios; CPU seconds). With ``--check``: the step that checks the rows
(the first after each ``train()``: ``row_checks.py``) over the step that does not, interleaved (its cost in steps; a
training checks once); with both, the step that checks by this code and by DIR's.

The parts: the wrapped bottom's forward (the BatchNorms frozen, the layers' inputs taped, each row clipped and noised:
``PrivateRows``), the one backward that records each layer's output gradient, the per-sample norms and clipped sums
(``GhostTape.norms``; book-keeping: no weight gradient formed in the backward), the noise of every parameter (drawn
per parameter into one buffer), and the whole DP-SGD update (``EmbeddingDP.passive_backward``: all of these, the update and its counts).
"""

from __future__ import annotations

import argparse
import importlib.util
import statistics
import sys
import time
from pathlib import Path

import torch
from torch import nn

from vflpriv.defenses.embedding_dp import Counts, EmbeddingDP, EmbeddingDPOptions, _scale
from vflpriv.defenses.ghost_sums import flat_noise
from vflpriv.methods.finetune import backward_with
from vflpriv.models.allocator import reuse_freed_memory
from vflpriv.models.encoders import mlp_block


#: The part every other is divided by.
BASELINE = "the undefended bottom's forward and backward"


def _ratios(fns: dict, repeats: int, calls: int = 200, pairs: tuple | None = None) -> tuple[dict, float]:
    """Per part, the median over ``repeats`` of its CPU time over :data:`BASELINE`'s in the same repeat (every part
    timed for ``calls`` calls in each repeat, in turn, after a warm-up), and with ``pairs`` (two parts) under "pair"
    the median of the first's time over the second's in the same repeat; and the baseline's median CPU ms per call."""
    for fn in fns.values():
        for _ in range(calls // 4):
            fn()
    times: dict[str, list[float]] = {name: [] for name in fns}
    for _ in range(repeats):
        for name, fn in fns.items():
            start = time.process_time()
            for _ in range(calls):
                fn()
            times[name].append((time.process_time() - start) / calls * 1e3)
    base = times[BASELINE]
    ratios = {name: statistics.median(t / b for t, b in zip(ts, base)) for name, ts in times.items()}
    if pairs is not None:
        ratios["pair"] = statistics.median(a / b for a, b in zip(times[pairs[0]], times[pairs[1]]))
    return ratios, statistics.median(base)


def _against(tree: Path):
    """DIR's ``defenses/embedding_dp.py`` as a module of its own, importing DIR's ``row_checks.py``, ``own_modules.py``,
    ``private_rows.py`` (where DIR has them) and ``per_sample.py`` (loaded under the package's names only while they
    execute)."""
    loaded: dict[str, object] = {}
    for name in ("row_checks", "ghost_sums", "own_modules", "per_sample", "tape_checks", "private_rows",
                 "embedding_dp_accounting", "embedding_dp"):  # in import order
        if not (tree / "defenses" / f"{name}.py").exists():  # before issue 47's row checks
            continue
        spec = importlib.util.spec_from_file_location(f"against_{name}", tree / "defenses" / f"{name}.py")
        module = importlib.util.module_from_spec(spec)
        held = {k: sys.modules.get(f"vflpriv.defenses.{k}") for k in loaded}
        sys.modules.update({f"vflpriv.defenses.{k}": m for k, m in loaded.items()})
        try:
            spec.loader.exec_module(module)
        finally:
            sys.modules.update({f"vflpriv.defenses.{k}": m for k, m in held.items()})
        loaded[name] = module
    return loaded["embedding_dp"]


def _bottoms(kind: str, batch: int, features: int, width: int):
    """A bottom of ``kind`` (digits' MLP blocks, or vflpriv's CNN encoder on 28 x 28 images), its input rows and its
    output width."""
    if kind == "digits":
        return (lambda: nn.Sequential(mlp_block(features, width), mlp_block(width, width))), (features,), width
    from vflpriv.config.schema import ModelConfig
    from vflpriv.data.base import PartySpec
    from vflpriv.models.encoders import build_encoder

    spec, config = PartySpec(modality="image", shape=(1, 28, 28)), ModelConfig(hidden=width, out_dim=width)
    return (lambda: build_encoder(spec, config, generator=torch.Generator().manual_seed(0))), spec.shape, width


def _setting(bottom: str, batch: int, features: int, width: int):
    """The bottom's builder, a batch, the gradient it receives, its ids, and an undefended bottom (the baseline's)."""
    build, shape, width = _bottoms(bottom, batch, features, width)
    g = torch.Generator().manual_seed(0)
    x, received = torch.rand(batch, *shape, generator=g), torch.randn(batch, width, generator=g) * 0.01
    torch.manual_seed(0)
    return build, x, received, torch.arange(batch), build().train()


def steps(tree: Path, *, bottom: str = "digits", batch: int = 64, features: int = 32, width: int = 128,
          check: bool = False) -> dict:
    """The baseline and the whole DP-SGD step by this checkout's code and by ``tree``'s, on equal bottoms and data; with
    ``check``, each step preceded by ``train()`` (so it checks the rows)."""
    build, x, received, ids, plain = _setting(bottom, batch, features, width)
    fns = {"marker": lambda: None, BASELINE: lambda: backward_with(plain(x), received)}
    for label, module in (("this checkout", sys.modules[EmbeddingDP.__module__]), (str(tree), _against(tree))):
        torch.manual_seed(0)
        dp = module.EmbeddingDP(strength=0.1, party=1, phase="finetune", kinds=None, options=EmbeddingDPOptions(),
                                generator=torch.Generator().manual_seed(1))
        dp.released, dp.stepped = module.Counts(batch), module.Counts(batch)
        wrapped = dp.passive_bottom(1, build()).train()

        def update(dp=dp, wrapped=wrapped):
            if check:
                wrapped.train()
            sent = wrapped(x)
            dp.passive_backward(1, wrapped, x, sent, received, ids)
            for p in wrapped.parameters():
                p.grad = None

        fns[f"the whole step, {label}'s code"] = update
    del fns["marker"]
    return fns


def checked(*, bottom: str = "digits", batch: int = 64, features: int = 32, width: int = 128) -> dict:
    """The baseline, the DP-SGD step, and the step preceded by ``train()`` (so it checks the rows), on one bottom."""
    build, x, received, ids, plain = _setting(bottom, batch, features, width)
    dp = EmbeddingDP(strength=0.1, party=1, phase="finetune", kinds=None, options=EmbeddingDPOptions(),
                     generator=torch.Generator().manual_seed(1))
    dp.released, dp.stepped = Counts(batch), Counts(batch)
    wrapped = dp.passive_bottom(1, build()).train()

    def update(check: bool):
        if check:
            wrapped.train()
        dp.passive_backward(1, wrapped, x, wrapped(x), received, ids)
        for p in wrapped.parameters():
            p.grad = None

    return {BASELINE: lambda: backward_with(plain(x), received), "the step checking the rows": lambda: update(True),
            "the step": lambda: update(False)}


def parts(batch: int = 64, features: int = 32, width: int = 128) -> dict:
    g = torch.Generator().manual_seed(0)
    x, received = torch.rand(batch, features, generator=g), torch.randn(batch, width, generator=g) * 0.01
    ids = torch.arange(batch)
    plain = nn.Sequential(mlp_block(features, width), mlp_block(width, width)).train()
    dp = EmbeddingDP(strength=0.1, party=1, phase="finetune", kinds=None, options=EmbeddingDPOptions(),
                     generator=torch.Generator().manual_seed(1))
    dp.released, dp.stepped = Counts(batch), Counts(batch)  # what bind() sets from a federation
    wrapped = dp.passive_bottom(1, nn.Sequential(mlp_block(features, width), mlp_block(width, width))).train()
    trained = [p for p in wrapped.parameters() if p.requires_grad]

    def taped():
        sent = wrapped(x)
        return sent, *wrapped.tape_of(sent)

    def backward():
        _, clipped, tape = taped()
        torch.autograd.grad((clipped * received).sum(), [edge for _, edge in tape.edges], allow_unused=True)

    def norms_and_sums():
        _, clipped, tape = taped()
        squares, clipped_sums = tape.norms((clipped * received).sum(1), n=x.shape[0])
        flat = torch.empty(sum(p.numel() for p in trained))
        clipped_sums(_scale(squares, 1.0), dict(zip(trained, flat.split([p.numel() for p in trained]))))

    def update():
        sent = wrapped(x)
        dp.passive_backward(1, wrapped, x, sent, received, ids)
        for p in trained:
            p.grad = None

    def forward():
        wrapped.tape_of(wrapped(x))

    return {
        "the undefended bottom's forward": lambda: plain(x),
        BASELINE: lambda: backward_with(plain(x), received),
        "embedding-dp: the forward (frozen BatchNorm, tape, rows clipped and noised)": forward,
        "embedding-dp: the forward and the one backward (output gradients recorded)": backward,
        "embedding-dp: the forward, the backward, per-sample norms and clipped sums": norms_and_sums,
        "embedding-dp: the noise of every parameter of the bottom (per parameter, one buffer)": lambda: flat_noise(trained, dp.generator),
        "embedding-dp: the whole step (forward, passive_backward)": update,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--against", type=Path, metavar="DIR",
                        help="another checkout: its whole step beside this one's")
    parser.add_argument("--bottom", choices=("digits", "cnn"), default="digits",
                        help="with --against or --check: digits' MLP bottom or vflpriv's CNN encoder on 28 x 28 images")
    parser.add_argument("--check", action="store_true", help="the rows check's cost: the step with it over without")
    args = parser.parse_args()
    torch.set_num_threads(1)
    reuse_freed_memory()
    if args.check and args.against is None:
        fns = checked(bottom=args.bottom)
        ratios, base = _ratios(fns, args.repeats, pairs=("the step checking the rows", "the step"))
        print(f"CPU time per update over {BASELINE}'s ({base:.3f} ms here), median of {args.repeats} interleaved "
              f"repeats ({args.bottom} bottom); the step checking the rows over the step: {ratios['pair']:.3f}")
        return
    if args.against is not None:
        fns = steps(args.against, bottom=args.bottom, check=args.check)
        mine, theirs = (name for name in fns if name != BASELINE)
        ratios, base = _ratios(fns, args.repeats, pairs=(mine, theirs))
        print(f"CPU time per update over {BASELINE}'s ({base:.3f} ms here), median of {args.repeats} interleaved "
              f"repeats ({args.bottom} bottom); this checkout's {'checking ' * args.check}step over "
              f"{args.against}'s: {ratios['pair']:.3f}")
        for name in (mine, theirs):
            print(f"| {name} | {ratios[name]:.3f} |")
        return
    ratios, base = _ratios(parts(), args.repeats)
    print(f"CPU time per update over {BASELINE}'s ({base:.3f} ms here), median of {args.repeats} interleaved repeats")
    print("| part (per update) | ratio |")
    print("|---|---|")
    for name, ratio in ratios.items():
        print(f"| {name} | {ratio:.2f} |")


if __name__ == "__main__":
    main()
