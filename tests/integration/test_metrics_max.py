#!/usr/bin/env python3
"""/metrics and `stats` at the maximum (docs/security.md, docs/stats.md "What
a scrape costs").  Two reactors, demo mode: initiators whose names are 223
bytes, most of them bytes the endpoint escapes (the longest label a peer can
make), log in until both reactors hold every named row they may (2048 each),
then others fill every rest row (2048 each, on different LUNs so no two
merge) and spill into the overflow row: 8193 rows, the most a snapshot can
hold.  One scrape then stays within the stated bound in bytes, and isertd's
peak RSS (VmHWM, reset just before) grows by less than the stated memory
bound; every command is in it once.  `iserctl stats --json` follows the
pages to every row, and `iserctl stats` prints no control byte.  Once the
first initiators left, new ones take their rows: their counts move to the
rest rows, so no series goes down and each LUN's total stays exact.

usage: test_metrics_max.py ISERTD ISERCTL [PORT]   (ports PORT, PORT+1)"""
import json
import os
import re
import shutil
import subprocess
import sys
import time
import urllib.request

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import iscsi_client as ic  # noqa: E402
import checks  # noqa: E402
from admin_rpc import Rpc, shown, start_isertd, stop_isertd  # noqa: E402
from checks import check, wait_for  # noqa: E402

ISERTD, ISERCTL = sys.argv[1:3]
PORT = int(sys.argv[3]) if len(sys.argv) > 3 else 3550
MPORT = PORT + 1
T = 'iqn.2026-11.org.isert:max'
REACTORS = 2
NAMED, REST = 4096 // REACTORS, 4096 // REACTORS   # each reactor's share of STATS_MAX_NAMED, STATS_MAX_REST
PER_SESSION = 64                                   # LUNs each named-filling session touches
NLUNS = REACTORS * REST + 64                       # each reactor's rest rows on LUNs of its own, and some over

# The stated bounds (docs/stats.md "What a scrape costs"): bytes from the formula, memory in MiB.
ROWS_MAX = 4096 + 4096 + 1
HIST_LUNS = 512
MEM_BOUND = 17 << 20


def name(i):
    """223 bytes: unique, then bytes the endpoint writes as \\xNN (5 bytes each in the exposition)."""
    head = b'iqn.2026-11.org.isert:max%05d:' % i
    tail = bytes([1, 0x1b, 0xff, ord('\\')]) * 64
    return (head + tail)[:223].decode('utf-8', 'surrogateescape')


def label_len(raw):
    """How long a value is in the exposition: each escaped byte \\xNN with its backslash doubled."""
    n = 0
    for b in raw:
        n += 5 if b < 0x20 or b == 0x7f or b == 0x5c or b >= 0x80 else 2 if b == 0x22 else 1
    return n


def bound(target, backstore, initiator_raw):
    """The documented bound of a scrape at the maximum for these names (docs/stats.md, "What a scrape
    costs"): 26 lines a row, 120 a LUN's histograms for 512 LUNs, 64 KiB for the rest."""
    names = label_len(target) + label_len(backstore)
    return (4096 * 26 * (160 + names + label_len(initiator_raw)) + 4097 * 26 * (161 + names) +
            HIST_LUNS * 120 * (180 + names) + 64 * 1024)


def status_kb(pid, key):
    with open(f'/proc/{pid}/status') as f:
        for line in f:
            if line.startswith(key + ':'):
                return int(line.split()[1])
    return 0


def scrape():
    t0 = time.monotonic()
    with urllib.request.urlopen(f'http://127.0.0.1:{MPORT}/metrics', timeout=60) as r:
        body = r.read()
    return body, time.monotonic() - t0


CMD = re.compile(rb'^isert_lun_commands_total\{(.*),kind="(\w+)"\} (\d+)$', re.M)
LUNKEY = re.compile(rb'target="((?:[^"\\]|\\.)*)",tpg="(\d+)",lun="(\d+)",initiator="((?:[^"\\]|\\.)*)",'
                    rb'backstore="((?:[^"\\]|\\.)*)"')


def commands(body):
    """{labels: value} of isert_lun_commands_total, and the sum by LUN (target, tpg, lun, backstore)."""
    series, by_lun = {}, {}
    for m in CMD.finditer(body):
        v = int(m.group(3))
        series[(m.group(1), m.group(2))] = v
        k = LUNKEY.match(m.group(1))
        key = (k.group(1), k.group(2), k.group(3), k.group(5))
        by_lun[key] = by_lun.get(key, 0) + v
    return series, by_lun


