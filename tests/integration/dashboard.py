#!/usr/bin/env python3
"""Every query of the Grafana dashboard (configs/grafana/isertd.json),
evaluated by a real Prometheus server's HTTP API over the time a workload
ran: each must return data.  Grafana itself is not in Debian; its two
variables are replaced as Grafana would: $target by the "All" value (.*)
and $__rate_interval by RATE (at least four scrape intervals).

As a module: queries(), evaluate().  As a program (tests/vm/t-isertd-iser.sh):

  dashboard.py DASHBOARD PROM_URL START END [--absent SUBSTRING]...

prints each panel with the number of series it got and fails when one has
none, except a query containing an --absent SUBSTRING: that one must have
none (a metric the machine cannot have, e.g. RDMA counters on a host
without an RDMA device), so a new panel is never skipped unnoticed."""
import json
import re
import sys
import urllib.parse
import urllib.request

RATE = '5s'


def queries(path):
    """[(panel title, expr)] of the dashboard, variables replaced."""
    with open(path) as f:
        dash = json.load(f)
    out = []

    def walk(o, title):
        if isinstance(o, dict):
            title = o.get('title', title)
            if 'expr' in o:
                out.append((title, o['expr'].replace('$__rate_interval', RATE).replace('$target', '.*')))
            for v in o.values():
                walk(v, title)
        elif isinstance(o, list):
            for v in o:
                walk(v, title)
    walk(dash.get('panels', []), '')
    return out


def variables(path):
    """[(name, metric, label)] of the dashboard's label_values(METRIC, LABEL) variables."""
    with open(path) as f:
        dash = json.load(f)
    out = []
    for v in dash.get('templating', {}).get('list', []):
        m = re.fullmatch(r'label_values\((\w+), *(\w+)\)', v.get('definition', ''))
        if m:
            out.append((v['name'], m.group(1), m.group(2)))
    return out


def evaluate(url, expr, start, end):
    """The series query_range returns for expr over [start, end], 1 s steps."""
    q = urllib.parse.urlencode({'query': expr, 'start': f'{start:.3f}', 'end': f'{end:.3f}', 'step': '1'})
    with urllib.request.urlopen(f'{url}/api/v1/query_range?{q}', timeout=10) as r:
        ans = json.load(r)
    if ans.get('status') != 'success':
        raise ValueError(f'{expr}: {ans.get("error")}')
    return ans['data']['result']


def check_all(dashboard, url, start, end, absent=()):
    """[(ok, line)] for every query: data where expected, none where absent."""
    res = []
    for name, metric, label in variables(dashboard):
        q = urllib.parse.urlencode({'match[]': metric, 'start': f'{start:.3f}', 'end': f'{end:.3f}'})
        try:
            with urllib.request.urlopen(f'{url}/api/v1/label/{label}/values?{q}', timeout=10) as r:
                vals = json.load(r)['data']
        except (OSError, ValueError, KeyError) as e:
            res.append((False, f'variable ${name}: {e}'))
            continue
        res.append((bool(vals), f'variable ${name}: {len(vals)} values  [label_values({metric}, {label})]'))
    for title, expr in queries(dashboard):
        try:
            n = len(evaluate(url, expr, start, end))
        except (OSError, ValueError) as e:
            res.append((False, f'{title}: {e}'))
            continue
        want_none = any(a in expr for a in absent)
        ok = (n == 0) if want_none else (n > 0)
        res.append((ok, f'{title}: {n} series{" (none expected here)" if want_none else ""}  [{expr}]'))
    return res


def main():
    args = sys.argv[1:]
    absent = [args[i + 1] for i, a in enumerate(args) if a == '--absent']
    pos = [a for i, a in enumerate(args) if a != '--absent' and (i == 0 or args[i - 1] != '--absent')]
    if len(pos) != 4:
        sys.exit(__doc__)
    res = check_all(pos[0], pos[1].rstrip('/'), float(pos[2]), float(pos[3]), absent)
    for ok, line in res:
        print(('ok   ' if ok else 'FAIL ') + line)
    sys.exit(0 if res and all(ok for ok, _ in res) else 1)


if __name__ == '__main__':
    main()
