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
from batch.dashboard.charts import bars, time_unit
from batch.dashboard.gangs import COLUMNS, JobQuery
from batch.dashboard.views import GPU, SHOWN

__all__ = [
    "ago",
    "history_page",
    "job_page",
    "jobs_page",
    "layout",
    "nodes_page",
    "overview_page",
    "podgroup_page",
    "queues_page",
]

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
svg.chart .unit{text-anchor:middle;font-size:11px}
.state.cordoned{color:#e65100}.state.not-ready{color:#c62828}
h2.rack small{font-weight:normal;color:#666;margin-left:8px}
table.jobs th a{color:inherit}table.jobs td,table.jobs th{white-space:nowrap}
table.jobs td:last-child{white-space:normal;min-width:240px}
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
    ("/nodes", "Nodes"),
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


def _rack_anchor(name: str) -> str:
    return "rack-" + quote(name, safe="")


def _gpu_cell(used: int, total: int) -> str:
    return f"{used} / {total} {_meter(used, None, total)}" if total else "-"


def _racks_table(racks: Sequence[Mapping[str, Any]]) -> str:
    rows = [
        [
            f'<a href="/nodes#{_rack_anchor(r["name"])}">{_e(r["name"])}</a>',
            _e(r["nodes"]),
            _e(r["ready"]),
            _e(r["cordoned"]),
            _gpu_cell(r["gpus_used"], r["gpus"]),
            _e(r["pods"]),
        ]
        for r in racks
    ]
    head = ["rack", "nodes", "ready", "cordoned", "GPUs used / total", "pods"]
    return _table(head, rows, "racks")


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
        f"<h2>Pods</h2>{pods}<h2>Nodes by rack ({model['nodes']} nodes, "
        f'<a href="/nodes">every node</a>)</h2>{_racks_table(model["racks"])}'
    )


def _meter(allocated: int, deserved: int | None, scale: int) -> str:
    """A bar `allocated` of `scale` long, with a mark at `deserved` (None: no mark)."""
    if scale <= 0:
        return ""
    width = min(100.0, 100 * allocated / scale)
    mark = (
        ""
        if deserved is None
        else f'<s style="left:{min(100.0, 100 * deserved / scale):.1f}%"></s>'
    )
    return f'<span class=meter><i style="width:{width:.1f}%"></i>{mark}</span>'


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


def ago(iso: Any, now: float | None = None) -> str:
    """A timestamp as its age ("3m ago"), the ISO form kept in the title; "-" if none."""
    at = parse_time(iso)
    if at is None:
        return "-"
    age = format_duration(max(0.0, (time.time() if now is None else now) - at.timestamp()))
    return f'<time datetime="{_e(iso)}" title="{_e(iso)}">{age} ago</time>'


def _source(q: Mapping[str, Any]) -> str:
    """Where the row's deserved share comes from; for the scheduler's, how long ago the
    session that last changed it ran (when its uid says)."""
    at = parse_time(q.get("deserved_at"))
    title = f' title="session {_e(q["deserved_session"])}"' if q.get("deserved_session") else ""
    age = f", {ago(q.get('deserved_at'))}" if at is not None else ""
    return f"<span{title}>{_e(q['deserved_source'])}{age}</span>"


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


_FILTERS = (
    ("name", "name contains"),
    ("namespace", "namespace"),
    ("queue", "queue"),
    ("phase", "phase"),
    ("kind", "kind"),
    ("submitter", "submitter"),
)


def _filter_form(query: JobQuery) -> str:
    field = '<label>{0} <input name="{1}" value="{2}" size=10></label> '
    inputs = "".join(field.format(label, key, _e(getattr(query, key))) for key, label in _FILTERS)
    keep_sort = (
        f'<input type=hidden name=sort value="{_e(query.sort)}">' if query.sort != "age" else ""
    )
    return (
        f'<form method=get action="/jobs" class=filters>{inputs}{keep_sort}<button>filter</button>'
        ' <a href="/jobs">clear</a></form>'
    )


def _sort_header(query: JobQuery, key: str, label: str) -> str:
    """A column heading that sorts by it, the other way round when it already does."""
    current = query.sort.removeprefix("-")
    descending = query.sort.startswith("-")
    arrow = (" ▼" if descending else " ▲") if current == key else ""
    target = f"-{key}" if current == key and not descending else key
    return f'<a href="{_e(query.link(sort=target))}" data-sort="{key}">{escape(label)}{arrow}</a>'


def _wait_cell(row: Mapping[str, Any]) -> str:
    wait = row.get("wait_s")
    if wait is None:
        return "-"
    text = format_duration(wait)
    return f"{text} so far" if not row.get("started_s") else text


def _reason_cell(reason: str) -> str:
    if len(reason) <= 90:
        return _e(reason)
    return f'<span title="{_e(reason)}">{_e(reason[:88])}…</span>'


def _gang_cells(r: Mapping[str, Any], now: float) -> list[str]:
    priority = f"{r['priority']} ({r['priority_value']})" if r["priority"] else "-"
    return [
        f'<a href="{_e(r["link"])}">{_e(r["name"])}</a>',
        _e(r["kind"]),
        _e(r["namespace"]),
        _e(r["queue"]),
        _e(r["phase"]),
        _e(r["gpus"]),
        _e(r["gpus_held"]),
        _e(f"{r['running']} / {r['min_member']}"),
        _e(priority),
        _e(r["submitter"] or "-"),
        ago(r["created"], now),
        _wait_cell(r),
        _reason_cell(str(r["reason"])),
    ]


def jobs_page(model: Mapping[str, Any], query: JobQuery) -> str:
    """Every gang: VCJobs and the PodGroups of operators, Deployments and bare pods."""
    headers = "".join(f"<th>{_sort_header(query, k, label)}</th>" for k, label in COLUMNS)
    body = "".join(
        "<tr>" + "".join(f"<td>{c}</td>" for c in _gang_cells(r, model["now"])) + "</tr>"
        for r in model["jobs"]
    )
    more = (
        f"<p>showing {len(model['jobs'])} of {model['total']}: narrow the filter</p>"
        if model["total"] > len(model["jobs"])
        else ""
    )
    phases = ", ".join(f"{k} {v}" for k, v in model["phases"].items())
    kinds = ", ".join(f"{k} {v}" for k, v in model["kinds"].items())
    return (
        f"<h1>Jobs ({model['total']})</h1>{_filter_form(query)}"
        f"<p class=counts>{_e(phases)}<br>{_e(kinds)}</p>"
        f'<table class="jobs"><tr>{headers}</tr>{body}</table>{more}'
        "<p>Every PodGroup, whatever made it (a VCJob, a PyTorchJob, an MPIJob, a RayCluster, "
        "a Spark application, a Deployment's or a bare pod's gang), and VCJobs that have no "
        "PodGroup yet. Filters are exact and ignore case, except <i>name contains</i>; "
        "click a heading to sort.</p>"
    )


def _node_cells(n: Mapping[str, Any]) -> list[str]:
    state = "cordoned" if n["cordoned"] else ("ready" if n["ready"] else "not ready")
    return [
        _e(n["name"]),
        f'<span class="state {state.replace(" ", "-")}">{state}</span>',
        _gpu_cell(n["gpus_used"], n["gpus"]),
        _e(f"{n['cpu_used']} / {n['cpu']}"),
        _e(n["pods"]),
    ]


def nodes_page(model: Mapping[str, Any]) -> str:
    """The nodes, one table per rack (HyperNode or rack label)."""
    head = ["node", "state", "GPUs used / total", "cpu used / total", "pods"]
    parts = [f"<h1>Nodes ({model['nodes']})</h1><p>{len(model['racks'])} racks</p>"]
    for r in model["racks"]:
        summary = (
            f"{r['nodes']} node{'' if r['nodes'] == 1 else 's'}, "
            f"GPUs {r['gpus_used']} / {r['gpus']} used, {r['pods']} pods"
            + (f", {r['cordoned']} cordoned" if r["cordoned"] else "")
        )
        parts.append(
            f'<h2 id="{_rack_anchor(r["name"])}" class=rack>{_e(r["name"])} '
            f"<small>{_e(summary)}</small></h2>"
            + _table(head, (_node_cells(n) for n in r["node_rows"]), "nodes")
        )
    return "".join(parts)


def podgroup_page(model: Mapping[str, Any]) -> str:
    """A gang that is not a VCJob's: its owner, its PodGroup's state, its pods and events."""
    row = model["row"]
    conditions = _table(
        ["condition", "reason", "message", "since"],
        [
            [_e(c.get("type")), _e(c.get("reason")), _e(c.get("message")), ago(c.get("at"))]
            for c in model["conditions"]
        ],
    )
    pods = _table(
        ["pod", "phase", "node"],
        [[_e(p["name"]), _e(p["phase"]), _e(p["node"] or "-")] for p in model["pods"]],
    )
    events = _table(
        ["last seen", "type", "reason", "object", "message"],
        [
            [ago(e["last"]), _e(e["type"]), _e(e["reason"]), _e(e["involved"]), _e(e["message"])]
            for e in model["events"]
        ],
    )
    return (
        f"<h1>{_e(row['kind'])} {_e(row['namespace'])}/{_e(row['name'])}</h1>"
        f"<p>PodGroup <b>{_e(row['podgroup'])}</b>, phase <b id=phase>{_e(row['phase'])}</b>, "
        f"queue {_e(row['queue'])}, minMember {_e(row['min_member'])}, "
        f"GPUs asked {_e(row['gpus'])}, held {_e(row['gpus_held'])}</p>"
        f"<p id=reason>{_e(row['reason'] or 'no pending reason')}</p>"
        f"<h2>Conditions</h2>{conditions}<h2>Pods ({len(model['pods'])})</h2>{pods}"
        f"<h2>Events</h2>{events}"
    )


def job_page(model: Mapping[str, Any], now: float | None = None) -> str:
    """One job: why it waits, its phase history, pods and events; times as ages at `now`
    (default: the current time), the exact time in each one's title."""
    title = f"{model['namespace']}/{model['name']}"
    history = _table(
        ["phase", "since"], [[_e(h["phase"]), ago(h["at"], now)] for h in model["history"]]
    )
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
            [
                ago(e["last"], now),
                _e(e["type"]),
                _e(e["reason"]),
                _e(e["involved"]),
                _e(e["message"]),
            ]
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
    keys = ("p50", "p90", "p99")
    longest = max([float(r.get(f"{p}_wait_s") or 0) for r in waits for p in keys] + [0.0])
    per, unit = time_unit(longest)
    series = {p: [float(r.get(f"{p}_wait_s") or 0) / per for r in waits] for p in keys}
    return bars(f"Wait before start per queue ({unit})", names, series, unit)


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
