"""A method vflpriv must refuse: split learning whose passive party backpropagates the gradient the active party
computed instead of the payload ``fed.channel.send`` returned.

Every message goes through the channel and is declared, so an attack reading the adversary's inbox sees a
gradient, and a defense transforms it; but the passive party trains on ``received[k].grad``, a tensor of the
active party's, so every gradient defense is silently off (the model the attacks complete was trained on clean
gradients while the gradient attacks read noised ones). ``vflpriv audit --check-only`` refuses it: with every
payload zeroed, changing the active party's labels still changes the passive party's trained model.
"""

from __future__ import annotations

from torch import nn

from vflpriv.engine import ACTIVE, EMBEDDING, FINETUNE, GRADIENT, Federation, Message
from vflpriv.methods import Method, Trained, new_top
from vflpriv.models import build_encoder
from vflpriv.models.training import index_batches, make_optimizer


class GradientBypass(Method):
    """Split learning whose passive party trains on the active party's clean gradient, not the channel's (refused)."""

    def finetune(self, fed: Federation, pretrained) -> Trained:
        bottoms = [build_encoder(p.spec, fed.model, generator=fed.generator).to(fed.device) for p in fed.parties]
        top = new_top(fed, bottoms)
        opt = make_optimizer([q for m in (*bottoms, top) for q in m.parameters()], name="adam", lr=1e-3, weight_decay=0)
        for epoch in range(fed.finetune.epochs):
            for batch in index_batches(fed.labeled_aligned(), batch_size=fed.finetune.batch_size, generator=fed.generator):
                local = [b(p.x_train[batch]) for b, p in zip(bottoms, fed.parties)]
                received = [local[ACTIVE]] + [
                    fed.channel.send(Message(EMBEDDING, FINETUNE, p.index, ACTIVE, local[p.index], batch, epoch))
                    .requires_grad_() for p in fed.passive]
                loss = nn.functional.cross_entropy(top(received), fed.active.labels[batch])
                opt.zero_grad()
                loss.backward()
                for p in fed.passive:
                    fed.channel.send(Message(GRADIENT, FINETUNE, ACTIVE, p.index, received[p.index].grad, batch, epoch))
                    (local[p.index] * received[p.index].grad).sum().backward()  # the bug: not the payload send returned
                opt.step()
        return Trained(bottoms, top)
