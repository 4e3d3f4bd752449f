#!/usr/bin/env python3
"""iserctl stats and top, and iserbench --target-stats, against a running
isertd with libiscsi's iscsi-perf reading one LUN: the JSON and the text name
the loaded LUN, top's batch frames show it reading, the interactive view is
on screen in a tmux pane and quits on q and on Ctrl-C with the terminal mode
back, stats reset zeroes the counters, and iserbench's target-side figures are
there with the target's command counts equal to what iserbench completed.
Initiators with names full of terminal escapes and bytes that are not UTF-8
leave no control byte in what iserctl prints (stats, top, sessions, ls, --json).
No timing is asserted beyond "reads happened while the load ran".

usage: test_top.py ISERTD ISERCTL ISERBENCH [PORT]"""
import json
import os
import re
import shutil
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import checks  # noqa: E402
import iscsi_client as ic  # noqa: E402
from admin_rpc import Rpc, start_isertd, stop_isertd  # noqa: E402
from checks import check, wait_for  # noqa: E402

ISERTD, ISERCTL, ISERBENCH = sys.argv[1:4]
PORT = int(sys.argv[4]) if len(sys.argv) > 4 else 3485
T = 'iqn.2026-11.org.isert:top'
PERF, BENCH = 'iqn.2026-11.org.test:perf', 'iqn.2026-11.org.test:bench'
LUN0, LUN1 = f'{T}/tpg1/lun0', f'{T}/tpg1/lun1'


def iserctl(sock, *args):
    p = subprocess.run([ISERCTL, '-s', sock, *args], capture_output=True, text=True, timeout=30)
    return p.returncode, p.stdout, p.stderr


def iserctl_bytes(sock, *args):
    p = subprocess.run([ISERCTL, '-s', sock, *args], capture_output=True, timeout=60)
    return p.returncode, p.stdout, p.stderr


# Initiator names with terminal escapes (a title, a screen clear, colours), CR, bytes that are not UTF-8, C1 CSI.
HOSTILE = [b'iqn.2026-11.org.test:t\x1b]0;owned\x07', b'iqn.2026-11.org.test:cls\x1b[2J\x1b[H',
           b'iqn.2026-11.org.test:cr\rover', b'iqn.2026-11.org.test:b\xff\x9b31m', b'iqn.2026-11.org.test:c1\xc2\x9b1m',
           b'iqn.2026-11.org.test:nl\nx"\\']
CONTROL = re.compile(r'[\x00-\x09\x0b-\x1f\x7f-\x9f\udc80-\udc9f]')


def terminal_safe(out):
    """No control byte but newlines: C0, DEL, C1 as UTF-8 and as single bytes; the text otherwise as it is."""
    return not CONTROL.search(out.decode('utf-8', 'surrogateescape'))


