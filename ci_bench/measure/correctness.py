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


# The float32 floor in units of the platform's dot roundoff u. Rounding each operand to
# u gives each product a relative error of at most 2u, uniform, so a spread of about 0.8u;
# the errors of a sum of products add as a random walk, as the products themselves do, so
# an output element's error spreads about 0.8u x the output's RMS, and its maximum over
# 10^8 elements is about 6 spreads (under 5u). 8u leaves that margin again; emulated on
# this CPU (tests/test_precision_gate.py) the largest error was 3.3u over 1-8 M elements.
# A real bug (a wrong tile offset, an unmasked tail) misplaces whole values: errors of the
# order of the RMS, 30 times the floor on a TPU.
FLOOR_ROUNDOFFS = 8


def float32_floor(dtype: str, platform: str) -> float:
    """The smallest atol, in units of the reference's RMS, a ``dtype`` output is judged
    with on ``platform``: 16 x the unit roundoff of its float32 dots at DEFAULT precision
    (bfloat16 operands on a TPU, TF32 on a GPU), 0 where they are exact or the dtype is
    not float32. A SPEC's own tolerances apply above it."""
    from ci_bench.schema.platforms import platform_of

    roundoff = platform_of(platform).float32_dot_roundoff
    return FLOOR_ROUNDOFFS * roundoff if dtype == "float32" and roundoff else 0.0


def _scale(ref: Any) -> float:
    leaves = jax.tree.leaves(ref)
    rms = float(_rms(leaves)) if leaves else 0.0
    return rms if rms > 0 and math.isfinite(rms) else 1.0


def check_output(out: Any, ref: Any, tol: Tolerance, floor: float = 0.0) -> Correctness:
    """``check_outputs`` with ``atol`` raised to ``floor`` x the reference's RMS where that
    is larger (a float32 case on a platform whose dots round float32, ``float32_floor``);
    ``atol_scale`` then records the RMS."""
    if not floor:
        return check_outputs(out, ref, tol)
    scale = _scale(ref)
    if floor * scale <= tol.atol:
        return check_outputs(out, ref, tol)
    checked = check_outputs(out, ref, Tolerance(atol=floor * scale, rtol=tol.rtol))
    return checked.model_copy(update={"atol_scale": scale})


def check_gradient(got: Any, ref: Any, tol: Tolerance, floor: float = 0.0) -> Correctness:
    """One input's gradient against the reference's, with ``atol`` in units of the
    reference gradient's RMS: the gradients of one call differ in scale by orders of
    magnitude (a matmul's dB grows with √M, its dA does not), so an absolute tolerance
    that fits one would be blind, or too strict, for the other. ``rtol`` is as for outputs;
    ``floor`` (``float32_floor``) is the least atol, in the same units."""
    scale = _scale(ref)
    atol = max(tol.atol, floor)
    checked = check_outputs(got, ref, Tolerance(atol=atol * scale, rtol=tol.rtol))
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
    scaled = (
        f", atol the float32 floor: {FLOOR_ROUNDOFFS} dot roundoffs x the reference's RMS "
        f"{c.atol_scale:.3g}"
        if c.atol_scale is not None
        else ""
    )
    return "incorrect: " + "; ".join(
        [
            *_nonfinite(c, "outputs"),
            f"{c.mismatched} of {c.elements} elements outside "
            f"atol={c.atol:.3g} rtol={c.rtol} ({_errors(c)}{scaled})",
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
