"""Measure the HTML report side by side: render time, masking time, page size and time to open in Chromium.

Run: `.venv/bin/python tests/support/html_bench.py [REPEATS]`. Figures are medians; ratios compare against the small
failed-launch report measured in the same run, since the machine is shared and absolute times are noisy.
"""

from __future__ import annotations

import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Callable

from dfdoctor.redact import Redactor
from dfdoctor.render import html as html_render
from html_samples import big_report, failed_launch  # a script: its own folder is on sys.path


def median_time(fn: Callable[[], object], repeats: int) -> float:
    """Median wall time of `fn` over `repeats` runs."""
    times = []
    for _ in range(repeats):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return statistics.median(times)


def main(repeats: int = 7) -> None:
    """Print one line per sample: size, render, mask and open times."""
    samples = {"failed-launch": failed_launch(), "100 checks + 1 MiB": big_report(100, 1 << 20),
               "100 checks + 1 MiB of '<'": big_report(100, 1 << 20, hostile=True)}
    red = Redactor.from_env({"HF_TOKEN": "hf_" + "x" * 34, "WANDB_API_KEY": "0123456789abcdef" * 2})
    rows = []
    browser = None
    try:
        from browser import Chromium, find_chromium
        browser = Chromium() if find_chromium() else None
    except Exception as exc:  # measure what we can without a browser
        print(f"(no browser figures: {exc})")
    with tempfile.TemporaryDirectory() as tmp:
        for name, rep in samples.items():
            page = html_render.render(rep)
            render_s = median_time(lambda: html_render.render(rep), repeats)
            mask_s = median_time(lambda: red.report(rep), max(3, repeats // 2))
            open_s = float("nan")
            if browser is not None:
                path = Path(tmp) / "p.html"
                path.write_text(page)

                def load() -> None:
                    browser.open(path.as_uri()).close()
                open_s = median_time(load, max(3, repeats // 2))
            rows.append((name, len(page.encode()), render_s, mask_s, open_s))
    if browser is not None:
        browser.close()
    base = rows[0]
    print(f"{'sample':28} {'bytes':>10} {'render s':>9} {'mask s':>8} {'open s':>7}   ratios vs small")
    for name, size, r, m, o in rows:
        print(f"{name:28} {size:>10,} {r:>9.3f} {m:>8.3f} {o:>7.3f}   render x{r / base[2]:.1f}, "
              f"mask x{m / base[3]:.1f}, open x{o / base[4]:.1f}")


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 7)