def hostile(sock):
    """Sessions of initiators with HOSTILE names, each having read LUN 0: what iserctl prints of them
    (stats, stats --json, top, sessions, ls) carries no control byte; the text is UTF-8, the names in it
    as /metrics shows them (\\xNN), and that form given to --initiator finds the initiator."""
    conns = []
    for raw in HOSTILE:
        c = ic.Conn(PORT)
        st = c.login(raw.decode('utf-8', 'surrogateescape'), T)
        check(f'hostile name {raw!r} logs in', st == 0, hex(st))
        c.command(bytes([0x28, 0, 0, 0, 0, 0, 0, 0, 8, 0]), 4096, read=True)
        conns.append(c)
    for args in (['stats'], ['top', '-b', '-n', '1', '-d', '0.5', '--by', 'initiator'], ['sessions'], ['ls'],
                 ['stats', '--json'], ['--json', 'sessions'], ['--json', 'ls']):
        rc, out, err = iserctl_bytes(sock, *args)
        check(f'iserctl {" ".join(args)}: exit 0, no control byte in what it prints', rc == 0 and
              terminal_safe(out) and terminal_safe(err), (rc, out[:400], err[:200]))
        if '--json' not in args:
            try:
                out.decode('utf-8')
                ok = True
            except UnicodeDecodeError:
                ok = False
            check(f'iserctl {" ".join(args)}: the text is UTF-8', ok)
    rc, out, _ = iserctl_bytes(sock, 'stats')
    check('iserctl stats: names shown as \\xNN', b'iqn.2026-11.org.test:t\\x1b]0;owned\\x07' in out and
          b'iqn.2026-11.org.test:b\\xff\\x9b31m' in out and b'nl\\x0ax"\\x5c' in out, out[:600])
    rc, out, _ = iserctl_bytes(sock, 'stats', '--json')
    rows = json.loads(out.decode('utf-8'))['luns']
    got = {r['initiator'] for r in rows}
    check('iserctl stats --json: valid UTF-8 JSON, the names in their shown form (as isertd answers them)',
          'iqn.2026-11.org.test:t\\x1b]0;owned\\x07' in got and 'iqn.2026-11.org.test:b\\xff\\x9b31m' in got and
          'iqn.2026-11.org.test:nl\\x0ax"\\x5c' in got and 'iqn.2026-11.org.test:c1\\xc2\\x9b1m' in got, sorted(got)[:8])
    rc, out, _ = iserctl_bytes(sock, '--json', 'stats', '--initiator', 'iqn.2026-11.org.test:cr\\x0dover')
    rows = json.loads(out.decode('utf-8', 'surrogateescape')).get('luns', []) if rc == 0 else []
    check('iserctl stats --initiator takes the name as shown', len(rows) == 1 and
          rows[0]['initiator'] == 'iqn.2026-11.org.test:cr\\x0dover', (rc, out[:300]))
    for c in conns:
        c.close()


def lun_rows(frame_text, name):
    """The numbers of name's line in top frames: one list per frame."""
    rows = []
    for line in frame_text.splitlines():
        f = line.split()
        if f and f[-1] == name:
            rows.append(f)
    return rows


class Tmux:
    """A private tmux server (its own socket) holding one pane of a fixed size."""

    def __init__(self, name):
        self.base = ['tmux', '-L', name]

    def run(self, *args):
        return subprocess.run(self.base + list(args), capture_output=True, text=True, timeout=10)

    def screen(self):
        return self.run('capture-pane', '-p', '-t', 'top').stdout

    def kill(self):
        self.run('kill-server')


def interactive(sock, work, key):
    """iserctl top in a 150x40 pane; key quits it. Exit status, stty after, and the screen before the key."""
    rcfile, sttyfile = os.path.join(work, f'rc.{key}'), os.path.join(work, f'stty.{key}')
    # The shell records iserctl's status and then the pane's terminal mode as iserctl left it.
    cmd = f"{ISERCTL} -s {sock} top -d 1; echo $? > {rcfile}; stty -a > {sttyfile}; sleep 60"
    tm = Tmux(f'isert-top-{PORT}')
    tm.kill()
    started = tm.run('new-session', '-d', '-s', 'top', '-x', '150', '-y', '40', cmd)
    if started.returncode:
        return None, '', started.stderr
    try:
        def lun_on_screen():
            s = tm.screen()
            return s if 'iserctl top -' in s and LUN0 in s else None
        shown = wait_for(lun_on_screen, 10) or tm.screen()
        tm.run('send-keys', '-t', 'top', key)
        wait_for(lambda: os.path.exists(sttyfile) and os.path.getsize(sttyfile) > 0, 10)
        rc = open(rcfile).read().strip() if os.path.exists(rcfile) else None
        mode = open(sttyfile).read() if os.path.exists(sttyfile) else ''
        return rc, mode, shown
    finally:
        tm.kill()


