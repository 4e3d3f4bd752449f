#!/usr/bin/env python3
"""The Prometheus endpoint (global.metrics, docs/stats.md "Prometheus").
isertd serves GET /metrics on a loopback port: promtool accepts the body,
a known workload from our Python initiator shows up exactly, counters move
under iscsi-perf, every histogram's _count equals its command counter once
idle, other paths are 404 and other methods 405; without global.metrics
nothing listens; a bad value or a port in use stops the start with the
field named; every metric the Grafana dashboard queries exists.  Initiators
with hostile names (controls, bytes that are not UTF-8, quotes, backslashes)
leave the scrape valid UTF-8 for promtool, each name shown as documented;
one address holding connections open leaves room for a scrape from another.

usage: test_metrics.py ISERTD [PORT]   (ports PORT..PORT+9)"""
import json
import os
import re
import shutil
import socket
import struct
import subprocess
import sys
import time
import urllib.error
import urllib.request

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import iscsi_client as ic  # noqa: E402
import checks  # noqa: E402
from admin_rpc import port_open, shown, start_isertd, stop_isertd  # noqa: E402
from checks import check, wait_for  # noqa: E402

ISERTD = sys.argv[1]
PORT = int(sys.argv[2]) if len(sys.argv) > 2 else 3490
MPORT = PORT + 1                      # the metrics endpoint
T = 'iqn.2026-11.org.isert:metrics'
INI = 'iqn.2026-11.org.isert:metrics-client'
SRC = os.path.dirname(os.path.abspath(__file__))
DASHBOARD = os.path.join(SRC, '..', '..', 'configs', 'grafana', 'isertd.json')


def config(port, metrics=None):
    c = {'backstores': [{'name': 'r0', 'type': 'ram', 'size': '16M'}, {'name': 'r1', 'type': 'ram', 'size': '16M'}],
         'targets': [{'iqn': T, 'tpgs': [{'tag': 1, 'enable': True, 'demo_mode': True,
                                          'portals': [{'ip': '127.0.0.1', 'port': port}],
                                          'luns': [{'lun': 0, 'backstore': 'r0'}, {'lun': 1, 'backstore': 'r1'}]}]}]}
    if metrics is not None:
        c['global'] = {'metrics': metrics}
    return c


def start(work, name, cfg, *extra):
    path = os.path.join(work, name + '.json')
    with open(path, 'w') as f:
        json.dump(cfg, f)
    log = open(os.path.join(work, name + '.log'), 'w+')
    return start_isertd(ISERTD, work, path, '-r', '2', *extra, admin='none', log=log)[0], log


def stop(proc, log):
    rc = stop_isertd(proc)
    log.seek(0)
    return rc, log.read()


def wait_port(port, secs=5):
    return wait_for(lambda: port_open(port), secs)


def get_bytes(path='/metrics', method='GET'):
    """(status, content type, body as bytes)."""
    req = urllib.request.Request(f'http://127.0.0.1:{MPORT}{path}', method=method)
    try:
        with urllib.request.urlopen(req, timeout=10) as r:
            return r.status, r.headers.get('Content-Type'), r.read()
    except urllib.error.HTTPError as e:
        return e.code, e.headers.get('Content-Type'), e.read()


def get(path='/metrics', method='GET'):
    """(status, content type, body) of a request to the endpoint."""
    req = urllib.request.Request(f'http://127.0.0.1:{MPORT}{path}', method=method)
    try:
        with urllib.request.urlopen(req, timeout=10) as r:
            return r.status, r.headers.get('Content-Type'), r.read().decode()
    except urllib.error.HTTPError as e:
        return e.code, e.headers.get('Content-Type'), e.read().decode()


SAMPLE = re.compile(r'^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})? (\S+)$')
LABEL = re.compile(r'([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"')


def parse(body):
    """{(name, frozenset of labels): value} and the families announced by # TYPE."""
    samples, families = {}, set()
    for line in body.splitlines():
        if line.startswith('# TYPE '):
            families.add(line.split()[2])
        elif line and not line.startswith('#'):
            m = SAMPLE.match(line)
            samples[(m.group(1), frozenset(LABEL.findall(m.group(2) or '')))] = float(m.group(3))
    return samples, families


def total(samples, name, **want):
    """Sum of a family's samples whose labels include want."""
    return sum(v for (n, labels), v in samples.items()
               if n == name and all((k, str(x)) in labels for k, x in want.items()))


