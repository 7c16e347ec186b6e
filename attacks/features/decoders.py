"""Networks that map what an adversary holds to a victim's features, and how they are fitted.

The networks (:class:`MLPDecoder`, VFLAIR's TBM decoder; :class:`ConvDecoder`, ResSFL-style) live in
``vflpriv.models.decoders``, shared with the victim's imagined decoder of ``fi-adversarial``. ``decoder="auto"`` picks the conv decoder for images of at least 16 px a side (where vflpriv's encoder is a CNN too),
the MLP otherwise (the 8 x 4 digit halves, tabular data). :func:`fit_regression` is the anchors' recipe: Adam, MSE,
shuffled minibatches, every epoch (VFLAIR: lr 1e-3, 50 epochs, batch 32).
"""

from __future__ import annotations

import torch
from torch import nn

from vflpriv.models.decoders import ConvDecoder, MLPDecoder, build_decoder, conv_victim
from vflpriv.models.training import index_batches, make_optimizer, require_finite

__all__ = ["ConvDecoder", "MLPDecoder", "build_decoder", "conv_victim", "fit_regression"]


def fit_regression(net: nn.Module, x: torch.Tensor, y: torch.Tensor, *, epochs: int, lr: float, batch_size: int,
                   generator: torch.Generator, what: str) -> nn.Module:
    """Train ``net`` to map ``x`` to ``y`` by MSE with Adam (no weight decay), shuffled minibatches; a non-finite loss
    fails the attack (:class:`DivergedError` naming ``what``). A network with an ``mse_gradients(x, y)`` method
    (the loss and its parameters' gradients, bit for bit autograd's: :class:`MLPDecoder`'s) is stepped on those."""
    params = list(net.parameters())
    opt = make_optimizer(params, name="adam", lr=lr, weight_decay=0.0)
    direct = getattr(net, "mse_gradients", None)
    ids = torch.arange(x.shape[0], device=x.device)
    finite = torch.ones((), dtype=torch.bool, device=x.device)
    net.train()
    for _ in range(epochs):
        for batch in index_batches(ids, batch_size=batch_size, generator=generator):
            if direct is not None:
                loss, grads = direct(x[batch], y[batch])
                for p, g in zip(params, grads):
                    p.grad = g
            else:
                loss = nn.functional.mse_loss(net(x[batch]), y[batch])
                opt.zero_grad(set_to_none=True)
                loss.backward()
            finite &= torch.isfinite(loss)
            opt.step()
    net.eval()
    require_finite(finite, f"the {what}'s training loss")
    return net
