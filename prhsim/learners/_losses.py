"""The training losses of the SGD learners, written once against the array API (docs/theory.md §1.1, §1.5, §7).

:func:`make_loss` composes an objective's record (:data:`prhsim.learners._objectives.OBJECTIVES`: what each
objective computes, on the exact law and on a minibatch) with an encoder's forward pass ``apply`` into
``loss(params, step, shared) -> scalar``; the JAX learner and the torch loop call the very same function on their
own arrays. On exact data the embeddings of every state are scored under the law of
:mod:`prhsim.learners._exact_law` (no sampling noise); on minibatches those of the step's B sampled pairs (from a
table of every state's inputs, or rendered with the step).
"""

from __future__ import annotations

from typing import Any, Callable, Literal

from array_api_compat import array_namespace

from prhsim.objectives import Convention, Dims
from prhsim.learners._objectives import LossContext, objective_record

#: An SGD objective: a name of :data:`prhsim.learners._objectives.OBJECTIVES`.
SGDObjective = str
Data = Literal["exact", "minibatch"]


def covariance_precondition(centred: bool) -> Callable[[Any, Any, Any], Any]:
    """``precondition(grads, params, shared)`` for a table on the exact whitened loss (docs/theory.md §1.5).

    The gradient of ``2 tr(C⁻¹(C − A))`` in the table F is ``∇ = −4(J X C⁻¹ − P X C⁻¹AC⁻¹)``
    (X = F − 1pᵀF when centred); the preconditioned gradient ``¼ P⁻¹ ∇ C = −(TX − X C⁻¹A)``
    (T = P⁻¹J) is minus the eigen-residual, so a step of size 1 is one step of subspace
    iteration and heavy-ball momentum accelerates it. States with p = 0 get no step.
    """

    def precondition(grads: Any, params: Any, shared: Any) -> Any:
        F = params["table"]
        xp = array_namespace(F)
        p = shared["p"]
        X = F - p @ F if centred else F
        C = xp.matrix_transpose(X) @ (p[:, None] * X)
        inv_p = xp.where(p > 0, 1.0 / xp.where(p > 0, p, 1.0), 0.0)
        return {"table": 0.25 * (inv_p[:, None] * grads["table"]) @ C}

    return precondition


def make_loss(objective: SGDObjective, data: Data, *, centred: bool, convention: Convention,
              apply: Callable[[Any, Any], Any], factor_shape: tuple[int, ...] | None = None,
              dims: Dims = "sum", rendered: bool = False) -> Callable[[Any, Any, Any], Any]:
    """``loss(params, step, shared) -> scalar`` for one seed (see the module docstring).

    ``shared`` holds the inputs of every state ("inputs"), λ ("lam") and, in exact mode,
    the law p ("p"), the nominal batch size ("nominal_n") and π
    (:func:`prhsim.learners._exact_law.exact_tables`; for a factor law, its shape is ``factor_shape``, static
    under jit); ``step`` holds the step's sampled states ("z", "z2") in minibatch mode and, for an objective
    whose steps carry them, its SIGReg directions ("dirs"). ``dims`` is SIGReg's invariance convention ("mean"
    divides the squared norm by k, as LeJEPA's code does). ``rendered``: the minibatch's inputs come with the
    step ("x", "x2": the observations of "z" and "z2"), not from a table of every state.
    """
    if data not in ("exact", "minibatch") or dims not in ("sum", "mean"):
        raise ValueError(f"unknown data mode or dims: {data!r}, {dims!r}")
    record = objective_record(objective)
    ctx = LossContext(centred=centred, convention=convention, dims=dims, factor_shape=factor_shape)

    def exact(params: Any, step: Any, shared: Any) -> Any:
        return record.exact(apply(params, shared["inputs"]), shared, step, ctx)  # (n, k): every state

    def minibatch(params: Any, step: Any, shared: Any) -> Any:
        if rendered:
            a, b = apply(params, step["x"]), apply(params, step["x2"])
        else:
            inputs = shared["inputs"]
            a, b = apply(params, inputs[step["z"]]), apply(params, inputs[step["z2"]])
        return record.minibatch(a, b, step, shared, ctx)

    return exact if data == "exact" else minibatch
