"""report.html as a person sees it: rendered by headless Chromium (Debian's `chromium` package).

The report itself has no scripts; the test appends one to a copy that measures, in the laid-out
page, every chart's drawn marks (polylines with points, bars with height), so a chart that is
present but empty, or that the browser cannot draw, fails. It also saves a screenshot
(``report.png`` next to the report, in pytest's tmp_path) for a human to look at.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path

from batch.sim.cluster import QueueSpec
from batch.sim.report import write_outputs

from .conftest import cluster, job, run, workload

ROOT = Path(__file__).resolve().parents[2]

PROBE = """<script>
const out = [];
for (const svg of document.querySelectorAll('svg.chart')) {
  const box = svg.getBoundingClientRect();
  let marks = 0;
  for (const el of svg.querySelectorAll('polyline.series, rect.bar')) {
    const b = el.getBBox();
    if ((el.tagName === 'polyline' && el.points.length > 1 && (b.width > 0 || b.height > 0))
        || (el.tagName === 'rect' && b.height > 0)) marks++;
  }
  out.push({cls: svg.getAttribute('class'), w: box.width, h: box.height, marks: marks});
}
const pre = document.createElement('pre');
pre.id = 'probe';
pre.textContent = JSON.stringify(out);
document.body.appendChild(pre);
</script>"""


def _chromium() -> str:
    path = shutil.which("chromium")
    if path is None:
        subprocess.run([str(ROOT / "scripts/ensure-packages.sh"), "chromium=chromium"], check=True)
        path = shutil.which("chromium")
    assert path is not None, "chromium is not installed and could not be installed"
    return path


def _headless(browser: str, *args: str) -> str:
    done = subprocess.run(
        [browser, "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars", *args],
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    return done.stdout


def test_report_renders_in_chromium(tmp_path: Path) -> None:
    browser = _chromium()
    queues = (QueueSpec("qa", weight=2), QueueSpec("qb", weight=1))
    jobs = [
        job("a", submit=0, run=4000, pods=12, queue="qa"),
        job("b", submit=10, run=2000, pods=16, queue="qb"),
        job("c", submit=20, run=600, pods=1, queue="qb"),
    ]
    w = workload(jobs, cluster(2, queues=queues))
    runs = {name: run(w, name) for name in ("tephra", "kube-default", "fifo")}
    paths = write_outputs(tmp_path, w, runs)
    report = paths["report"].read_text()
    probe = tmp_path / "probe.html"
    probe.write_text(report.replace("</body>", PROBE + "</body>"))
    dom = _headless(browser, "--virtual-time-budget=5000", "--dump-dom", probe.as_uri())
    found = re.search(r'<pre id="probe">(.*?)</pre>', dom, flags=re.S)
    assert found is not None, dom[-2000:]
    charts = json.loads(found.group(1).replace("&quot;", '"'))
    kinds = [c["cls"].split()[1] for c in charts]
    assert kinds[:4] == ["delay", "spread", "waste", "utilization"]
    assert kinds.count("shares") == len(runs)
    for chart in charts:
        assert chart["w"] > 300 and chart["h"] > 200, chart
        assert chart["marks"] > 0, chart  # something is drawn in every chart
    shot = tmp_path / "report.png"
    _headless(browser, "--window-size=1280,4000", f"--screenshot={shot}", paths["report"].as_uri())
    assert shot.stat().st_size > 20_000  # a blank page of this size compresses to a few KB
