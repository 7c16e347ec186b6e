"""fi-adversarial's own work per update (the victim's term and its imagined decoder's step: ``passive_loss`` and the
term's backward into the sent rows), this checkout's ``defenses/fi_adversarial.py`` against another checkout's, in one
process on one thread, interleaved in each repeat (CPU seconds; medians of the repeats' ratios).

    python benchmarks/fi_adversarial_step.py --against DIR [--repeats 15]

Digits' setting: batch 64, the 128-wide embedding of party 1's 8 x 4 halves, VFLAIR's MLP decoder, alpha 3 (the
middle of its default strengths). Only DIR's ``defenses/fi_adversarial.py`` is loaded from DIR; the rest is this
checkout's. Both defenses draw their decoders from the same seed and see the same batches: their terms are compared
bit for bit too.
"""

from __future__ import annotations

import argparse
import importlib.util
import statistics
import sys
import time
from pathlib import Path

import torch

from vflpriv.config.schema import RunConfig
from vflpriv.defenses.fi_adversarial import FIAdversarial
from vflpriv.engine.message import FINETUNE
from vflpriv.runner.execution import build_federation
from vflpriv.runner.planning import plan


def _their_class(tree: Path) -> type:
    """DIR's ``FIAdversarial``, from its ``defenses/fi_adversarial.py`` loaded as a module of its own."""
    spec = importlib.util.spec_from_file_location("their_fi_adversarial", tree / "defenses" / "fi_adversarial.py")
    module = importlib.util.module_from_spec(spec)
    try:
        spec.loader.exec_module(module)
        return module.FIAdversarial
    except Exception as err:  # any failure of another checkout's code: one line, not its traceback
        print(f"error: --against {tree}: its defenses/fi_adversarial.py does not load here "
              f"({type(err).__name__}: {err})", file=sys.stderr)
        raise SystemExit(2) from None


def _step(defense, x: torch.Tensor, z: torch.Tensor) -> torch.Tensor:
    """One update's term and decoder step on embedding ``z``; the term and its gradient into the rows, flat."""
    sent = z.clone().requires_grad_(True)
    term = defense.passive_loss(1, FINETUNE, x, sent)
    term.backward()
    return torch.cat([term.detach().reshape(1), sent.grad.flatten()])


def _repeats(text: str) -> int:
    """A whole number of at least 2 (the quartiles need two; argparse turns the error into one ``error:`` line)."""
    value = int(text)
    if value < 2:
        raise argparse.ArgumentTypeError(f"{text} is not a whole number of at least 2")
    return value


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--against", required=True, help="another checkout's folder")
    parser.add_argument("--repeats", type=_repeats, default=15)
    parser.add_argument("--calls", type=_repeats, default=80, help="updates per repeat (digits' finetuning: 80)")
    args = parser.parse_args()
    if not (Path(args.against) / "defenses" / "fi_adversarial.py").is_file():
        parser.error(f"--against {args.against}: no defenses/fi_adversarial.py there (a checkout's folder)")
    torch.set_num_threads(1)
    config = RunConfig.model_validate({"dataset": {"name": "digits"}, "attack": {"name": "fi-decoder"},
                                       "defenses": [{"name": "fi-adversarial", "strength": 3.0}]})
    p = plan(config)
    fed = build_federation(p)
    ours = p.defenses[0]
    kwargs = {"strength": ours.strength, "party": ours.party, "phase": ours.phase, "kinds": ours.kinds,
              "options": ours.options}
    defenses = {label: cls(**kwargs, generator=torch.Generator().manual_seed(7))
                for label, cls in (("here", FIAdversarial), ("there", _their_class(Path(args.against))))}
    for d in defenses.values():
        d.bind(fed)
    g = torch.Generator().manual_seed(0)
    x = fed.passive[0].x_train[:64]
    batches = [torch.randn(64, 128, generator=g) for _ in range(args.calls)]
    outputs = {label: [_step(d, x, z) for z in batches[:10]] for label, d in defenses.items()}  # warm-up
    same = all(torch.equal(a, b) for a, b in zip(*outputs.values()))
    ratios = []
    for _ in range(args.repeats):
        seconds = {}
        for label, d in defenses.items():
            start = time.process_time()
            for z in batches:
                _step(d, x, z)
            seconds[label] = time.process_time() - start
        ratios.append(seconds["here"] / seconds["there"])
    print(f"fi-adversarial's term and decoder step, {args.calls} updates: this checkout's CPU seconds over "
          f"{args.against}'s, median of {args.repeats} interleaved repeats: {statistics.median(ratios):.3f} "
          f"(quartiles {statistics.quantiles(ratios, n=4)[0]:.3f}, {statistics.quantiles(ratios, n=4)[2]:.3f}); "
          f"terms and gradients bit for bit the same: {same}")


if __name__ == "__main__":
    main()
