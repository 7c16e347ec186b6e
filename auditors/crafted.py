"""Crafted canary inputs (``gradient-lrt``'s ``canary_inputs: crafted``): the rows a malicious passive party sends for
its canaries so that each canary's clipped gradient is as distinguishable across labels as dp-gaussian allows.

Why these rows. Under a Linear top z = W [h_1, ..., h_P] + b, every candidate label c gives the canary the joint
gradient v(c) = J^T (p - e_c), J the Jacobian of its logits z with respect to everything dp-gaussian clips (the top,
the active bottom, the received rows) and p = softmax(z). The top's weight block of the crafting party contributes
(p - e_c) h^T, of norm ||p - e_c|| ||h||: a row h of norm t >> C makes it dominate v(c) and reach the clipping bound C
(||p - e_c|| >= sqrt((K - 1) / K) for K classes), so every candidate is clipped to norm C exactly (the most any label
may move the release); and the rest of J, of norm O(1), is negligible, so the candidates' geometry is that of
p - e_c. Ten vectors of norm C are at best pairwise sqrt(2 + 2/9) C apart (the regular simplex), reached at p uniform:
the row is b_i + t n_i, b_i the least-norm row that makes the canary's logits equal (W_p b_i = -(b + the other parties'
W_k h_k)), n_i a unit vector of W_p's null space (so the large part leaves the logits unchanged), a different one for
each canary of the batch, so that the canaries' parameter parts are orthogonal and do not interfere in the summed update.

Pair canaries (``partition.canary_labels: pair``: the label is one of two public classes a, b). The rows then make the
logits equal on a and b and PAIR_GAP lower elsewhere, so p = (e_a + e_b) / 2 and p - e_a = -(p - e_b): the two
candidates' joint gradients are exactly antipodal (the Jacobian is linear in p - e_c), each clipped to C, 2C apart:
the full sensitivity dp-gaussian's accountant charges, where the ten-class simplex reaches 1.49C.
"""

from __future__ import annotations

import torch
from torch import nn

#: The crafted rows' norm in units of the clipping bound C: 100 C puts the canary's joint gradient at >= 70 C before
#: clipping (two classes: ||p - e_c|| = 1/sqrt(2) at p uniform), so the clipped candidates are C long and the O(1)
#: rest of its Jacobian is a 1e-4 share of their squared norm.
CRAFT_NORM = 100.0


#: Pair canaries: how far below the pair's logits the crafted rows put every other class: their softmax share is
#: e^-30 (about 1e-13), so p is (1/2, 1/2) on the pair to float precision and the two candidates are antipodal.
PAIR_GAP = 30.0


#: With explicit targets, the least-norm part's largest share of the null part's norm (1%: the canaries' parameter
#: parts, (p - e_c) h^T, then overlap by at most about 1e-4 of their squared norm through the shared row space).
LEAST_SHARE = 0.01


def pair_targets(pairs: torch.Tensor, classes: int) -> torch.Tensor:
    """Logits for canaries with candidate ``pairs`` (k x 2): 0 on both candidates, -:data:`PAIR_GAP` elsewhere."""
    targets = torch.full((pairs.shape[0], classes), -PAIR_GAP, device=pairs.device)
    return targets.scatter(1, pairs, 0.0)


@torch.no_grad()
def uniform_logit_rows(linear: nn.Linear, local: list[torch.Tensor], canaries: torch.Tensor, party: int, *,
                       norm: float, targets: torch.Tensor | None = None) -> torch.Tensor:
    """Party ``party``'s rows for the batch positions ``canaries`` (indices into ``local``'s rows): each makes its
    canary's logits under ``linear`` (over the parties' concatenated ``local`` embeddings) equal (or ``targets``, one
    row of logits per canary) and has a part of norm ``norm`` in the null space of ``party``'s weight block, one null
    direction per canary (cycled when there are fewer directions than canaries)."""
    widths = [h.shape[1] for h in local]
    start = sum(widths[:party])
    weight = linear.weight.detach()
    block = weight[:, start:start + widths[party]]
    others = linear.bias.detach() + sum(h[canaries] @ weight[:, sum(widths[:k]):sum(widths[:k + 1])].T
                                       for k, h in enumerate(local) if k != party)
    u, s, vh = torch.linalg.svd(block, full_matrices=True)
    rank = int((s > s.max() * max(block.shape) * torch.finfo(s.dtype).eps).sum())
    wanted = -others if targets is None else targets.to(others.dtype) - others
    least = (wanted @ u[:, :rank]) / s[:rank] @ vh[:rank]  # W_p least = wanted: the canary's logits are the targets
    null = vh[rank:]
    if null.shape[0] == 0:
        raise ValueError(f"party {party}'s {widths[party]} embedding units leave its weight block no null direction")
    directions = null[torch.arange(canaries.numel(), device=null.device) % null.shape[0]]
    if targets is None:
        return least + norm * directions
    # Targets far from equal logits make the least part large (about twice 100 C at the pair game's gap): the null
    # part is raised to LEAST_SHARE^-1 times it, so the canaries' parameter parts stay in their own null directions.
    return least + torch.clamp(least.norm(dim=1, keepdim=True) / LEAST_SHARE, min=norm) * directions
