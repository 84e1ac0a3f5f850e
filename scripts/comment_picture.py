"""The README's picture of a sticky comment: the suite's own rendering of it
(tests/test_comment_browser.py: GitHub's markdown and CSS in a 900 px column, headless
Chromium), made small.

    python scripts/comment_picture.py     # rewrites docs/images/comment.png

Needs the test extra and Chromium (Debian's chromium and chromium-driver, as .ci/run).
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PICTURE = ROOT / "docs" / "images" / "comment.png"
TEST = "tests/test_comment_browser.py::test_the_verdict_what_to_do_and_the_changes_fit_900px"
WIDTH = 900  # the comment column the test renders
COLOURS = 64  # a palette: text on white needs few, and the file stays small


def main() -> int:
    from PIL import Image

    with tempfile.TemporaryDirectory() as folder:
        env = {**os.environ, "CI_BENCH_TEST_ARTIFACTS": folder}
        done = subprocess.run(
            [sys.executable, "-m", "pytest", "-q", "-p", "no:randomly", "-p", "no:xdist", TEST],
            cwd=ROOT,
            env=env,
            check=False,
        )
        shot = Path(folder) / "comment-900px.png"
        if done.returncode != 0 or not shot.is_file():
            print("the browser test did not render the comment (is chromium installed?)")
            return 1
        with Image.open(shot) as image:
            picture = image.convert("RGB").crop((0, 0, WIDTH, image.height))
    picture = picture.quantize(colors=COLOURS, method=Image.Quantize.MEDIANCUT)
    PICTURE.parent.mkdir(parents=True, exist_ok=True)
    picture.save(PICTURE, optimize=True)
    print(f"wrote {PICTURE.relative_to(ROOT)}: {PICTURE.stat().st_size:,} bytes")
    return 0


if __name__ == "__main__":
    sys.exit(main())
