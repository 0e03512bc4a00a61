"""HTML of the dashboard's pages, rendered on the server from the page models in `views`.

Why server-side: the figures are computed in Python anyway, the page works without a script
(and offline: no CDN, nothing to vendor), and a test reads the same HTML a browser shows. The
one script (`SCRIPT`) keeps a page live: it listens on `/api/stream` (server-sent events, sent
when a watch changed something) and swaps in the page's fresh `<main>`.
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Mapping, Sequence
from html import escape
from typing import Any
from urllib.parse import quote

from batch.api.durations import format_duration
from batch.api.timestamps import parse_time
from batch.dashboard.charts import bars
from batch.dashboard.views import GPU, SHOWN, JobFilter

__all__ = ["history_page", "job_page", "jobs_page", "layout", "overview_page", "queues_page"]

STYLE = """
body{font:14px system-ui,sans-serif;margin:0;color:#222}
nav{background:#263238;padding:8px 16px}nav a{color:#eceff1;margin-right:18px;text-decoration:none}
nav a.on{font-weight:bold;border-bottom:2px solid #ffb74d}
main{padding:12px 16px}h1{font-size:20px}h2{font-size:16px;margin-top:22px}
table{border-collapse:collapse;margin:6px 0}td,th{border-bottom:1px solid #ddd;padding:3px 8px;
text-align:left}th{background:#f5f5f5}td:first-child{white-space:nowrap}
.cards{display:flex;gap:12px;flex-wrap:wrap}.card{border:1px solid #ddd;border-radius:6px;
padding:8px 12px;min-width:130px}.card b{display:block;font-size:20px}
svg.chart{width:640px;max-width:100%;height:auto;border:1px solid #eee}
svg.chart .grid{stroke:#eee}svg.chart text{font-size:10px;fill:#555}
svg.chart .tick{text-anchor:end}svg.chart .cat{text-anchor:middle}
svg.nodes rect.node{stroke:#fff;stroke-width:1}
.meter{display:inline-block;width:120px;height:10px;background:#eee;position:relative}
.meter i{position:absolute;left:0;top:0;bottom:0;background:#4e79a7}
.meter s{position:absolute;top:-2px;bottom:-2px;width:2px;background:#e15759}
pre.why{background:#fff8e1;border:1px solid #ffe082;padding:8px;white-space:pre-wrap}
.live{float:right;color:#90a4ae;font-size:12px}
"""

SCRIPT = """
(function () {
  var busy = false, again = false;
  function refresh() {
    if (busy) { again = true; return; }
    busy = true;
    fetch(location.href, {headers: {'X-Dashboard-Fragment': '1'}, credentials: 'same-origin'})
      .then(function (r) { return r.ok ? r.text() : null; })
      .then(function (html) {
        if (html !== null) { document.getElementById('main').innerHTML = html; }
      })
      .finally(function () { busy = false; if (again) { again = false; refresh(); } });
  }
  var es = null;
  function listen() {
    es = new EventSource('/api/stream');
    es.onmessage = function (ev) {
      var v = document.getElementById('version');
      if (v) { v.textContent = ev.data; }
      refresh();
    };
  }
  // a page left open in the back-forward cache must not hold a connection: browsers allow
  // six per host, and fetches behind held streams would wait
  window.addEventListener('pagehide', function () { if (es) { es.close(); es = null; } });
  window.addEventListener('pageshow', function () { if (!es) { listen(); } });
  listen();
})();
"""

PAGES = (
    ("/", "Overview"),
    ("/queues", "Queues"),
    ("/jobs", "Jobs"),
    ("/history", "History"),
    ("/whatif", "What-if"),
)


def layout(title: str, path: str, main: str, connection: str = "live") -> str:
    """A whole page: navigation, the watches' `connection` (the stream updates it), the
    `<main>` the script refreshes, the script."""
    links = "".join(
        f'<a href="{href}"{" class=on" if href == path else ""}>{name}</a>' for href, name in PAGES
    )
    return (
        f"<!doctype html><html lang=en><head><meta charset=utf-8><title>{escape(title)} · "
        f"Tephra</title><style>{STYLE}</style></head><body><nav>{links}"
        f"<span class=live id=version>{escape(connection)}</span></nav><main id=main>{main}</main>"
        f"<script>{SCRIPT}</script></body></html>"
    )


def _table(headers: Sequence[str], rows: Iterable[Sequence[Any]], cls: str = "") -> str:
    head = "".join(f"<th>{escape(h)}</th>" for h in headers)
    body = "".join("<tr>" + "".join(f"<td>{c}</td>" for c in row) + "</tr>" for row in rows)
    return f'<table class="{cls}"><tr>{head}</tr>{body}</table>'


def _e(value: Any) -> str:
    return escape("" if value is None else str(value))


def _card(label: str, value: Any, cls: str = "") -> str:
    return f'<div class="card {cls}"><b>{_e(value)}</b>{escape(label)}</div>'


def _node_map(rows: Sequence[Mapping[str, Any]]) -> str:
    """One square per node, darker the more of its GPUs (else cpu) are allocated."""
    per_row, size = 50, 12
    out = [
        f'<svg class="nodes" width="{per_row * size}" '
        f'height="{max(1, -(-len(rows) // per_row)) * size}">'
    ]
    for i, r in enumerate(rows):
        frac = r["gpus_used"] / r["gpus"] if r["gpus"] else r["cpu_fraction"]
        color = "#bdbdbd" if not r["ready"] else f"hsl(210,60%,{92 - 62 * min(1.0, frac):.0f}%)"
        x, y = (i % per_row) * size, (i // per_row) * size
        tip = f"{r['name']}: {r['gpus_used']}/{r['gpus']} GPUs, {r['cpu_used']}/{r['cpu']} cpu"
        out.append(
            f'<rect class="node" x="{x}" y="{y}" width="{size}" height="{size}" fill="{color}">'
            f"<title>{escape(tip)}</title></rect>"
        )
    out.append("</svg>")
    return "".join(out)


def overview_page(model: Mapping[str, Any]) -> str:
    gpus = model["gpus"]
    cards = "".join(
        [
            _card("nodes", model["nodes"]),
            _card("ready", model["ready"]),
            _card("GPUs", gpus["total"]),
            _card("GPUs allocated", gpus["allocated"], "gpu-allocated"),
            _card("GPUs idle", gpus["idle"]),
            _card("idle on partly used nodes", gpus["fragmented"]),
        ]
    )
    resources = _table(
        ["resource", "capacity", "allocated", "idle"],
        [
            [
                _e(r),
                _e(model["capacity"][r]["text"]),
                _e(model["allocated"][r]["text"]),
                _e(model["idle"][r]["text"]),
            ]
            for r in SHOWN
        ],
    )
    pods = _table(["phase", "pods"], [[_e(k), _e(v)] for k, v in model["pods"].items()])
    return (
        f"<h1>Cluster</h1><div class=cards>{cards}</div><h2>Resources</h2>{resources}"
        f"<h2>Pods</h2>{pods}<h2>Nodes ({model['nodes']})</h2>{_node_map(model['node_rows'])}"
    )


def _meter(allocated: int, deserved: int, scale: int) -> str:
    if scale <= 0:
        return ""
    width = min(100.0, 100 * allocated / scale)
    mark = min(100.0, 100 * deserved / scale)
    return (
        f'<span class=meter><i style="width:{width:.1f}%"></i>'
        f'<s style="left:{mark:.1f}%"></s></span>'
    )


def _queue_row(q: Mapping[str, Any], capacity: Mapping[str, Any]) -> list[str]:
    cells = [
        f'<span style="padding-left:{16 * q["depth"]}px">{_e(q["name"])}</span>',
        _weight(q),
        _e(q["state"]),
        _e(f"{100 * q['share']:.0f}%"),
    ]
    for res in ("cpu", GPU):
        alloc, des = q["allocated"][res], q["deserved"][res]
        cells.append(
            f"{_e(alloc['text'])} / {_e(des['text'])} "
            f"{_meter(alloc['amount'], des['amount'], capacity[res]['amount'])}"
        )
        cells.append(_e(q["pending"][res]["text"]))
    pg = q["podgroups"]
    cells.append(_e(f"{pg['pending']} / {pg['inqueue']} / {pg['running']}"))
    cells.append(_source(q))
    return cells


def _weight(q: Mapping[str, Any]) -> str:
    """The spec weight, and with the usage-decayed fair share the weight the scheduler used."""
    eff, usage = q.get("effective_weight"), q.get("usage_share")
    if eff is None:
        return _e(q["weight"])
    said = f"{q['weight']} (effective {eff:.3g}, usage share {100 * (usage or 0):.0f}%)"
    return _e(said)


def _ago(seconds: float) -> str:
    if seconds < 120:
        return f"{max(0, round(seconds))} s ago"
    if seconds < 7200:
        return f"{round(seconds / 60)} min ago"
    return f"{round(seconds / 3600)} h ago"


def _source(q: Mapping[str, Any]) -> str:
    """Where the row's deserved share comes from; for the scheduler's, how long ago the
    session that last changed it ran (when its uid says)."""
    at = parse_time(q.get("deserved_at"))
    title = f' title="session {_e(q["deserved_session"])}"' if q.get("deserved_session") else ""
    age = f", {_ago(time.time() - at.timestamp())}" if at is not None else ""
    return f"<span{title}>{_e(q['deserved_source'])}{_e(age)}</span>"


def queues_page(model: Mapping[str, Any]) -> str:
    headers = [
        "queue",
        "weight",
        "state",
        "weight share",
        "cpu allocated / deserved",
        "cpu pending",
        "GPUs allocated / deserved",
        "GPUs pending",
        "PodGroups pending / inqueue / running",
        "deserved from",
    ]
    rows = [_queue_row(q, model["capacity"]) for q in model["queues"]]
    shown = [q for q in model["queues"] if q["name"] != "root"]
    chart = bars(
        "GPUs per queue: allocated, deserved, pending",
        [q["name"] for q in shown],
        {
            what: [q[what][GPU]["amount"] / 1000 for q in shown]
            for what in ("allocated", "deserved", "pending")
        },
        "GPUs",
    )
    return (
        f"<h1>Queues</h1>{_table(headers, rows, 'queues')}"
        "<p>Deserved is the scheduler's figure: what the fair-share plugin (proportion or "
        "capacity) of its session computed for the queue, published on the Queue as the "
        "annotation <code>tephra.io/fair-share</code>, the same figure as the "
        "<code>volcano_queue_deserved_*</code> metrics and <code>tephra queue get</code>; its "
        "age is that of the session that last changed it. A queue the scheduler computed no "
        "figure for (no jobs in a session yet, or no fair-share plugin configured) shows its "
        "spec.deserved, else its weight share of the cluster (weight among its siblings, down "
        "the tree), marked “not computed by the scheduler yet”. The weight share column is "
        "that weight share, whatever the source of deserved.</p>"
        f"{chart}"
    )


def _filter_form(flt: JobFilter) -> str:
    field = '<label>{0} <input name="{1}" value="{2}" size=12></label> '
    inputs = "".join(
        field.format(label, key, _e(getattr(flt, key)))
        for label, key in (
            ("name", "text"),
            ("namespace", "namespace"),
            ("queue", "queue"),
            ("phase", "phase"),
        )
    )
    return f'<form method=get action="/jobs">{inputs}<button>filter</button></form>'


def _job_link(row: Mapping[str, Any]) -> str:
    href = f"/jobs/{quote(str(row['namespace']))}/{quote(str(row['name']))}"
    return f'<a href="{href}">{_e(row["name"])}</a>'


def jobs_page(model: Mapping[str, Any], flt: JobFilter) -> str:
    headers = [
        "job",
        "namespace",
        "queue",
        "phase",
        "replicas",
        "pending",
        "running",
        "succeeded",
        "failed",
        "created",
    ]
    rows = [[_job_link(r), *(_e(r[k]) for k in headers[1:])] for r in model["jobs"]]
    more = (
        f"<p>showing {len(model['jobs'])} of {model['total']}: narrow the filter</p>"
        if model["total"] > len(model["jobs"])
        else ""
    )
    phases = ", ".join(f"{k} {v}" for k, v in model["phases"].items())
    return (
        f"<h1>Jobs ({model['total']})</h1>{_filter_form(flt)}<p>{_e(phases)}</p>"
        f"{_table(headers, rows, 'jobs')}{more}"
    )


def job_page(model: Mapping[str, Any]) -> str:
    title = f"{model['namespace']}/{model['name']}"
    history = _table(["phase", "since"], [[_e(h["phase"]), _e(h["at"])] for h in model["history"]])
    pods = _table(
        ["pod", "phase", "node", "exit code"],
        [
            [_e(p["name"]), _e(p["phase"]), _e(p["node"]), _e(p.get("exit", ""))]
            for p in model["pods"]
        ],
    )
    events = _table(
        ["last seen", "type", "reason", "object", "message"],
        [
            [_e(e["last"]), _e(e["type"]), _e(e["reason"]), _e(e["involved"]), _e(e["message"])]
            for e in model["events"]
        ],
    )
    verdict, *details = model["why"] or [""]
    why = escape("\n".join(details))
    return (
        f"<h1>Job {_e(title)}</h1><p>phase <b id=phase>{_e(model['phase'])}</b>, queue "
        f"{_e(model['queue'])}, minAvailable {_e(model['min_available'])}</p>"
        f"<h2>Why (tephra job why)</h2><p class=verdict id=verdict><b>{_e(verdict)}</b></p>"
        f"<pre class=why id=why>{why}</pre>"
        f"<h2>Phase history</h2>{history}<h2>Pods ({len(model['pods'])})</h2>{pods}"
        f"<h2>Events</h2>{events}"
    )


def _usage_chart(usage: Sequence[Mapping[str, Any]]) -> str:
    days = sorted({str(r["day"]) for r in usage})
    queues = sorted({str(r["queue"]) for r in usage})
    table = {(str(r["day"]), str(r["queue"])): float(r["gpu_hours"] or 0) for r in usage}
    series = {q: [table.get((d, q), 0.0) for d in days] for q in queues}
    return bars("GPU-hours per queue per day", days, series, "GPU-hours")


def _wait_chart(waits: Sequence[Mapping[str, Any]]) -> str:
    names = [str(r["queue"]) for r in waits]
    series = {p: [float(r.get(f"{p}_wait_s") or 0) for r in waits] for p in ("p50", "p90", "p99")}
    return bars("Wait before start per queue (seconds)", names, series, "s")


def _wait(row: Mapping[str, Any], key: str) -> str:
    """A wait in seconds as a duration, ``>= `` first when it is a lower bound."""
    value = row.get(key)
    if value is None:
        return "-"
    return escape((">= " if key in row.get("at_least", ()) else "") + format_duration(value))


_WAIT_KEYS = ("p50_wait_s", "p90_wait_s", "p99_wait_s", "max_wait_s")


def _wait_table(waits: Sequence[Mapping[str, Any]]) -> str:
    rows = [
        [_e(r["queue"]), _e(r["jobs"]), _e(r["started"]), _e(r["still_waiting"])]
        + [_wait(r, k) for k in _WAIT_KEYS]
        for r in waits
    ]
    head = ["queue", "jobs", "started", "still waiting", "p50", "p90", "p99", "max"]
    return _table(head, rows, "waits")


def _fairness_table(rows: Sequence[Mapping[str, Any]]) -> str:
    cells = [
        [
            _e(r["queue"]),
            _e(r.get("avg_allocated_units")),
            _e(r.get("avg_deserved_units")),
            _e(r.get("starved_fraction")),
            _e(r["still_waiting"]),
            _wait(r, "longest_wait_s"),
        ]
        for r in rows
    ]
    head = ["queue", "GPUs allocated", "GPUs deserved", "starved", "still waiting", "longest wait"]
    return _table(head, cells, "fairness")


_STILL_WAITING = (
    "<p>Jobs still waiting count with their wait so far (until {until}); a figure marked "
    "&gt;= counts them, so it is a lower bound.</p>"
)


def _fairness_chart(rows: Sequence[Mapping[str, Any]]) -> str:
    names = [str(r["queue"]) for r in rows]
    series = {
        what: [float(r.get(f"avg_{what}_units") or 0) for r in rows]
        for what in ("allocated", "deserved")
    }
    return bars("Average GPUs allocated and deserved per queue", names, series, "GPUs")


def history_page(model: Mapping[str, Any]) -> str:
    if not model["ledger"]:
        why = model.get("error") or "start the dashboard with --db URL"
        return f"<h1>History</h1><p class=error>No ledger history: {_e(why)}</p>"
    pre = model["preemptions"]
    pre_table = _table(
        ["action", "victim queue", "beneficiary queue", "evictions", "victim jobs", "GPUs"],
        [
            [
                _e(r[k])
                for k in (
                    "action",
                    "victim_queue",
                    "beneficiary_queue",
                    "evictions",
                    "victim_jobs",
                    "gpus",
                )
            ]
            for r in pre
        ],
    )
    return (
        f"<h1>History, last {model['days']} days</h1>"
        f"<p>{_e(model['since'])} .. {_e(model['until'])} (UTC)</p>"
        f"<h2>Wait times</h2>{_wait_chart(model['wait_times'])}"
        f"{_wait_table(model['wait_times'])}{_STILL_WAITING.format(until=_e(model['until']))}"
        f"<h2>GPU-hours</h2>{_usage_chart(model['usage'])}"
        f"<h2>Fairness (GPUs, averaged over the scheduler's share samples)</h2>"
        f"{_fairness_chart(model['fairness'])}{_fairness_table(model['fairness'])}"
        f"<h2>Preemptions and reclaims ({len(pre)})</h2>{pre_table}"
    )


def whatif_page(runs: Sequence[Mapping[str, Any]], csrf: str) -> str:
    """The what-if form (POST /whatif/start, set=... and the CSRF value) and the replays."""
    field = '<input name=set size=48 placeholder="queue=team-a,weight=3"{0}><br>'
    inputs = "".join(field.format(" required" if i == 0 else "") for i in range(3))
    inputs += f'<input type=hidden name=csrf value="{_e(csrf)}">'
    rows = [
        [
            f'<a href="/whatif/{r["id"]}">{r["id"]}</a>',
            _e(" ; ".join(r["changes"])),
            _e(r["state"]),
            _e(f"{r['elapsed_s']}s"),
        ]
        for r in reversed(runs)
    ]
    return (
        "<h1>What if</h1><p>Replays the ledger's recorded submissions on the live nodes twice, "
        "with the queues as they are and with these changes (as <code>tephra whatif --set</code>). "
        "Jobs still waiting are replayed too, with an assumed run time (their queue's median); "
        "each replay says what it assumed and what it left out."
        f'</p><form method=post action="/whatif/start">{inputs}<button>replay</button></form>'
        f"<h2>Replays</h2>{_table(['run', 'changes', 'state', 'elapsed'], rows, 'runs')}"
    )


def whatif_run_page(run: Mapping[str, Any]) -> str:
    changes = " ; ".join(run["changes"])
    head = f"<h1>What-if {run['id']}</h1><p>{_e(changes)}</p>"
    if run["state"] == "running":
        return (
            f"{head}<p id=state>running, {run['elapsed_s']}s so far</p>"
            f"<script>setTimeout(function () {{ location.reload(); }}, 1000);</script>"
        )
    if run["state"] == "failed":
        failed = f"failed after {run['elapsed_s']}s: {run['error']}"
        return f"{head}<p id=state class=error>{_e(failed)}</p>"
    return (
        f"{head}<p id=state>done in {run['elapsed_s']}s</p><pre id=result>{_e(run['table'])}</pre>"
    )
