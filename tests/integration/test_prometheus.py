#!/usr/bin/env python3
"""A real Prometheus server scrapes isertd (docs/stats.md, "Prometheus").
Debian's /usr/bin/prometheus, on loopback with its storage in a scratch
folder, scrapes /metrics every second while initiators whose names carry
terminal escapes, CR, newlines, quotes, backslashes and bytes that are not
UTF-8 log in and read.  Its HTTP API then shows the target up with no scrape
error, rate(isert_lun_commands_total[...]) above zero, and the hostile names
stored as the labels docs/stats.md says (\\xNN).  Every query of the Grafana
dashboard (configs/grafana/isertd.json) returns data over the time they
read, but the RDMA panels, which must return none on a host without an
RDMA device (tests/vm/t-isertd-iser.sh evaluates them over iSER).
Prometheus is killed at the end whatever happens; the whole test takes
about 15 s.

usage: test_prometheus.py ISERTD [PORT]   (ports PORT..PORT+2)"""
import json
import os
import shutil
import subprocess
import sys
import threading
import time
import urllib.parse
import urllib.request

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import iscsi_client as ic  # noqa: E402
import checks  # noqa: E402
import dashboard  # noqa: E402
from admin_rpc import start_isertd, stop_isertd  # noqa: E402
from checks import check, wait_for  # noqa: E402

ISERTD = sys.argv[1]
PORT = int(sys.argv[2]) if len(sys.argv) > 2 else 3555
MPORT, PPORT = PORT + 1, PORT + 2      # isertd's /metrics, Prometheus' API
T = 'iqn.2026-11.org.isert:prom'
DASHBOARD = os.path.join(os.path.dirname(os.path.abspath(__file__)), '..', '..', 'configs', 'grafana', 'isertd.json')
PROMETHEUS = '/usr/bin/prometheus'
HOSTILE = [b'iqn.2026-11.org.test:esc\x1b[31mred\x07', b'iqn.2026-11.org.test:cr\rlf\nend',
           b'iqn.2026-11.org.test:bad\xff\xfe\xc0\x80', b'iqn.2026-11.org.test:q"uo\\te']
SHOWN = ['iqn.2026-11.org.test:esc\\x1b[31mred\\x07', 'iqn.2026-11.org.test:cr\\x0dlf\\x0aend',
         'iqn.2026-11.org.test:bad\\xff\\xfe\\xc0\\x80', 'iqn.2026-11.org.test:q"uo\\x5cte']


def api(path, **params):
    url = f'http://127.0.0.1:{PPORT}/api/v1/{path}'
    if params:
        url += '?' + urllib.parse.urlencode(params)
    with urllib.request.urlopen(url, timeout=5) as r:
        return json.load(r)


def query(expr):
    """The instant vector of expr: [(labels, value)]."""
    try:
        res = api('query', query=expr)['data']['result']
    except (OSError, ValueError, KeyError):
        return []
    return [(r['metric'], float(r['value'][1])) for r in res]


def promql_string(s):
    return '"' + s.replace('\\', '\\\\').replace('"', '\\"') + '"'


def reader(raw, stop, errors):
    """Log in as raw and read LUN 0 until stop."""
    c = None
    try:
        for _ in range(100):  # isertd is starting
            try:
                c = ic.Conn(PORT, timeout=10)
                break
            except ConnectionRefusedError:
                time.sleep(0.1)
        if c.login(raw.decode('utf-8', 'surrogateescape'), T):
            errors.append(f'{raw!r}: login refused')
            return
        lba = 0
        while not stop.is_set():
            c.command(bytes([0x28, 0, 0, 0, lba >> 8 & 0xff, lba & 0xff, 0, 0, 8, 0]), 4096, read=True)
            lba = (lba + 8) % 4096
            time.sleep(0.002)
        c.close()
    except Exception as e:  # noqa: BLE001 - reported as a failed check
        errors.append(f'{raw!r}: {e!r}')