def main():
    work = checks.workdir('isert-top-')
    cfgfile = os.path.join(work, 'isertd.json')
    with open(cfgfile, 'w') as f:
        json.dump({'backstores': [{'name': 'r0', 'type': 'ram', 'size': '32M'},
                                  {'name': 'r1', 'type': 'ram', 'size': '16M'}],
                   'targets': [{'iqn': T, 'tpgs': [{'tag': 1, 'enable': True, 'demo_mode': True,
                                                    'portals': [{'ip': '127.0.0.1', 'port': PORT}],
                                                    'luns': [{'lun': 0, 'backstore': 'r0'},
                                                             {'lun': 1, 'backstore': 'r1'}]}]}]}, f)
    proc, sock = start_isertd(ISERTD, work, cfgfile, '-r', '2')
    perf = None
    try:
        rc, _, err = iserctl(os.path.join(work, 'nothing.sock'), 'stats')
        check('no socket: exit 3 and what to do', rc == 3 and 'see --socket' in err, f'{rc} {err}')

        # Load: iscsi-perf reads LUN 0 (its default is reads) until stopped.
        perf = subprocess.Popen(['iscsi-perf', '-i', PERF, '-x', '0', f'iscsi://127.0.0.1:{PORT}/{T}/0'],
                                stdout=subprocess.DEVNULL, stderr=subprocess.STDOUT)
        rpc = Rpc(sock)
        wait_for(lambda: any(x['lun'] == 0 and x['initiator'] == PERF and x['commands']['read'] > 0
                             for x in rpc.call('stats', {'sections': ['luns']})['result']['luns']))

        rc, out, err = iserctl(sock, 'stats', '--json')
        try:
            st = json.loads(out)
        except ValueError:
            st = {}
        check('stats --json: exit 0 and JSON', rc == 0 and 'luns' in st, f'{rc} {err} {out[:200]}')
        mine = [x for x in st.get('luns', []) if x['target'] == T and x['lun'] == 0 and x['initiator'] == PERF]
        check('stats --json: the loaded LUN with reads', len(mine) == 1 and mine[0]['commands']['read'] > 0,
              json.dumps(mine)[:300])
        rc, out, _ = iserctl(sock, 'stats', '--initiator', PERF, '--json')
        got = json.loads(out).get('luns', []) if rc == 0 else []
        check('stats --initiator: only that initiator', got and all(x['initiator'] == PERF for x in got), out[:300])

        rc, out, err = iserctl(sock, 'stats')
        check('stats: the text names the LUN and its initiator', rc == 0 and f'{LUN0} (r0) from {PERF}' in out and
              'latency us' in out and 'Portals [1]' in out, f'{rc} {err} {out[:500]}')

        rc, out, err = iserctl(sock, 'top', '-b', '-n', '2', '-d', '1')
        frames = out.count('iserctl top - ')
        rows = lun_rows(out, LUN0)
        check('top -b -n 2 -d 1: two frames, exit 0', rc == 0 and frames == 2, f'{rc} {err} {out}')
        check('top -b: the loaded LUN reads in each frame', len(rows) == 2 and all(float(r[0]) > 0 for r in rows),
              out)
        check('top -b: columns as documented', 'r/s' in out and 'r_p99_us' in out and 'TARGET/tpgN/lunM' in out, out)
        rc, out, _ = iserctl(sock, 'top', '-b', '-n', '1', '-d', '0.5', '--by', 'initiator')
        check('top --by initiator: the reading initiator', rc == 0 and lun_rows(out, PERF) and
              float(lun_rows(out, PERF)[0][0]) > 0, out)
        rc, _, err = iserctl(sock, 'top', '-d', '0')
        check('top -d 0: a usage error', rc == 2 and '-d' in err, err)

        if not shutil.which('tmux'):
            check('tmux is installed (tools/deps.sh) for the interactive view', False)
        for key, what in (('q', 'q'), ('C-c', 'Ctrl-C')):
            rc, mode, shown = interactive(sock, work, key)
            check(f'top in tmux: the header and the LUN line on screen ({what})',
                  'iserctl top -' in shown and 'r/s' in shown and LUN0 in shown, shown)
            check(f'top in tmux: {what} ends it with status 0', rc == '0', f'status {rc}')
            check(f'top in tmux: after {what} the terminal is back in canonical mode with echo',
                  ' icanon' in f' {mode}' and ' echo ' in f' {mode} ' and '-icanon' not in mode and
                  '-echo ' not in mode, mode[:300])

        perf.send_signal(2)
        perf.wait(10)
        perf = None
        # Idle once the target has seen its session end: no command of it left to count after the reset.
        wait_for(lambda: not rpc.call('sessions')['result']['sessions'])
        rc, out, err = iserctl(sock, 'stats', 'reset')
        check('stats reset: exit 0', rc == 0 and 'reset' in out, f'{rc} {err}')
        st = json.loads(iserctl(sock, 'stats', '--json')[1])
        counts = [(x['lun'], x['initiator'], x['commands']) for x in st['luns']]
        check('after reset, idle: every command counter is 0',
              all(c == {'read': 0, 'write': 0, 'other': 0} for _, _, c in counts), json.dumps(counts))

        # iserbench with the target's view: 70 % reads on LUN 1 for 3 s.
        parm = os.path.join(work, 'b.parm')
        with open(parm, 'w') as f:
            f.write(f'sd=sd1,lun=iscsi://127.0.0.1:{PORT}/{T}/1,threads=4\n'
                    'wd=w1,sd=sd1,xfersize=4k,rdpct=70\nrd=r1,wd=w1,iorate=max,elapsed=3,interval=1\n')
        outdir = os.path.join(work, 'bench')
        p = subprocess.run([ISERBENCH, '-f', parm, '-o', outdir, '-i', BENCH, '--target-stats', sock],
                           capture_output=True, text=True, timeout=60)
        check('iserbench --target-stats: exit 0', p.returncode == 0, p.stdout[-1000:] + p.stderr)
        check('iserbench: target columns in the header', 'tgt rd' in p.stdout and 'p99' in p.stdout, p.stdout[:600])
        lines = [ln.split() for ln in p.stdout.splitlines()
                 if len(ln.split()) == 18 and (ln.split()[1].isdigit() or ln.split()[1].startswith('avg_'))]
        check('iserbench: 3 interval lines and the average, each with 4 numeric target columns',
              len(lines) == 4 and all(all(float(v) >= 0 for v in ln[-4:]) for ln in lines), p.stdout)
        flat = open(os.path.join(outdir, 'flatfile.txt')).read().splitlines()
        head = flat[0].split()
        check('flatfile: target columns', head[-4:] == ['tgt_read_resp', 'tgt_write_resp', 'tgt_read_p99',
                                                        'tgt_write_p99'] and
              all(len(r.split()) == len(head) for r in flat[1:]), '\n'.join(flat[:3]))
        res = json.load(open(os.path.join(outdir, 'results.json')))['runs'][0]
        check('results.json: each interval has the target view', all('target' in iv for iv in res['intervals']),
              json.dumps(res['intervals'][0])[:300])
        check('the target counted exactly the reads and writes iserbench completed',
              res.get('target_reads') == res['reads_done'] > 0 and res.get('target_writes') == res['writes_done'] > 0,
              f"target {res.get('target_reads')}/{res.get('target_writes')}, "
              f"iserbench {res['reads_done']}/{res['writes_done']}")
        summary = open(os.path.join(outdir, 'summary.txt')).read()
        check('summary.txt: the run counts line', f"target: {res.get('target_reads')} reads" in summary, summary[-800:])
        hostile(sock)
    finally:
        if perf:
            perf.kill()
            perf.wait()
        rc = stop_isertd(proc)
        check('isertd exits 0', rc == 0, f'exit {rc}')
        if checks.failed:
            print(open(os.path.join(work, 'isertd.log')).read()[-3000:])
        shutil.rmtree(work, ignore_errors=True)
    checks.finish()


if __name__ == '__main__':
    main()
