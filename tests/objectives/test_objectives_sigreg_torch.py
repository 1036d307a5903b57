"""The torch SIGReg without the (N, M, K) phase array (docs/theory.md §7): value and gradient equal to
the array-API :func:`sigreg` under torch autograd, the reduce hook, precision, and what autograd stores."""

from __future__ import annotations

import numpy as np
import pytest

from support import assert_close
from prhsim.objectives import draw_directions, epps_pulley, sigreg

torch = pytest.importorskip("torch")

from prhsim.objectives import _sigreg_torch as _sigreg_torch
from prhsim.objectives._sigreg_torch import epps_pulley_torch, sigreg_torch  # noqa: E402

N, D, M = 64, 8, 16


def batch(*shape: int, seed: int = 0, dtype=torch.float64) -> torch.Tensor:
    """A non-Gaussian batch (shifted, scaled, skewed), so that every term of T is non-trivial."""
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(*shape, generator=g, dtype=torch.float64)
    return (1.3 * x + 0.25 * x**2 - 0.1).to(dtype)


def value_and_grads(fn, E: torch.Tensor, A: torch.Tensor, **kwargs):
    E = E.detach().clone().requires_grad_()
    A = A.detach().clone().requires_grad_()
    value = fn(E, A, **kwargs)
    value.backward()
    return value.detach(), E.grad, A.grad


def assert_same_as_reference(E: torch.Tensor, A: torch.Tensor, rtol: float = 1e-10, **kwargs) -> None:
    ref, ref_gE, ref_gA = value_and_grads(sigreg, E, A, **kwargs)
    val, gE, gA = value_and_grads(sigreg_torch, E, A, **kwargs)
    assert val.dtype == ref.dtype
    assert_close(val.item(), ref.item(), atol=0, rtol=rtol)
    assert_close(gE, ref_gE, atol=rtol * ref_gE.abs().max().item(), rtol=0)
    assert_close(gA, ref_gA, atol=rtol * ref_gA.abs().max().item(), rtol=0)