def scrape():
    status, _, body = get()
    if status != 200:
        raise RuntimeError(f'/metrics answered {status}: {body}')
    return parse(body)


def promtool_check(body):
    tool = shutil.which('promtool')
    if not tool:
        check('promtool is installed (Debian package prometheus; tools/deps.sh)', False, 'not found in PATH')
        return
    p = subprocess.run([tool, 'check', 'metrics'], input=body, capture_output=True, text=True)
    check('promtool check metrics accepts the body', p.returncode == 0, p.stdout + p.stderr)


def listening_ports(pid):
    """TCP ports the process listens on (its socket inodes against /proc/net/tcp*)."""
    inodes = set()
    for fd in os.listdir(f'/proc/{pid}/fd'):
        try:
            m = re.match(r'socket:\[(\d+)\]', os.readlink(f'/proc/{pid}/fd/{fd}'))
        except OSError:
            continue
        if m:
            inodes.add(m.group(1))
    ports = set()
    for tab in ('/proc/net/tcp', '/proc/net/tcp6'):
        with open(tab) as f:
            for row in f.readlines()[1:]:
                col = row.split()
                if col[3] == '0A' and col[9] in inodes:
                    ports.add(int(col[1].rsplit(':', 1)[1], 16))
    return ports


def known_workload():
    """4 KiB reads and writes on LUN 0 by INI, counted here: {kind: (commands, those GOOD)}."""
    c = ic.Conn(PORT)
    st = c.login(INI, T)
    if st:
        raise RuntimeError(f'login status {st:#x}')
    n = {'read': [0, 0], 'write': [0, 0]}
    for kind, op, count in (('write', 0x2A, 10), ('read', 0x28, 25)):
        for i in range(count):
            cdb = bytes([op, 0]) + struct.pack('>I', i * 8) + bytes([0, 0, 8, 0])
            s, _, _ = c.command(cdb, 4096, read=kind == 'read', write_data=os.urandom(4096) if kind == 'write' else None)
            n[kind][0] += 1
            n[kind][1] += s == 0  # a unit attention after login is a command too, with no data
    c.close()
    return n


# Names a peer may log in with (any byte but NUL): controls, bytes that are not UTF-8, the format's specials.
HOSTILE = [b'iqn.2026-11.org.test:esc\x1b[31mred\x07', b'iqn.2026-11.org.test:cr\rlf\nend',
           b'iqn.2026-11.org.test:bad\xff\xfe\xc0\x80', b'iqn.2026-11.org.test:q"uo\\te',
           b'iqn.2026-11.org.test:c1\xc2\x9b2J', b'iqn.2026-11.org.test:caf\xc3\xa9', b'*']


def unquote(v):
    """A label value as the format reads it back."""
    return re.sub(r'\\(.)', lambda m: {'n': '\n'}.get(m.group(1), m.group(1)), v)


def hostile_names():
    """Initiators with HOSTILE names read LUN 0: the scrape is valid UTF-8 without control bytes, promtool
    accepts it, each name is its documented shown form; '*' counts in LUN 0's rest row."""
    for raw in HOSTILE:
        c = ic.Conn(PORT)
        st = c.login(raw.decode('utf-8', 'surrogateescape'), T)
        check(f'hostile name {raw!r} logs in', st == 0, hex(st))
        if not st:
            c.command(bytes([0x28, 0, 0, 0, 0, 0, 0, 0, 8, 0]), 4096, read=True)
        c.close()
    time.sleep(0.2)
    status, _, body = get_bytes()
    try:
        text = body.decode('utf-8')
    except UnicodeDecodeError as e:
        text = None
        check('the scrape is valid UTF-8', False, e)
    if text is None:
        return
    check('the scrape is valid UTF-8, no control byte but the newlines', status == 200 and
          not re.search(r'[\x00-\x09\x0b-\x1f\x7f-\x9f]', text))
    promtool_check(text)
    names = {unquote(v) for n, v in re.findall(r'(initiator)="((?:[^"\\]|\\.)*)"', text)}
    for raw in HOSTILE[:-1]:
        check(f'{raw!r} is the label {shown(raw)!r}', shown(raw) in names, sorted(names)[:10])
    s, _ = parse(text), None
    rest = total(s[0], 'isert_lun_commands_total', lun=0, initiator='*', kind='read')
    check('an initiator named "*" has no row of its own: its read counts in the rest row', rest == 1, rest)


