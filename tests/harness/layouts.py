"""Kernel libraries laid out as real ones are, for the A/B's isolation tests (issue 37).

A library keeps its Pallas kernels in its own package and its SPECs elsewhere; a pull
request that changes only the kernel must be measured against the merge base's kernel, not
against itself. Each layout writes the same kernel (``y = 2·x + 1`` in row blocks) and SPEC:

- ``package``: SPEC in ``bench/`` (a namespace package), kernel in ``mylib/kernels/``;
- ``src``: the kernel under ``src/mylib`` (on ``PYTHONPATH``, as a CI step would set it);
- ``pyfile``: the SPEC named by its ``.py`` path, the kernel a module beside it;
- ``lazy``: the SPEC's ``pallas`` imports the kernel inside the function, at call time;
- ``cached``: the kernel module keeps built ``pallas_call``s in a module-level dict.

``slower(repo)`` commits what the issue's pull request does: rows per block / 4, so four
times the grid steps (and, interpreted on a CPU, a few times the time).
"""

from __future__ import annotations

import subprocess
import textwrap
from pathlib import Path

LAYOUTS = ("package", "src", "pyfile", "lazy", "cached")
ROWS = 128  # rows per block at the merge base; the pull request's kernel takes ROWS // 4

KERNEL = '''\
"""``y = 2·x + 1`` in blocks of ROWS rows (a TPU-shaped Pallas kernel, interpretable)."""

import functools

import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl

ROWS = {rows}
_BUILT = {{}}  # module-level cache of built calls (the "cached" layout reads it)


def _body(x_ref, o_ref):  # refs: [ROWS, 128]
    o_ref[...] = x_ref[...] * 2 + 1


def _call(x, *, interpret):
    spec = pl.BlockSpec((ROWS, 128), lambda i, j: (i, j))
    return pl.pallas_call(
        _body,
        out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype),
        grid=(x.shape[0] // ROWS, x.shape[1] // 128),
        in_specs=[spec],
        out_specs=spec,
        interpret=interpret,
    )(x)


@jax.jit
def scale(x):
    return jax.lax.platform_dependent(
        x,
        cpu=functools.partial(_call, interpret=True),
        default=functools.partial(_call, interpret=False),
    )


def cached_scale(x):
    fn = _BUILT.get(x.shape)
    if fn is None:
        fn = _BUILT[x.shape] = jax.jit(scale)
    return fn(x)
'''

SPEC = """\
import jax
import jax.numpy as jnp

from ci_bench.spec import Case, KernelSpec, MatrixProfile, Tolerance
{imports}


def make_inputs(case: Case, key):
    return (jax.random.normal(key, (case["M"], case["N"]), jnp.float32),)


_CASES = MatrixProfile(({{"M": 512, "N": 256}},), ("float32",))
SPEC = KernelSpec(
    name="{name}",
    version="0.1.0",
    pallas={pallas},
    native=lambda x: x * 2 + 1,
    reference=lambda x: x * 2 + 1,
    make_inputs=make_inputs,
    flops=lambda case: 2 * case["M"] * case["N"],
    bytes_accessed=lambda case: 2 * 4 * case["M"] * case["N"],
    tolerances={{"float32": Tolerance(atol=1e-6, rtol=1e-6)}},
    matrix={{"smoke": _CASES, "ci": _CASES, "full": _CASES}},
    shape_keys=("M", "N"),
    compute_unit="vector",
)
"""

LAZY = """

def pallas(x):
    from mylib.kernels.scale import scale  # imported at call time, each call

    return scale(x)
"""


def kernel_path(layout: str) -> str:
    return {
        "package": "mylib/kernels/scale.py",
        "src": "src/mylib/kernels/scale.py",
        "pyfile": "bench/scale_kernel.py",
        "lazy": "mylib/kernels/scale.py",
        "cached": "mylib/kernels/scale.py",
    }[layout]


def _spec(layout: str, name: str) -> tuple[str, str, str]:
    """(the SPEC's path, its text, the config's entry for it)."""
    imports, pallas = "from mylib.kernels.scale import scale", "scale"
    if layout == "pyfile":
        imports = "from scale_kernel import scale"  # the module beside the SPEC file
    if layout == "lazy":
        imports, pallas = LAZY, "pallas"
    if layout == "cached":
        imports, pallas = "from mylib.kernels.scale import cached_scale", "cached_scale"
    text = SPEC.format(imports=imports, name=name, pallas=pallas)
    if layout == "pyfile":
        return "bench/scale_spec.py", text, "bench/scale_spec.py"
    return "bench/scale_spec.py", text, "bench.scale_spec"


def git(repo: Path, *args: str) -> str:
    done = subprocess.run(["git", *args], cwd=repo, capture_output=True, text=True, check=True)
    return done.stdout.strip()


def write_layout(repo: Path, layout: str, *, extra_config: str = "") -> Path:
    """A git repository on ``main`` holding the library in ``layout``: one commit."""
    repo.mkdir(parents=True, exist_ok=True)
    files = {kernel_path(layout): KERNEL.format(rows=ROWS)}
    if layout != "pyfile":
        top = "src/mylib" if layout == "src" else "mylib"
        files[f"{top}/__init__.py"] = ""
        files[f"{top}/kernels/__init__.py"] = ""
    path, text, entry = _spec(layout, "scale")
    files[path] = text
    files["pyproject.toml"] = (
        textwrap.dedent(
            f"""\
        [tool.ci-bench]
        kernels = ["{entry}"]
        warmup = 1
        repeats = 12
        ab-repeats = 30
        target-chips = ["v5e"]
        """
        )
        + extra_config
    )
    for name, content in files.items():
        (repo / name).parent.mkdir(parents=True, exist_ok=True)
        (repo / name).write_text(content)
    git(repo, "init", "-q", "-b", "main")
    git(repo, "config", "user.email", "t@example.com")
    git(repo, "config", "user.name", "t")
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "a kernel library")
    return repo


def slower(repo: Path, layout: str, branch: str = "feature") -> str:
    """The pull request: the kernel alone changed, ROWS // 4 rows per block; its commit."""
    git(repo, "checkout", "-q", "-B", branch, "main")
    kernel = repo / kernel_path(layout)
    kernel.write_text(kernel.read_text().replace(f"ROWS = {ROWS}", f"ROWS = {ROWS // 4}"))
    git(repo, "commit", "-q", "-am", "kernel: smaller blocks")
    return git(repo, "rev-parse", "HEAD")


def env_for(repo: Path, layout: str) -> dict[str, str]:
    """What the adopter's CI sets for the layout (the ``src`` one: ``PYTHONPATH=src``)."""
    return {"PYTHONPATH": str(repo / "src")} if layout == "src" else {}
