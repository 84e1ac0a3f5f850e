"""The correctness gate: outputs and gradients against the reference, before any timing.

A wrong kernel is an ``error`` naming what is wrong and by how much, never a speedup.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

import jax
import jax.numpy as jnp

from ci_bench.contract.spec import Tolerance
from ci_bench.schema import Correctness


@jax.jit
def _error_stats(out: jax.Array, ref: jax.Array, atol: float, rtol: float) -> tuple[jax.Array, ...]:
    out = out.astype(jnp.float32)
    ref = ref.astype(jnp.float32)
    diff = jnp.abs(out - ref)
    allowed = atol + rtol * jnp.abs(ref)
    mismatched = jnp.sum(~(diff <= allowed))  # NaN counts as a mismatch
    finite = jnp.all(jnp.isfinite(out))
    significant = jnp.abs(ref) > atol
    rel = jnp.where(significant, diff / jnp.where(significant, jnp.abs(ref), 1.0), 0.0)
    nan, inf = jnp.sum(jnp.isnan(out)), jnp.sum(jnp.isinf(out))
    ref_bad = jnp.sum(~jnp.isfinite(ref))
    return (
        mismatched,
        jnp.max(diff, initial=0.0),
        jnp.max(rel, initial=0.0),
        finite,
        nan,
        inf,
        ref_bad,
    )


def check_outputs(out: Any, ref: Any, tol: Tolerance) -> Correctness:
    """Elementwise ``|out - ref| <= atol + rtol * |ref|`` over every output leaf, in float32."""
    out_leaves, out_tree = jax.tree.flatten(out)
    ref_leaves, ref_tree = jax.tree.flatten(ref)
    if out_tree != ref_tree:
        raise ValueError(f"output structure {out_tree} differs from reference {ref_tree}")
    mismatched = elements = nans = infs = ref_bad = 0
    max_abs = max_rel = 0.0
    all_finite = True
    for o, r in zip(out_leaves, ref_leaves, strict=True):
        if o.shape != r.shape:
            raise ValueError(f"output shape {o.shape} differs from reference {r.shape}")
        bad, abs_err, rel_err, finite, nan, inf, rbad = _error_stats(o, r, tol.atol, tol.rtol)
        nans, infs, ref_bad = nans + int(nan), infs + int(inf), ref_bad + int(rbad)
        mismatched += int(bad)
        elements += int(o.size)
        max_abs = max(max_abs, float(abs_err))
        max_rel = max(max_rel, float(rel_err))
        all_finite = all_finite and bool(finite)
    return Correctness(
        ok=mismatched == 0,
        max_abs_err=max_abs if all_finite else None,
        max_rel_err=max_rel if all_finite else None,
        atol=tol.atol,
        rtol=tol.rtol,
        mismatched=mismatched,
        elements=elements,
        nan=nans,
        inf=infs,
        reference_nonfinite=ref_bad,
    )


@jax.jit
def _rms(leaves: list[jax.Array]) -> jax.Array:
    squares = sum(jnp.sum(jnp.square(x.astype(jnp.float32))) for x in leaves)
    return jnp.sqrt(squares / max(1, sum(x.size for x in leaves)))


def check_gradient(got: Any, ref: Any, tol: Tolerance) -> Correctness:
    """One input's gradient against the reference's, with ``atol`` in units of the
    reference gradient's RMS: the gradients of one call differ in scale by orders of
    magnitude (a matmul's dB grows with √M, its dA does not), so an absolute tolerance
    that fits one would be blind, or too strict, for the other. ``rtol`` is as for outputs."""
    leaves = jax.tree.leaves(ref)
    rms = float(_rms(leaves)) if leaves else 0.0
    scale = rms if rms > 0 and math.isfinite(rms) else 1.0
    checked = check_outputs(got, ref, Tolerance(atol=tol.atol * scale, rtol=tol.rtol))
    return checked.model_copy(update={"atol_scale": scale})


def _errors(c: Correctness) -> str:
    if c.max_abs_err is None or c.max_rel_err is None:
        return "errors not finite"
    return f"max abs err {c.max_abs_err:.3g}, max rel err {c.max_rel_err:.3g}"


def _nonfinite(c: Correctness, what: str) -> list[str]:
    named = [
        f"{n} of {c.elements} {what} are {kind}"
        for n, kind in ((c.nan, "NaN"), (c.inf, "Inf"))
        if n
    ]
    if c.reference_nonfinite:
        named.append(f"the reference has {c.reference_nonfinite} NaN/Inf values")
    return named


def incorrect(c: Correctness) -> str:
    """ "incorrect: 12 of 1024 outputs are NaN; ..." — non-finite values named first."""
    return "incorrect: " + "; ".join(
        [
            *_nonfinite(c, "outputs"),
            f"{c.mismatched} of {c.elements} elements outside "
            f"atol={c.atol} rtol={c.rtol} ({_errors(c)})",
        ]
    )


def incorrect_gradients(gradients: Mapping[str, Correctness]) -> str | None:
    """ "incorrect gradient for b: max abs err 3.1, ...; 96 of 16384 elements outside
    atol=0.02 rtol=0.02" for every wrong input, in input order; None when all are right."""
    wrong = [
        f"incorrect gradient for {name}: "
        + "; ".join(
            [
                _errors(c),
                *_nonfinite(c, "gradient elements"),
                f"{c.mismatched} of {c.elements} elements outside atol={c.atol:.3g} "
                f"rtol={c.rtol}"
                + (
                    f" (atol scaled by the reference gradient's RMS {c.atol_scale:.3g})"
                    if c.atol_scale not in (None, 1.0)
                    else ""
                ),
            ]
        )
        for name, c in gradients.items()
        if not c.ok
    ]
    return " | ".join(wrong) or None
