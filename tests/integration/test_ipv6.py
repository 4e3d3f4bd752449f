#!/usr/bin/env python3
"""IPv6 addresses written one way, the configuration's: [::1]:PORT.

isertd serves a portal on ::1 and one on :: (and its metrics on ::1), two
initiators log in over ::1, and everything that writes an address and port
writes the IPv6 one in brackets: the stats' portals and connections
sections, the sessions answer, iserctl's ls, paths, sessions and stats,
the metrics' portal label, isertd's log lines of its portals, connections
and logins, and iseradm's answer.  Nowhere the bare form (::1:PORT), which
reads as one address.

usage: test_ipv6.py ISERTD ISERCTL ISERADM [PORT]   (ports PORT..PORT+2)"""
import json
import os
import re
import socket
import subprocess
import sys
import time
import urllib.request

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import iscsi_client as ic  # noqa: E402
import checks  # noqa: E402
from admin_rpc import Rpc, start_isertd, end_isertd  # noqa: E402
from checks import check, wait_for  # noqa: E402

ISERTD, ISERCTL, ISERADM = sys.argv[1], sys.argv[2], sys.argv[3]
P = int(sys.argv[4]) if len(sys.argv) > 4 else 3660
T = 'iqn.2026-11.org.isert:ipv6'
INI = 'iqn.2026-11.org.test:ipv6-'
# ::1 or :: followed by :PORT without the bracket: the form that reads as one address.
BARE = re.compile(r'(?<![\[\w:])::1?:\d')


def bare(text):
    return BARE.findall(text)


def main():
    try:
        s = socket.socket(socket.AF_INET6, socket.SOCK_STREAM)
        s.bind(('::1', 0))
        s.close()
    except OSError as e:
        check(f'IPv6 loopback is there (ip link set lo up in the namespace): {e}', False)
        checks.finish()
    work = checks.workdir('isert-ipv6-')
    cfgfile = os.path.join(work, 'isertd.json')
    with open(cfgfile, 'w') as f:
        json.dump({'backstores': [{'name': 'r0', 'type': 'ram', 'size': '4M'}],
                   'targets': [{'iqn': T, 'tpgs': [{'tag': 1, 'demo_mode': True,
                                                    'portals': [{'ip': '::1', 'port': P}, {'ip': '::', 'port': P + 1}],
                                                    'luns': [{'lun': 0, 'backstore': 'r0'}]}]}],
                   'global': {'metrics': f'[::1]:{P + 2}'}}, f)
    proc, sock = start_isertd(ISERTD, work, cfgfile, '-d', '-r', '1')
    try:
        rpc = Rpc(sock)
        a = ic.Conn(P, host='::1')
        b = ic.Conn(P + 1, host='::1')
        check('logins over ::1 at both portals', a.login(INI + 'a', T) == 0 and b.login(INI + 'b', T) == 0)
        here = {f'[::1]:{P}', f'[::]:{P + 1}'}

        st = rpc.call('stats', {'sections': ['portals', 'connections']})['result']
        got = {p['portal'] for p in st['portals']}
        check('stats portals: [::1]:PORT and [::]:PORT', got == here, got)
        got = {(c['portal'], c['peer'].rsplit(':', 1)[0]) for c in st['connections']}
        check('stats connections: portal [IPv6]:PORT (tcp), peer [::1]:PORT',
              got == {(f'[::1]:{P} (tcp)', '[::1]'), (f'[::]:{P + 1} (tcp)', '[::1]')}, got)
        check('... nothing in the bare form', not bare(json.dumps(st)), bare(json.dumps(st)))

        ss = rpc.call('sessions')['result']['sessions']
        got = {(x['portal'], x['local'], x['peer'].rsplit(':', 1)[0]) for x in ss}
        check('sessions: portal, local and peer in brackets',
              got == {(f'[::1]:{P} (tcp)', f'[::1]:{P}', '[::1]'), (f'[::]:{P + 1} (tcp)', f'[::1]:{P + 1}', '[::1]')},
              got)

        out = ''
        for cmd in (['ls'], ['paths'], ['sessions'], ['stats']):
            r = subprocess.run([ISERCTL, '-s', sock, *cmd], capture_output=True, text=True, timeout=30)
            out += r.stdout
            check(f'iserctl {" ".join(cmd)}: [::1]:PORT, never ::1:PORT',
                  r.returncode == 0 and ('[::1]:' in r.stdout) and not bare(r.stdout), r.stdout + r.stderr)
        check('iserctl ls names both portals as the configuration does',
              f'o- [::1]:{P} [tcp]' in out and f'o- [::]:{P + 1} [tcp]' in out, out)

        text = urllib.request.urlopen(f'http://[::1]:{P + 2}/metrics', timeout=10).read().decode()
        labels = set(re.findall(r'portal="([^"]*)"', text))
        check('metrics: the portal label in brackets', labels == here, labels)

        r = subprocess.run([ISERADM, '--json', '--initiator-name', INI + 'c', 'login', f'iscsi://[::1]:{P}/{T}/0'],
                           capture_output=True, text=True, timeout=30)
        got = json.loads(r.stdout).get('session', {}).get('portal') if r.returncode == 0 else None
        check('iseradm login over [::1]: its portal [::1]:PORT', got == f'[::1]:{P}', r.stdout + r.stderr)
        r = subprocess.run([ISERADM, 'discover', f'[::1]:{P}'], capture_output=True, text=True, timeout=30)
        check('iseradm discover: [::1]:PORT,TAG', r.returncode == 0 and f'[::1]:{P},1 {T}' in r.stdout,
              r.stdout + r.stderr)
        a.close()
        b.close()
        time.sleep(0.2)
    finally:
        log = os.path.join(work, 'isertd.log')
        wait_for(lambda: 'connection freed' in open(log).read())
        text = open(log).read()
        check('the log: listening on [::1]:PORT (tcp) and [::]:PORT (tcp)',
              f'listening on [::1]:{P} (tcp)' in text and f'listening on [::]:{P + 1} (tcp)' in text, text[-3000:])
        check('the log: a connection from [::1]:PORT to [::1]:PORT',
              re.search(r'connection from \[::1\]:\d+ to \[::1\]:%d ' % P, text), text[-3000:])
        check('the log: a login line begun [::1]:PORT',
              re.search(r'\[::1\]:\d+: normal session of .%sa. to %s logged in' % (INI, T), text), text[-3000:])
        check('the log: nothing in the bare form', not bare(text), bare(text))
        end_isertd(proc, work)
    checks.finish()


if __name__ == '__main__':
    main()