@pytest.mark.parametrize("shape", [(N, D), (3, N, D), (2, 2, N // 2, D)])
def test_value_and_gradients_equal_the_array_api_sigreg_in_float64(shape) -> None:
    A = torch.as_tensor(draw_directions(D, M, seed=1))
    assert_same_as_reference(batch(*shape), A)


def test_n_total_and_other_quadratures() -> None:
    E, A = batch(N, D, seed=2), torch.as_tensor(draw_directions(D, M, seed=2))
    assert_same_as_reference(E, A, n_total=1000)
    assert_same_as_reference(E, A, knots=5, t_max=2.0)
    assert_same_as_reference(E, A, knots=2, t_max=1.0)
    assert_same_as_reference(E, A, knots=33, t_max=4.0)


def test_collapse_and_gaussian_reference_values() -> None:
    A = draw_directions(D, M, seed=3)
    assert_close(sigreg_torch(torch.zeros(100, D, dtype=torch.float64), A).item(),
                 float(sigreg(np.zeros((100, D)), A)), atol=0, rtol=1e-13)
    value = sigreg_torch(torch.randn(1024, 16, dtype=torch.float64, generator=torch.Generator().manual_seed(3)),
                         draw_directions(16, 256, seed=3))
    assert 0.5 < value.item() < 2.0  # E[T] ≈ 1.05 for N(0, I)


def test_blocks_of_the_cpu_recurrence_do_not_change_anything(monkeypatch) -> None:
    """Many blocks with a ragged last one, and one block of a single row."""
    E, A = batch(2, N, D, seed=4), torch.as_tensor(draw_directions(D, M, seed=4))
    for elements in (5 * N, 1):
        monkeypatch.setattr(_sigreg_torch, "BLOCK_ELEMENTS", elements)
        assert_same_as_reference(E, A)


def test_epps_pulley_torch_equals_epps_pulley_per_direction() -> None:
    x = batch(3, N, M, seed=5).requires_grad_()
    x_ref = x.detach().clone().requires_grad_()
    reduce = lambda cs: 0.5 * cs + 0.25  # noqa: E731 - any differentiable map of (C, S)
    ours, ref = epps_pulley_torch(x, n_total=77, reduce=reduce), epps_pulley(x_ref, n_total=77, reduce=reduce)
    assert ours.shape == ref.shape == (3, M)
    assert_close(ours.detach(), ref.detach(), atol=0, rtol=1e-12)
    weights = torch.linspace(0.5, 1.5, 3 * M, dtype=torch.float64).reshape(3, M)
    (ours * weights).sum().backward()
    (ref * weights).sum().backward()
    assert_close(x.grad, x_ref.grad, atol=1e-12 * x_ref.grad.abs().max().item(), rtol=0)


def test_reduce_over_two_halves_gives_the_full_batch_value_and_the_shares_sum_to_its_gradient() -> None:
    """The test double of a distributed mean: each half sees the other's (C, S) as a constant.

    With a reduce that differentiates as the mean, each half's gradient is its
    share of the full-batch gradient, so the two sum to it. With the
    straight-through reduce (value of the mean, gradient of the identity), each
    half gets world_size × its share: what data-parallel averaging expects.
    """
    E, A = batch(N, D, seed=6), torch.as_tensor(draw_directions(D, M, seed=6)).requires_grad_()
    full, full_gE, full_gA = value_and_grads(sigreg, E, A)
    halves = E[: N // 2], E[N // 2 :]
    seen = []  # each half's (C, S), as another process would send it

    def keep(cs):
        seen.append(cs.detach())
        return cs

    for h in halves:
        sigreg_torch(h, A, reduce=keep)

    def run(make_reduce):
        Eg, Ag = E.detach().clone().requires_grad_(), A.detach().clone().requires_grad_()
        values = [sigreg_torch(Eg[i * N // 2 : (i + 1) * N // 2], Ag, n_total=N, reduce=make_reduce(seen[1 - i]))
                  for i in range(2)]
        sum(values).backward()
        return values, Eg.grad, Ag.grad

    values, gE, gA = run(lambda other: lambda cs: (cs + other) / 2)
    for v in values:
        assert_close(v.item(), full.item(), atol=0, rtol=1e-12)
    assert_close(gE, full_gE, atol=1e-12 * full_gE.abs().max().item(), rtol=0)
    assert_close(gA, full_gA, atol=1e-12 * full_gA.abs().max().item(), rtol=0)
    # the same reduce through the array-API sigreg: the same per-half gradients
    Er = E.detach().clone().requires_grad_()
    sum(sigreg(Er[i * N // 2 : (i + 1) * N // 2], A.detach(), n_total=N, reduce=lambda cs, i=i: (cs + seen[1 - i]) / 2)
        for i in range(2)).backward()
    assert_close(gE, Er.grad, atol=1e-12 * Er.grad.abs().max().item(), rtol=0)

    values, gE, gA = run(lambda other: lambda cs: cs + ((cs + other) / 2 - cs).detach())
    assert_close(values[0].item(), full.item(), atol=0, rtol=1e-12)
    assert_close(gE, 2 * full_gE, atol=1e-12 * full_gE.abs().max().item(), rtol=0)
    assert_close(gA, 2 * full_gA, atol=1e-12 * full_gA.abs().max().item(), rtol=0)


def test_gradcheck() -> None:
    E = batch(6, 3, seed=7).requires_grad_()
    A = torch.as_tensor(draw_directions(3, 4, seed=7)).requires_grad_()
    assert torch.autograd.gradcheck(lambda e, a: sigreg_torch(e, a, n_total=9), (E, A))
    assert torch.autograd.gradcheck(lambda e, a: sigreg_torch(e, a, knots=4, t_max=2.5), (E.reshape(2, 3, 3), A))


def test_float32_error_is_small_against_float64() -> None:
    """float32 value and gradient within 1e-4 relative of float64 (measured: ~1e-6 and ~1e-5)."""
    E64, A64 = batch(512, 16, seed=8), torch.as_tensor(draw_directions(16, 64, seed=8))
    ref, ref_gE, ref_gA = value_and_grads(sigreg, E64, A64)
    val, gE, gA = value_and_grads(sigreg_torch, E64.float(), A64.float())
    assert val.dtype == gE.dtype == gA.dtype == torch.float32
    assert abs(val.item() - ref.item()) / abs(ref.item()) < 1e-4
    assert (gE.double() - ref_gE).abs().max() / ref_gE.abs().max() < 1e-4
    assert (gA.double() - ref_gA).abs().max() / ref_gA.abs().max() < 1e-4


def test_16_bit_inputs_are_computed_in_float32() -> None:
    E = batch(40, 4, seed=9, dtype=torch.float32).to(torch.bfloat16).requires_grad_()
    A = draw_directions(4, 8, seed=9)
    value = sigreg_torch(E, A)
    assert value.dtype == torch.float32
    assert value.item() == sigreg_torch(E.detach().float(), A).item()
    value.backward()
    assert E.grad.dtype == torch.bfloat16
    assert abs(value.item() - float(sigreg(E.detach().double().numpy(), A))) < 1e-4 * value.item()
    half = sigreg_torch(E.detach().to(torch.float16), A)
    assert half.dtype == torch.float32


def test_nothing_of_size_n_m_k_is_kept_for_backward() -> None:
    """Every tensor autograd saves is at most of the projections' size N·M (the reference saves N·M·K)."""
    E = batch(N, D, seed=10).requires_grad_()
    A = torch.as_tensor(draw_directions(D, M, seed=10)).requires_grad_()

    def largest_saved(fn) -> int:
        sizes = []

        def pack(t):
            sizes.append(t.numel())
            return t

        with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
            fn(E, A).backward()
        return max(sizes)

    assert largest_saved(sigreg_torch) <= N * M
    assert largest_saved(sigreg) >= N * M * 17


def test_errors_name_the_problem() -> None:
    with pytest.raises(ValueError, match="directions must have shape"):
        sigreg_torch(torch.zeros(4, 3), np.ones((2, 5)))
    with pytest.raises(ValueError, match="embeddings must have shape"):
        sigreg_torch(torch.zeros(4), np.ones((4, 5)))
    with pytest.raises(ValueError, match="projections must have shape"):
        epps_pulley_torch(torch.zeros(4))
    with pytest.raises(TypeError, match="real floating"):
        sigreg_torch(torch.zeros(4, 2, dtype=torch.int64), np.ones((2, 5)))
    with pytest.raises(ValueError, match="knots"):
        sigreg_torch(torch.zeros(4, 2), np.ones((2, 5)), knots=1)


def test_lejepa_loss_through_sigreg_torch_is_lejepa_loss():
    """The objective's ``regulariser`` hook: sigreg_torch in place of sigreg gives the same value and gradients."""
    from prhsim.objectives import lejepa_loss

    E, A = batch(8, 64, 6, seed=4), torch.as_tensor(draw_directions(6, 32, seed=1))

    def with_torch(E, A, **kw):
        return lejepa_loss(E, A, n_global=2, dims="mean", regulariser=sigreg_torch, **kw)

    def plain(E, A, **kw):
        return lejepa_loss(E, A, n_global=2, dims="mean", **kw)

    val, gE, gA = value_and_grads(with_torch, E, A, n_total=128)
    ref, ref_gE, ref_gA = value_and_grads(plain, E, A, n_total=128)
    assert_close(val.item(), ref.item(), atol=0, rtol=1e-10)
    assert_close(gE, ref_gE, atol=1e-10 * ref_gE.abs().max().item(), rtol=0)
    assert_close(gA, ref_gA, atol=1e-10 * ref_gA.abs().max().item(), rtol=0)


def test_pooled_views_through_the_lejepa_loss_give_the_array_api_value_with_either_regulariser() -> None:
    """lejepa_loss(sigreg_views="pooled") pools the views before its regulariser: sigreg_torch (as real train runs
    it, with the global N per view) gives the array-API sigreg's value and gradient, and the pooled value is not the
    per-view mean on views of different laws."""
    from prhsim.objectives import lejepa_loss

    e = torch.stack([batch(N, D, seed=s) + 0.5 * s for s in range(4)])
    A = torch.as_tensor(draw_directions(D, M, seed=3))
    for kwargs in ({}, {"n_total": 2 * N}):
        ref = value_and_grads(lambda E, A: lejepa_loss(E, A, sigreg_views="pooled", **kwargs), e, A)
        got = value_and_grads(lambda E, A: lejepa_loss(E, A, sigreg_views="pooled", regulariser=sigreg_torch,
                                                        **kwargs), e, A)
        assert_close(got[0].item(), ref[0].item(), atol=0, rtol=1e-10)
        assert_close(got[1], ref[1], atol=1e-10 * ref[1].abs().max().item(), rtol=0)
    per_view = lejepa_loss(e, A).item()
    assert abs(lejepa_loss(e, A, sigreg_views="pooled").item() - per_view) > 1e-3
    with pytest.raises(ValueError, match=r"^views must be one of per_view, pooled, got 'pool'$"):
        lejepa_loss(e, A, sigreg_views="pool")