def slots():
    """One address holds as many connections as it can (16, the old total), requests left unfinished: the
    endpoint keeps 4 of them (MHD_OPTION_PER_IP_CONNECTION_LIMIT), and a scrape from another address works."""
    held = []
    for _ in range(16):
        try:
            s = socket.create_connection(('127.0.0.1', MPORT), timeout=2, source_address=('127.0.0.2', 0))
            s.sendall(b'GET /metrics HTTP/1.1\r\nHost: x\r\n')  # never finished
            held.append(s)
        except OSError:
            pass
    time.sleep(0.5)
    open_ = 0
    for s in held:
        s.settimeout(0.3)
        try:
            open_ += s.recv(1) != b''
        except socket.timeout:
            open_ += 1
        except OSError:
            pass
    check(f'one address holds at most 4 connections of the endpoint ({open_} of 16 left open)', open_ <= 4, open_)
    t0 = time.monotonic()
    try:
        status, _, body = get_bytes()
    except OSError as e:
        status, body = None, repr(e).encode()
    took = time.monotonic() - t0
    # At once: not after the held ones' idle timeout (10 s) freed a slot.
    check(f'a scrape from another address works at once while they are held ({took:.1f} s)',
          status == 200 and b'isert_up 1' in body and took < 3, f'{status} {body[:200]}')
    for s in held:
        s.close()


def dashboard_names():
    with open(DASHBOARD) as f:
        dash = json.load(f)
    exprs = [t['expr'] for p in dash['panels'] for t in p.get('targets', [])]
    exprs += [v['definition'] for v in dash.get('templating', {}).get('list', []) if 'definition' in v]
    return {re.sub(r'_(bucket|sum|count)$', '', n) if n.endswith('_seconds_bucket') or
            n.endswith('_seconds_sum') or n.endswith('_seconds_count') else n
            for e in exprs for n in re.findall(r'\bisert_[a-z0-9_]+', e)}


