"""MoCo negatives queue: FIFO ring buffer semantics."""

import torch
import torch.nn.functional as F

from vflpriv.models.ssl import MemoryQueue, info_nce


def _keys(start: int, n: int) -> torch.Tensor:
    """n keys with distinct directions, identifiable after normalisation."""
    return torch.stack([torch.tensor([float(i), 1.0]) for i in range(start, start + n)])


def _queue(size: int = 5, seed: int = 0) -> MemoryQueue:
    return MemoryQueue(2, size=size, generator=torch.Generator().manual_seed(seed))


def test_initial_buffer_is_unit_norm_and_seeded() -> None:
    q = _queue()
    assert q.negatives().shape == (5, 2)
    assert torch.allclose(q.negatives().norm(dim=1), torch.ones(5))
    assert torch.equal(q.negatives(), _queue().negatives())
    assert not torch.equal(q.negatives(), _queue(seed=1).negatives())


def test_fifo_order_and_wrap_around() -> None:
    q = _queue()
    initial = q.negatives().clone()
    q.enqueue(_keys(0, 3))
    buf = q.negatives()
    assert torch.allclose(buf[:3], F.normalize(_keys(0, 3), dim=1))
    assert torch.equal(buf[3:], initial[3:])
    q.enqueue(_keys(3, 4))  # 2 fill the end, 2 wrap over the oldest keys 0 and 1
    expected = F.normalize(torch.cat([_keys(5, 2), _keys(2, 1), _keys(3, 2)]), dim=1)
    assert torch.allclose(q.negatives(), expected)


def test_batch_larger_than_queue_keeps_the_newest() -> None:
    q = _queue()
    q.enqueue(_keys(0, 2))
    q.enqueue(_keys(10, 7))  # keys 12..16 kept, written in ring order from position 2
    expected = F.normalize(torch.cat([_keys(15, 2), _keys(12, 3)]), dim=1)
    assert torch.allclose(q.negatives(), expected)
    q.enqueue(_keys(20, 1))  # next write overwrites the oldest, key 12
    assert torch.allclose(q.negatives()[2], F.normalize(_keys(20, 1), dim=1)[0])


def test_negatives_returns_the_live_buffer() -> None:
    q = _queue()
    view = q.negatives()
    assert view.data_ptr() == q.negatives().data_ptr()
    q.enqueue(_keys(0, 1))
    assert torch.allclose(view[0], F.normalize(_keys(0, 1), dim=1)[0])


def test_moco_step_enqueue_after_backward() -> None:
    """The documented order: loss on the live buffer, backward, then enqueue the keys."""
    q = _queue(size=8)
    query = torch.randn(3, 2, generator=torch.Generator().manual_seed(1)).requires_grad_()
    keys = torch.randn(3, 2, generator=torch.Generator().manual_seed(2))
    info_nce(query, keys, temperature=0.2, negatives=q.negatives()).backward()
    q.enqueue(keys)
    assert query.grad is not None and query.grad.abs().sum() > 0
    assert torch.allclose(q.negatives()[:3], F.normalize(keys, dim=1))


def test_the_queue_draws_on_its_generator_s_device_and_lives_on_the_run_s():
    """The keys are drawn by the CPU stream (the same on every machine) and kept on the run's device: a queue left on
    the CPU failed MoCo's first step on CUDA (its negatives against CUDA queries)."""
    from vflpriv.models.ssl.queue import MemoryQueue

    kept = MemoryQueue(8, size=16, generator=torch.Generator().manual_seed(0), device="meta")
    here = MemoryQueue(8, size=16, generator=torch.Generator().manual_seed(0))
    assert kept.negatives().device.type == "meta" and here.negatives().device.type == "cpu"
