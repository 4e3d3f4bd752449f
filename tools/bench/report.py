"""bench.py's HTML page: per section, provider and workload, one chart of
IOPS and one of CPU per I/O, each target's median as a bar and every round
as a tick on it; then the text summary.  Plain SVG, no scripts."""
import html as H

COLORS = {"isertd": "#2b6cb0", "tgtd": "#c05621", "lio": "#2f855a", "raw": "#718096"}


def color(target):
    return COLORS.get(target.split("-")[0], "#555")


def chart(title, rows, unit, lower_better):
    """rows: (label, median, [round values]); horizontal bars."""
    if not rows:
        return ""
    w, lw, bh, gap = 640, 150, 18, 6
    top = max(max([m] + vals) for _, m, vals in rows) or 1
    h = 24 + len(rows) * (bh + gap)
    s = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{w}" height="{h}" font-family="sans-serif" font-size="12">',
         f'<text x="0" y="14" font-weight="bold">{H.escape(title)} ({unit}{", lower is better" if lower_better else ""})</text>']
    for i, (label, med, vals) in enumerate(rows):
        y = 24 + i * (bh + gap)
        bw = (w - lw - 90) * med / top
        s.append(f'<text x="0" y="{y + 13}">{H.escape(label)}</text>')
        s.append(f'<rect x="{lw}" y="{y}" width="{bw:.1f}" height="{bh}" fill="{color(label)}"/>')
        for v in vals:
            x = lw + (w - lw - 90) * v / top
            s.append(f'<line x1="{x:.1f}" x2="{x:.1f}" y1="{y - 2}" y2="{y + bh + 2}" stroke="#000" stroke-width="1"/>')
        s.append(f'<text x="{lw + bw + 6:.1f}" y="{y + 13}">{med:,.1f}</text>')
    s.append("</svg>")
    return "".join(s)


def html(doc, text):
    groups = {}
    for x in doc["rounds"]:
        groups.setdefault((x["section"], x["prov"], x["workload"]), {}).setdefault(x["target"], []).append(x)
    med = {(m["section"], m["prov"], m["target"], m["workload"]): m for m in doc["medians"]}
    parts = [f"<!doctype html><meta charset=utf-8><title>isert bench {H.escape(doc['commit'])}</title>",
             "<style>body{font-family:sans-serif;margin:2em}pre{background:#f4f4f4;padding:1em}"
             ".g{display:inline-block;margin:0 2em 2em 0;vertical-align:top}</style>",
             f"<h1>isert bench: commit {H.escape(doc['commit'])}</h1>",
             f"<p>{H.escape(doc['date'])} on {H.escape(doc['host'])}; bars are medians over rounds, "
             "ticks are the rounds. tools/bench/bench.py wrote this page (docs/bench.md).</p>"]
    if doc["goals"]:
        parts.append("<h2>Goals</h2><ul>")
        for g in doc["goals"]:
            parts.append(f"<li><b>{'met' if g['met'] else 'MISSED'}</b> {H.escape(g['goal'])}: {H.escape(g['detail'])}</li>")
        parts.append("</ul>")
    section = None
    for (sec, prov, wl), targets in sorted(groups.items()):
        if sec != section:
            section = sec
            parts.append(f"<h2>{'iSCSI over loopback TCP (this host)' if sec == 'tcp' else 'iSER in the test guest'}</h2>")
        iops, cpu = [], []
        for t, xs in sorted(targets.items()):
            m = med[(sec, prov, t, wl)]
            if wl.endswith("stream"):
                iops.append((t, m["mib_s"], [x["mib_s"] for x in xs]))
                continue
            iops.append((t, m["iops"], [x["iops"] for x in xs]))
            key = "guest_cpu_us_per_io" if sec == "guest" else "cpu_us_per_io"
            if m.get(key):
                cpu.append((t, m[key], [x[key] for x in xs]))
        title = f"{prov} {wl}"
        parts.append('<div class="g">' + chart(title, iops, "MiB/s" if wl.endswith("stream") else "IOPS", False)
                     + "<br>" + chart(title, cpu, "guest CPU µs per I/O" if sec == "guest" else "target CPU µs per I/O", True)
                     + "</div>")
    parts.append(f"<h2>Summary</h2><pre>{H.escape(text)}</pre>")
    return "\n".join(parts)