def main():
    work = checks.workdir('isert-metrics-')
    proc, log = start(work, 'on', config(PORT, f'127.0.0.1:{MPORT}'))
    perf = None
    try:
        check('the endpoint listens on 127.0.0.1', wait_port(MPORT))
        status, ctype, body = get()
        check('GET /metrics: 200', status == 200, f'{status} {body[:200]}')
        check('Content-Type is the text format 0.0.4', ctype == 'text/plain; version=0.0.4; charset=utf-8', ctype)
        promtool_check(body)
        check('isert_up 1', 'isert_up 1\n' in body)
        st, _, b = get('/other')
        check('/other: 404', st == 404, f'{st} {b}')
        st, _, b = get('/metrics', 'POST')
        check('POST /metrics: 405', st == 405, f'{st} {b}')
        st, _, b = get('/metrics', 'HEAD')
        check('HEAD /metrics: 200, no body', st == 200 and b == '', f'{st} {b[:100]}')

        # A known workload: exactly what the client did, in the counters and histograms.
        n = known_workload()
        reads = n['read'][0]
        time.sleep(0.2)
        s, fams = scrape()
        lun0 = {'target': T, 'lun': 0, 'initiator': INI}
        got = {k: total(s, 'isert_lun_commands_total', kind=k, **lun0) for k in n}
        check(f'isert_lun_commands_total: the {n["read"][0]} reads and {n["write"][0]} writes of the client',
              got == {k: v[0] for k, v in n.items()}, f'{got}')
        check('isert_lun_read_bytes_total: GOOD reads x 4096',
              total(s, 'isert_lun_read_bytes_total', **lun0) == n['read'][1] * 4096)
        check('isert_lun_written_bytes_total: GOOD writes x 4096',
              total(s, 'isert_lun_written_bytes_total', **lun0) == n['write'][1] * 4096)
        hist0 = {'target': T, 'lun': 0}  # histograms are the LUN's (only INI used LUN 0)
        for kind, (cmds, _) in n.items():
            check(f'latency histogram: {kind} _count and +Inf bucket = the {kind}s',
                  total(s, 'isert_lun_latency_seconds_count', kind=kind, **hist0) == cmds and
                  total(s, 'isert_lun_latency_seconds_bucket', kind=kind, le='+Inf', **hist0) == cmds)
        check('latency histograms have no initiator label (one per LUN)',
              not any(n.startswith('isert_lun_latency') and 'initiator' in dict(lb) for n, lb in s))
        promtool_check(get()[2])  # again, now with LUN, histogram and portal samples
        check('latency _sum is in seconds (under 1 s a command on a RAM LUN)',
              0 < total(s, 'isert_lun_latency_seconds_sum', kind='read', **hist0) < reads)
        check('a login accepted on the portal', total(s, 'isert_portal_logins_total', result='accepted',
                                                      portal=f'127.0.0.1:{PORT}') >= 1)
        check('PDUs and bytes counted on the portal', total(s, 'isert_portal_pdus_received_total') > reads + n['write'][0]
              and total(s, 'isert_portal_sent_bytes_total') >= reads * 4096)
        check('no per-connection series', not any('tsih' in dict(lb) or 'peer' in dict(lb) for _, lb in s))

        # Under load: iscsi-perf on LUN 1, two scrapes a second apart.
        if not shutil.which('iscsi-perf'):
            check('iscsi-perf is installed (libiscsi-bin)', False)
        else:
            perf = subprocess.Popen(['iscsi-perf', '-i', 'iqn.2026-11.org.test:perf', '-x', '0',
                                     f'iscsi://127.0.0.1:{PORT}/{T}/1'], stdout=subprocess.DEVNULL,
                                    stderr=subprocess.DEVNULL)
            # Once iscsi-perf reads (its login is its own business), two scrapes a second apart.
            wait_for(lambda: total(scrape()[0], 'isert_lun_commands_total', lun=1, kind='read') > 0)
            a, _ = scrape()
            time.sleep(1)
            b, _ = scrape()
            ra = total(a, 'isert_lun_commands_total', lun=1, kind='read')
            rb = total(b, 'isert_lun_commands_total', lun=1, kind='read')
            check('isert_lun_commands_total grows under load between two scrapes', 0 < ra < rb, f'{ra} -> {rb}')
            perf.send_signal(2)
            perf.wait(10)
            # Its last commands end, and its connection, as the target sees it go.
            wait_for(lambda: total(scrape()[0], 'isert_lun_commands_in_flight') == 0)
            s, _ = scrape()
            for kind in ('read', 'write'):  # only iscsi-perf used LUN 1
                n = total(s, 'isert_lun_commands_total', kind=kind, lun=1)
                c = total(s, 'isert_lun_latency_seconds_count', kind=kind, lun=1)
                check(f'idle: histogram {kind} _count = commands ({int(n)})', n == c, f'{c}')
            check('idle: nothing in flight', total(s, 'isert_lun_commands_in_flight') == 0)

        hostile_names()
        slots()

        # The dashboard cannot rot: every name it queries is a family of this endpoint.
        names = dashboard_names()
        missing = sorted(n for n in names if n not in fams)
        check(f'every metric of configs/grafana/isertd.json ({len(names)}) is served', names and not missing,
              f'missing: {missing}')
    finally:
        if perf and perf.poll() is None:
            perf.kill()
        rc, out = stop(proc, log)
        check('isertd exits 0 on SIGTERM', rc == 0, f'exit {rc}')
        if checks.failed:
            print(out[-3000:])

    # Without global.metrics nothing listens but the portal.
    proc, log = start(work, 'off', config(PORT + 2))
    wait_port(PORT + 2)
    ports = listening_ports(proc.pid)
    check('default (no global.metrics): only the portal listens', ports == {PORT + 2}, f'{ports}')
    stop(proc, log)

    # Refused at start, the field named: a bad value, and a port in use.
    proc, log = start(work, 'bad', config(PORT + 3, 'localhost:9100'))
    rc = proc.wait(10)
    _, out = stop(proc, log)
    check('a bad global.metrics stops the start, naming the field', rc != 0 and 'global.metrics' in out, out)
    busy = socket.socket()
    busy.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    busy.bind(('127.0.0.1', PORT + 4))
    busy.listen(1)
    proc, log = start(work, 'busy', config(PORT + 3, str(PORT + 4)))
    rc = proc.wait(10)
    _, out = stop(proc, log)
    busy.close()
    check('a port in use stops the start: global.metrics and the address named',
          rc != 0 and 'global.metrics' in out and f'127.0.0.1:{PORT + 4}' in out, out)
    shutil.rmtree(work, ignore_errors=True)
    checks.finish()


if __name__ == '__main__':
    main()