def main():
    if not os.access(PROMETHEUS, os.X_OK):
        check(f'{PROMETHEUS} is installed (Debian package prometheus; tools/deps.sh)', False)
        checks.finish()
    work = checks.workdir('isert-prometheus-')
    cfgfile = os.path.join(work, 'isertd.json')
    with open(cfgfile, 'w') as f:
        json.dump({'global': {'metrics': f'127.0.0.1:{MPORT}'},
                   'backstores': [{'name': 'r0', 'type': 'ram', 'size': '16M'}],
                   'targets': [{'iqn': T, 'tpgs': [{'tag': 1, 'demo_mode': True,
                                                    'portals': [{'ip': '127.0.0.1', 'port': PORT}],
                                                    'luns': [{'lun': 0, 'backstore': 'r0'}]}]}]}, f)
    promcfg = os.path.join(work, 'prometheus.yml')
    with open(promcfg, 'w') as f:
        f.write('global:\n  scrape_interval: 1s\n  scrape_timeout: 1s\n  evaluation_interval: 1s\n'
                f"scrape_configs:\n  - job_name: isertd\n    static_configs:\n      - targets: ['127.0.0.1:{MPORT}']\n")
    plog = open(os.path.join(work, 'prometheus.log'), 'w')
    isertd, _ = start_isertd(ISERTD, work, cfgfile, '-r', '2', admin='none')
    prom = subprocess.Popen([PROMETHEUS, f'--config.file={promcfg}', f'--storage.tsdb.path={work}/tsdb',
                             f'--web.listen-address=127.0.0.1:{PPORT}'], stdout=plog, stderr=subprocess.STDOUT)
    stop, errors, threads = threading.Event(), [], []
    try:
        for raw in HOSTILE:
            t = threading.Thread(target=reader, args=(raw, stop, errors), daemon=True)
            t.start()
            threads.append(t)

        def target_up():
            try:
                ts = api('targets')['data']['activeTargets']
            except (OSError, ValueError, KeyError):
                return None
            return ts if ts and ts[0]['health'] == 'up' and ts[0]['lastScrape'][:4] != '0001' else None
        ts = wait_for(target_up, 20) or []
        check('Prometheus sees the isertd target up', len(ts) == 1 and ts[0]['health'] == 'up', ts)
        check('no scrape error', ts and ts[0].get('lastError') == '', ts and ts[0].get('lastError'))
        up = wait_for(lambda: query('up{job="isertd"} == 1'), 5)
        check('up{job="isertd"} is 1', len(up) == 1, up)
        rate = wait_for(lambda: [v for _, v in query('sum(rate(isert_lun_commands_total{kind="read"}[5s]))') if v > 0],
                        15)
        check('rate(isert_lun_commands_total{kind="read"}[5s]) is above zero while they read', rate and rate[0] > 0,
              rate)
        for name in SHOWN:
            got = wait_for(lambda: [v for _, v in query(f'rate(isert_lun_commands_total{{kind="read",'
                                                        f'initiator={promql_string(name)}}}[5s])') if v > 0], 5)
            check(f'stored as {name!r}, and reading', bool(got), got)
        hist = query('histogram_quantile(0.99, sum by (le) (rate(isert_lun_latency_seconds_bucket{kind="read"}[5s])))')
        check('the LUN\'s latency histogram gives a p99', hist and hist[0][1] > 0, hist)
        start = time.time() - 30
        time.sleep(2)   # one more scrape for the newest rates
        for ok, line in dashboard.check_all(DASHBOARD, f'http://127.0.0.1:{PPORT}', start, time.time(),
                                            absent=('isert_portal_rdma_', 'isert_rdma_')):
            check(f'dashboard: {line}', ok)
        check('every reader ran without error', not errors, errors)
    finally:
        stop.set()
        for t in threads:
            t.join(10)
        prom.kill()
        prom.wait()
        rc = stop_isertd(isertd)
        check('isertd exits 0', rc == 0, f'exit {rc}')
        plog.close()
        if checks.failed:
            for f in ('isertd.log', 'prometheus.log'):
                print(f'--- {f}\n' + open(os.path.join(work, f), errors='replace').read()[-3000:])
        shutil.rmtree(work, ignore_errors=True)
    checks.finish()


if __name__ == '__main__':
    main()
