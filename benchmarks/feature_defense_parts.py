"""Why a feature defense cannot stay within issue 47's bound on digits' finetuning: each defense's own network or noise
per update, timed alone, against the whole undefended finetuning step, in one process on one thread (as the runner
trains). Prints per part its milliseconds per update and the floor 1 + part / step that it alone puts under the
defended / undefended ratio (benchmarks/feature_defense_overhead.py measures the ratios themselves).

    python benchmarks/feature_defense_parts.py [--repeats 400]

The parts (at digits' defaults: batch 64, the passive bottom 32 -> 128 -> 128 with BatchNorm, its embedding 128 wide):
fi-adversarial's imagined decoder (VFLAIR's MLP 128 -> 600 -> 200 -> 100 -> 32 with LayerNorm, the fi-decoder
attack's) forward, backward to its input and parameters, and Adam step; MID's bottleneck at the sender (d -> 2ds ->
5ds -> d, s = 1; and its decoder_scale 1) forward and backward; NoPeek's dCor of (x_b, h_b) forward and backward;
embedding-dp's DP-SGD noise on every parameter of the bottom; the bottom's own forward and backward for scale.
"""

from __future__ import annotations

import argparse
import time

import torch
from torch import nn

from vflpriv.config.schema import RunConfig
from vflpriv.defenses.dcor import distance_correlation
from vflpriv.defenses.mid import Bottleneck
from vflpriv.models.decoders import MLPDecoder
from vflpriv.models.training import make_optimizer
from vflpriv.runner.execution import train
from vflpriv.runner.planning import plan


def _ms(fn, repeats: int) -> float:
    """CPU milliseconds per call of ``fn`` after a warm-up."""
    for _ in range(repeats // 10 + 1):
        fn()
    start = time.process_time()
    for _ in range(repeats):
        fn()
    return (time.process_time() - start) / repeats * 1e3


def _parts(batch: int, width: int, features: int, generator: torch.Generator) -> dict:
    z = torch.randn(batch, width, requires_grad=True, generator=generator)
    x = torch.rand(batch, features, generator=generator)
    decoder = MLPDecoder(width, (1, 8, 4))
    params = list(decoder.parameters())
    adam = make_optimizer(params, name="adam", lr=1e-3, weight_decay=0.0)

    def imagined_decoder():
        error = nn.functional.mse_loss(decoder(z).flatten(1), x)
        grads = torch.autograd.grad(error, [z, *params])
        for p, g in zip(params, grads[1:]):
            p.grad = g
        adam.step()

    def bottleneck(scale: int):
        net, noise = Bottleneck(width, scale=1, decoder_scale=scale, std_shift=0.5), torch.randn(batch, width)
        return lambda: _backward(net, z, noise)

    bottom = nn.Sequential(nn.Linear(features, width), nn.BatchNorm1d(width), nn.ReLU(),
                           nn.Linear(width, width), nn.BatchNorm1d(width), nn.ReLU())
    noise_params = list(bottom.parameters())

    def dp_noise():
        for p in noise_params:
            (torch.zeros_like(p) + 0.1 * torch.randn(p.shape, generator=generator)) / batch

    return {
        "fi-adversarial: imagined decoder fwd + bwd + Adam": imagined_decoder,
        "mid-sender: bottleneck fwd + bwd (decoder_scale 5)": bottleneck(5),
        "mid-sender: bottleneck fwd + bwd (decoder_scale 1)": bottleneck(1),
        "nopeek: dCor(x_b, h_b) fwd + bwd": lambda: distance_correlation(x, z).backward(),
        "embedding-dp: DP-SGD noise on the bottom's parameters": dp_noise,
        "(the passive bottom's own fwd + bwd)": lambda: bottom(x).sum().backward(),
    }


def _backward(net: Bottleneck, z: torch.Tensor, noise: torch.Tensor) -> None:
    out, kl = net(z, noise)
    (out.sum() + kl).backward()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=400)
    args = parser.parse_args()
    torch.set_num_threads(1)
    config = RunConfig.model_validate({"dataset": {"name": "digits"}, "method": {"name": "splitnn"},
                                       "attack": {"name": "fi-decoder"}})
    train(plan(config))  # warm-up
    steps = 0

    def undefended():
        nonlocal steps
        q = plan(config)
        start = time.process_time()
        done = train(q)
        steps = int(done.fed.channel.meter.total_messages("finetune")) // 2  # an embedding and a gradient per step
        return time.process_time() - start

    parts = _parts(64, 128, 32, torch.Generator().manual_seed(0))
    step = min(undefended() for _ in range(3)) / max(steps, 1) * 1e3
    print(f"digits, splitnn finetuning: {steps} steps, {step:.3f} ms of CPU per undefended step (training and test "
          "prediction over the steps; best of 3)")
    print("| part (per update) | ms | floor on the ratio |")
    print("|---|---|---|")
    for name, fn in parts.items():
        ms = _ms(fn, args.repeats)
        print(f"| {name} | {ms:.3f} | {1 + ms / step:.2f}x |")


if __name__ == "__main__":
    main()
