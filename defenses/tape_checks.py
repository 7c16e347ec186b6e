"""embedding-dp's check that the tape's records are each sample's own (issue 47): the tape's update reads, at every
trainable layer, each row's recorded input a_i and output gradient g_i, so a hook that mixes rows into either (a
pre-hook centring a layer's input, a backward scaled by a statistic of the forward batch, a hook writing its layer's
input in place after the call) changes sample i's part of the update while the rows sent, and their gradients, can
look the samples' own at the checked update. Here the tape's forward and backward run on the batch and on the
:func:`row_checks.probes` (the received rows copied like the features), and each kept row's records must equal the
batch's."""

from __future__ import annotations

import torch
from torch import nn

from vflpriv.defenses.gaussian_message import clip_rows
from vflpriv.defenses.per_sample import GhostTape
from vflpriv.defenses.row_checks import (OWN_ULPS, alike, as_parameter, check_forwards, first_off, kept_mask,
                                         probe_batches, probes, reseed)


def record_mixing(bottom: nn.Module, x: torch.Tensor, received: torch.Tensor, *, clip: float, seed: int) -> str | None:
    """Why ``bottom``'s outputs or the tape's per-sample records (each trainable layer's input rows and output
    gradient rows, for the objective sum_i <clip_rows(h)_i, received_i>) on a kept row of a probe differ from the
    batch's by more than :data:`row_checks.OWN_ULPS` of their dtype times the row's largest entry (plus 1e-6 of that
    of the batch's largest), or ''; None where the tape cannot record the batch (the caller checks the outputs as
    trained by ``row_checks.forward_mixing``). Each of the 1 + m forwards and backwards runs as the
    training runs it (own dtype, gradients on), from fresh copies of the parameters and buffers and the random stream
    seeded alike (RReLU in eval), the bottom's state and the global random state as before; no parameter gradient is
    formed. The buffers' values after each backward must agree too (a hook's write there; the forwards' own writes
    are ``forward_mixing``'s)."""
    n = x.shape[0]
    if n < 2:
        return ""
    kept = probes(n, seed=seed, device=x.device)
    batches = zip([x, *probe_batches(x, kept)], [received, *probe_batches(received, kept, chosen_by=x)])
    devices = [x.device.index or 0] if x.is_cuda else []
    tape, records, written = GhostTape(bottom), [], []
    with check_forwards(bottom, devices), torch.enable_grad():
        for xb, rb in batches:
            state = {**{k: as_parameter(p.detach().clone(), p.requires_grad) for k, p in bottom.named_parameters()},
                     **{k: b.clone() for k, b in bottom.named_buffers()}}  # a forward's in-place write: on copies
            reseed(devices)
            with tape:
                h = torch.func.functional_call(bottom, state, (xb.clone(),))
            got = tape.recorded((clip_rows(h, clip=clip) * rb).flatten(1).sum(1), n=n)
            if got is None:
                return None if not records else f"the tape's records of a probe batch are not the batch's ({tape.why})"
            records.append([(f"the bottom {type(bottom).__qualname__}'s output", h.detach(), None), *got])
            written.append({k: state[k] for k, _ in bottom.named_buffers()})  # after the backward: a hook's writes
    return _differ(records, kept_mask(kept, n)) or _written(written)


def _written(buffers: list[dict]) -> str:
    """Why a buffer's value after a probe's backward is not its value after the batch's (a hook writing a statistic
    of the batch into it in the backward: the next forward reads the features), or ''."""
    for k, ref in buffers[0].items():
        tolerance = OWN_ULPS * torch.finfo(ref.dtype).eps if ref.is_floating_point() else 0.0
        if not all(alike(ref, [b[k] for b in buffers[1:]], tolerance)):
            return (f"the buffer '{k}' holds other values after a probe batch's backward than after the batch's (a "
                    "statistic of the batch written in the backward carries its features into later forwards)")
    return ""


def _differ(records: list, mask: torch.Tensor) -> str:
    """Why a kept row's output or record in a probe (``records[1:]``) is not the batch's (``records[0]``), or ''."""
    for k, (name, a, g) in enumerate(records[0]):
        for what, ref, index in (("input", a, 1), ("output gradient", g, 2)):
            probed = [r[k][index] for r in records[1:]]
            if any((p is None) != (ref is None) for p in probed):
                return f"the {what} recorded at {name} reaches the rows in one batch and not in another"
            if ref is None:
                continue
            row = first_off(ref, probed, mask, OWN_ULPS * torch.finfo(ref.dtype).eps)
            if row is not None:
                where = name if k == 0 else f"the {what} recorded at {name}"
                return (f"{where} mixes the batch's rows: row {row}'s changed when other rows were replaced (a hook "
                        "mixing the rows into what the tape's update reads)")
    return ""
