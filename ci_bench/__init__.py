"""ci-bench: continuous benchmarking of JAX Pallas kernels."""

__version__ = "0.2.0"
# Where ci-bench lives: its documentation, its reusable workflows and setup action
# (`uses: ci-bench/ci-bench/.github/workflows/ci-bench.yml@v<version>`).
REPOSITORY = "ci-bench/ci-bench"
HOMEPAGE = f"https://github.com/{REPOSITORY}"


def docs_url(path: str = "docs/index.md", anchor: str = "") -> str:
    """A page of ci-bench's own documentation at this installed version."""
    return f"{HOMEPAGE}/blob/v{__version__}/{path}" + (f"#{anchor}" if anchor else "")