def tur_all(c, luns):
    for first in range(0, len(luns), 64):
        batch = luns[first:first + 64]
        for lun in batch:
            c.send(c.scsi_bhs(b'\0' * 6, 0, lun=lun if lun < 256 else 0x4000 | lun))
        for _ in batch:
            op, _, _ = c.recv()
            assert op == ic.OP_SCSI_RSP, op


def reactor_of(rpc, ini):
    """The reactor of ini's connection (looked for among all: a name with bytes that are not UTF-8 cannot be
    a JSON parameter as it is)."""
    conns = rpc.call('stats', {'sections': ['connections']})['result']['connections']
    return [c['reactor'] for c in conns if c['initiator'] == shown(ini.encode('utf-8', 'surrogateescape'))][0]


def main():
    work = checks.workdir('isert-metrics-max-')
    cfgfile = os.path.join(work, 'isertd.json')
    cfg = {'global': {'metrics': f'127.0.0.1:{MPORT}', 'max_connections_per_host': 1024},
           'backstores': [{'name': 'b%d' % i, 'type': 'ram', 'size': '64K'} for i in range(64)],
           'targets': [{'iqn': T, 'tpgs': [{'tag': 1, 'demo_mode': True,
                                            'portals': [{'ip': '127.0.0.1', 'port': PORT}],
                                            'luns': [{'lun': i, 'backstore': 'b%d' % (i % 64)}
                                                     for i in range(NLUNS)]}]}]}
    with open(cfgfile, 'w') as f:
        json.dump(cfg, f)
    proc, sock = start_isertd(ISERTD, work, cfgfile, '-r', str(REACTORS), seconds=10)
    rpc = Rpc(sock)
    conns, sent = [], 0
    try:
        # Named rows: sessions on 64 LUNs each until every reactor had more pairs than its share.  Each
        # reactor's on LUNs of its own, so what its sessions past the share put in rest rows merges with
        # nothing of the other reactor's.
        t0 = time.monotonic()
        pairs, i = [0] * REACTORS, 0
        while min(pairs) < NAMED + PER_SESSION:
            c = ic.Conn(PORT, timeout=30)
            assert c.login(name(i), T) == 0, 'login'
            r = reactor_of(rpc, name(i))
            tur_all(c, list(range(r * REST, r * REST + PER_SESSION)))
            sent += PER_SESSION
            pairs[r] += PER_SESSION
            conns.append(c)
            i += 1
        first_named = i
        # Rest rows: on each reactor one session on REST + 32 LUNs of its own (none merge across reactors).
        done = set()
        while len(done) < REACTORS:
            c = ic.Conn(PORT, timeout=30)
            assert c.login(name(i), T) == 0, 'login'
            r = reactor_of(rpc, name(i))
            if r not in done:
                luns = list(range(r * REST, r * REST + REST + 32))
                tur_all(c, luns)
                sent += len(luns)
                done.add(r)
            conns.append(c)
            i += 1
        print(f'{i} sessions, {sent} commands in {time.monotonic() - t0:.1f} s')

        rows, pages = rpc.stats_rows()
        kinds = {k: sum(r.get('row', 'initiator') == k for r in rows) for k in ('initiator', 'rest', 'overflow')}
        check(f'the maximum: {ROWS_MAX} rows (4096 named, 4096 rest, the overflow row)',
              kinds == {'initiator': 4096, 'rest': 4096, 'overflow': 1}, kinds)
        check('stats: every command in the rows once', sum(r['commands']['other'] for r in rows) == sent,
              (sum(r['commands']['other'] for r in rows), sent))
        check(f'stats: {pages} pages of at most 512 rows', pages == -(-len(rows) // 512), pages)

        # One scrape at the maximum, its memory measured from a peak reset just before.
        with open(f'/proc/{proc.pid}/clear_refs', 'w') as f:
            f.write('5')
        rss0 = status_kb(proc.pid, 'VmRSS')
        body, secs = scrape()
        grew = (status_kb(proc.pid, 'VmHWM') - rss0) << 10
        raw = name(0).encode('utf-8', 'surrogateescape')
        limit = bound(T.encode(), b'b63', raw)
        print(f'scrape: {len(body)} bytes ({len(body) / 2**20:.1f} MiB) in {secs:.2f} s; '
              f'isertd peak RSS +{grew / 2**20:.1f} MiB (bound {limit / 2**20:.1f} MiB, {MEM_BOUND >> 20} MiB)')
        check(f'scrape: {len(body)} bytes, within the bound for these names ({limit})', len(body) <= limit)
        # An ASan build's allocator adds redzones to every block: the bound is the plain build's.
        asan = 'libasan' in open(f'/proc/{proc.pid}/maps').read()
        mem = MEM_BOUND * 3 // 2 if asan else MEM_BOUND
        check(f'scrape: isertd peak RSS grew {grew >> 20} MiB, within {mem >> 20} MiB{" (ASan: 1.5 x)" if asan else ""}',
              grew <= mem)
        try:
            body.decode('utf-8')
            utf8 = True
        except UnicodeDecodeError:
            utf8 = False
        check('scrape: valid UTF-8, no control byte but newlines', utf8 and not re.search(rb'[\x00-\x09\x0b-\x1f\x7f]', body))
        series1, lun1 = commands(body)
        check('scrape: every command once', sum(series1.values()) == sent, (sum(series1.values()), sent))
        hists = body.count(b'\nisert_lun_latency_seconds_count{')
        check(f'scrape: latency histograms for {HIST_LUNS} LUNs (2 kinds each)', hists == 2 * HIST_LUNS, hists)

        # iserctl follows the pages; its text carries no control byte.
        p = subprocess.run([ISERCTL, '-s', sock, 'stats', '--json'], capture_output=True, timeout=120)
        try:
            js = json.loads(p.stdout.decode('utf-8'))
        except ValueError:
            js = {}
        check('iserctl stats --json: every row, from every page', p.returncode == 0 and
              len(js.get('luns', [])) == ROWS_MAX and 'more' not in js and 'cursor' not in js,
              (p.returncode, len(js.get('luns', [])), p.stderr[-300:]))
        p = subprocess.run([ISERCTL, '-s', sock, 'stats'], capture_output=True, timeout=120)
        check('iserctl stats: no control byte in its text, names shown as \\xNN',
              p.returncode == 0 and not re.search(rb'[\x00-\x09\x0b-\x1f\x7f]', p.stdout) and
              b'max00000:\\x01\\x1b\\xff\\x5c' in p.stdout, p.stdout[:300])

        # The first sessions leave; as many new initiators take their places (their rows folded into rest).
        for c in conns[:8]:
            c.close()
        # Their rows fold only once the target has seen their sessions end.
        wait_for(lambda: sum(r['connections'] for r in rpc.call('stats', {'sections': ['reactors']})['result']
                             ['reactors']) == len(conns) - 8)
        for k in range(8):
            c = ic.Conn(PORT, timeout=30)
            assert c.login(name(10000 + k), T) == 0
            r = reactor_of(rpc, name(10000 + k))
            tur_all(c, list(range(r * REST, r * REST + PER_SESSION)))
            sent += PER_SESSION
            conns.append(c)
        body2, _ = scrape()
        series2, lun2 = commands(body2)
        check('after folds: every command once', sum(series2.values()) == sent, (sum(series2.values()), sent))
        down = [k for k, v in series1.items() if k in series2 and series2[k] < v]
        check('after folds: no series went down', not down, down[:3])
        check('after folds: each LUN\'s total the same or more', all(lun2.get(k, 0) >= v for k, v in lun1.items()))
        mine = [k for k in series2 if b'max10000' in k[0]]
        check('after folds: the new initiators have rows of their own', len(mine) == 3 * PER_SESSION, len(mine))
        gone = [k for k in series2 if b'max00000:' in k[0]]
        check('after folds: the first initiator\'s rows were folded', not gone, gone[:2])
        check('isertd still runs', proc.poll() is None)
    finally:
        for c in conns:
            c.close()
        rc = stop_isertd(proc, 30)
        check('isertd exits 0 on SIGTERM', rc == 0, f'exit {rc}')
        if checks.failed:
            print(open(os.path.join(work, 'isertd.log')).read()[-3000:])
        shutil.rmtree(work, ignore_errors=True)
    checks.finish()


if __name__ == '__main__':
    main()
