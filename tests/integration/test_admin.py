#!/usr/bin/env python3
"""The admin socket and iserctl against a running isertd, with initiators
doing I/O the whole time: libiscsi's iscsi-perf on one LUN and a
write/read-verify client on another.  Live changes (resize, TPG disable,
global limits, closing a session) must leave those sessions alone (same
TSIH from start to end, every block verified); refusals must be clear
JSON-RPC errors that change nothing (the running configuration compared
before and after).

With "https" after PORT, the same scenario runs with every iserctl command
(but those about the socket itself) sent over the HTTPS admin door
(`iserctl --url`, a CA file and a token file; docs/admin.md, "Remote
administration"), which listens on PORT+5.

usage: test_admin.py ISERTD ISERCTL [PORT [https]]"""
import json
import os
import re
import shutil
import socket
import stat
import struct
import subprocess
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import iscsi_client as ic  # noqa: E402
import checks  # noqa: E402
from admin_rpc import Rpc, port_open, start_isertd, stop_isertd  # noqa: E402
from checks import check, wait_for  # noqa: E402

ISERTD, ISERCTL = sys.argv[1], sys.argv[2]
PORT = int(sys.argv[3]) if len(sys.argv) > 3 else 3470
HTTPS = len(sys.argv) > 4 and sys.argv[4] == 'https'
REMOTE = []  # iserctl's options for the HTTPS door, in place of -s SOCKET (HTTPS only)
MAIN_SOCK = None
T1, T2 = 'iqn.2026-11.org.isert:admin1', 'iqn.2026-11.org.isert:admin2'
MB = 1 << 20


def config(work):
    return {
        'backstores': [
            {'name': 'f0', 'type': 'file', 'path': os.path.join(work, 'f0.img'), 'size': '64M'},
            {'name': 'r0', 'type': 'ram', 'size': '32M'},
            {'name': 'r1', 'type': 'ram', 'size': '8M'},
        ],
        'targets': [
            {'iqn': T1, 'tpgs': [{'tag': 1, 'enable': True, 'demo_mode': True,
                                  'portals': [{'ip': '127.0.0.1', 'port': PORT}],
                                  'luns': [{'lun': 0, 'backstore': 'f0'}, {'lun': 1, 'backstore': 'r0'}]}]},
            {'iqn': T2, 'tpgs': [{'tag': 1, 'enable': True, 'demo_mode': True,
                                  'portals': [{'ip': '127.0.0.1', 'port': PORT}],
                                  'luns': [{'lun': 0, 'backstore': 'r1'}]}]},
        ],
    }


def iserctl(sock, *args, user=None):
    remote = REMOTE and sock == MAIN_SOCK and user is None
    cmd = [ISERCTL, *(REMOTE if remote else ['-s', sock]), *args]
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=30,
                       user=user)
    return p.returncode, p.stdout, p.stderr


class Verifier(threading.Thread):
    """Writes a pattern block by block on LUN 0 of T1 and reads each back, all the time."""

    def __init__(self):
        super().__init__(daemon=True)
        self.stop = threading.Event()
        self.errors, self.uas, self.ios = [], [], 0
        self.conn = ic.Conn(PORT, timeout=10)
        st = self.conn.login('iqn.2026-11.org.test:verifier', T1)
        if st:
            raise RuntimeError(f'verifier login status {st:#x}')

    def cmd(self, cdb, edtl=0, read=False, data=None):
        for _ in range(4):
            status, got, sense = self.conn.command(cdb, edtl, read=read, write_data=data)
            if status == 2 and len(sense) >= 14 and sense[2] & 0xF == 6:
                self.uas.append((sense[12], sense[13]))
                continue
            return status, got
        return status, got

    def capacity(self):
        status, data = self.cmd(bytes([0x9E, 0x10]) + b'\0' * 8 + struct.pack('>I', 32) + b'\0\0', 32, read=True)
        return (struct.unpack('>Q', data[:8])[0] + 1) * struct.unpack('>I', data[8:12])[0] if status == 0 else None

    def run(self):
        lba = 0
        try:
            while not self.stop.is_set():
                block = os.urandom(4096)
                w = bytes([0x2A, 0]) + struct.pack('>I', lba) + bytes([0, 0, 8, 0])
                s1, _ = self.cmd(w, 4096, data=block)
                r = bytes([0x28, 0]) + struct.pack('>I', lba) + bytes([0, 0, 8, 0])
                s2, got = self.cmd(r, 4096, read=True)
                if s1 or s2 or got != block:
                    self.errors.append(f'lba {lba}: write status {s1}, read status {s2}, same={got == block}')
                self.ios += 2
                lba = (lba + 8) % 8192
        except Exception as e:  # noqa: BLE001 - a dropped session is the finding
            self.errors.append(repr(e))


def methods_match_docs(rpc):
    """rpc.methods' tables and docs/admin.md's method table name the same methods and parameters."""
    import re
    ms = {m['name']: m for m in rpc.call('rpc.methods')['result']}
    check('rpc.methods: every method has its parameter table',
          all(isinstance(m.get('params'), list) for m in ms.values()), list(ms))
    doc = os.path.join(os.path.dirname(os.path.abspath(__file__)), '..', '..', 'docs', 'admin.md')
    rows, inside = {}, False
    with open(doc) as f:
        for line in f:
            if line.startswith('| method | params |'):
                inside = True
            elif inside and not line.startswith('|'):
                break
            cols = line.split('|')
            if inside and len(cols) >= 4 and cols[1].strip().startswith('`'):
                for name in re.findall(r'`([a-z_.]+)`', cols[1]):
                    rows[name] = cols[2]
    check('docs/admin.md lists exactly the methods rpc.methods answers', set(rows) == set(ms),
          sorted(set(rows) ^ set(ms)))
    dry = {n for n, m in ms.items() if any(p['name'] == 'dry_run' for p in m['params'])}
    check('dry_run: every change method but backstore.resize (as docs/admin.md says)',
          dry == {n for n, m in ms.items() if m['change']} - {'backstore.resize'}, sorted(dry))
    for name, m in sorted(ms.items()):
        col = rows.get(name, '')
        named = set(re.findall(r'`([a-z_]+)`', col))
        # dry_run: the section's introduction says which methods take it.
        params = {p['name'] for p in m['params']} - {'dry_run'}
        check(f'docs/admin.md: {name} shows its parameters', params <= named, sorted(params - named))
        if not m.get('doc_keys'):
            # Outside parentheses (values, defaults), every name in the column is a parameter.
            bare = set(re.findall(r'`([a-z_]+)`', re.sub(r'\([^)]*\)', '', col)))
            check(f'docs/admin.md: {name} shows no parameter it does not take', bare <= params,
                  sorted(bare - params))


def main():
    work = checks.workdir('isert-admin-')
    cfgfile = os.path.join(work, 'isertd.json')
    with open(cfgfile, 'w') as f:
        json.dump(config(work), f)
    if HTTPS:
        import tls_util
        m = tls_util.Material(work)
        _t, tok, hsh = tls_util.token(work, 'admin')
        doc = config(work)
        doc['global'] = {'admin_https': {'listen': f'127.0.0.1:{PORT + 5}', 'certificate': m.server[0],
                                         'key': m.server[1], 'principals': [
                                             {'name': 'admin', 'role': 'admin', 'token_hash_file': hsh}]}}
        with open(cfgfile, 'w') as f:
            json.dump(doc, f)
        REMOTE.extend(['--url', f'https://localhost:{PORT + 5}', '--cacert', m.ca[0], '--token-file', tok])
    os.chmod(cfgfile, 0o600)
    state = os.path.join(work, 'state')
    proc, sock = start_isertd(ISERTD, work, cfgfile, '-r', '2')
    global MAIN_SOCK
    MAIN_SOCK = sock
    if HTTPS:
        check('the HTTPS door listens', wait_for(lambda: port_open(PORT + 5), 10))
    perf = None
    try:
        rpc = Rpc(sock)
        st = os.stat(sock)
        check('the socket is a socket with mode 0600', stat.S_ISSOCK(st.st_mode) and stat.S_IMODE(st.st_mode) == 0o600,
              oct(st.st_mode))

        def running():
            r = rpc.call('config.get')
            if 'result' not in r:
                raise RuntimeError(f'config.get: {r}')
            return r['result']

        before = running()
        check('config.get: generation 1 and the file loaded', before['generation'] == 1 and
              [b['name'] for b in before['config']['backstores']] == ['f0', 'r0', 'r1'])
        printed = subprocess.run([ISERTD, '-c', cfgfile, '--state-dir', state, '--print-config'], capture_output=True,
                                 text=True)
        check('config.get is the same JSON as --print-config', json.loads(printed.stdout) == before['config'])

        # Refusals, each leaving the running configuration as it was.
        def refused(label, resp, code, words):
            err = (resp or {}).get('error') or {}
            check(f'{label}: error {code}', err.get('code') == code, json.dumps(resp))
            check(f'{label}: the message says "{words}"', words in err.get('message', ''), err.get('message'))
            check(f'{label}: nothing changed', running() == before)

        refused('malformed JSON', rpc.raw(b'{"jsonrpc": "2.0", "id": 1, "method": '), -32700, 'not JSON')
        refused('a batch', rpc.raw(b'[{"jsonrpc":"2.0","id":1,"method":"config.get"}]'), -32600, 'batch')
        refused('no jsonrpc member', rpc.raw(b'{"id":1,"method":"config.get"}'), -32600, 'jsonrpc')
        refused('unknown method', rpc.call('lun.frobnicate'), -32601, "unknown method 'lun.frobnicate'")
        refused('params not an object', rpc.call('sessions', [1]), -32602, 'params: must be an object')
        refused('unknown parameter', rpc.call('save', {'pth': '/tmp/x'}), -32602, "unknown parameter 'pth'")
        # The dispatcher checks every request against its method's parameter table.
        refused('a required parameter missing', rpc.call('session.close', {}), -32602, 'tsih: required')
        refused('a parameter of the wrong type', rpc.call('lun.add', {'target': T1, 'tag': 1, 'backstore': 'r0',
                                                                      'read_only': 'yes'}),
                -32602, 'read_only: must be true or false')
        refused('an integer out of its bounds', rpc.call('mapped_lun.remove', {'target': T1, 'tag': 1,
                                                                               'initiator': 'iqn.x', 'mapped_lun': 16384}),
                -32602, 'mapped_lun: must be an integer from 0 to 16383')
        refused('dry_run not a boolean', rpc.call('tpg.disable', {'target': T1, 'tag': 1, 'dry_run': 1}), -32602,
                'dry_run: must be true or false')
        methods_match_docs(rpc)
        refused('a rule of the file (max_sessions 0)', rpc.call('global.set', {'max_sessions': 0}), -32000,
                'global.max_sessions: must be 1-')
        refused('two settings, the second bad', rpc.call('global.set', {'login_timeout': 7, 'max_sessions': 0}),
                -32000, 'max_sessions')
        refused('a setting that needs a restart', rpc.call('global.set', {'reactors': 4}), -32000,
                'cannot change while isertd runs')
        refused('a ram backstore resize', rpc.call('backstore.resize', {'name': 'r0', 'size': '64M'}), -32000,
                'ram backstore cannot be resized')
        refused('shrinking a LUN', rpc.call('backstore.resize', {'name': 'f0', 'size': '1M'}), -32000,
                'only grown')
        refused('a size that breaks the rule', rpc.call('backstore.resize', {'name': 'f0', 'size': '1000'}), -32000,
                'backstores[0].size')
        refused('no such backstore', rpc.call('backstore.resize', {'name': 'nope', 'size': '1G'}), -32003,
                "no backstore 'nope'")
        refused('no such TPG', rpc.call('tpg.disable', {'target': T1, 'tag': 9}), -32003, 'has no TPG 9')
        refused('a stale generation', rpc.call('global.set', {'login_timeout': 9, 'generation': 7}), -32002,
                'stale generation 7')
        big = b'{"jsonrpc":"2.0","id":1,"method":"config.get","params":{"x":"' + b'a' * (1 << 20) + b'"}}'
        refused('a request over 1 MiB', rpc.raw(big), -32600, 'larger than')
        # A peer that is neither root nor isertd's uid: the socket is 0600, so open it for the test.
        os.chmod(sock, 0o666)
        os.chmod(work, 0o711)
        pid = os.fork()
        if pid == 0:
            os.setgid(65534)
            os.setuid(65534)
            r = Rpc(sock).call('config.get')
            os._exit(0 if r.get('error', {}).get('code') == -32001 and 'permission denied' in r['error']['message']
                     else 1)
        _, status = os.waitpid(pid, 0)
        os.chmod(sock, 0o600)
        os.chmod(work, 0o700)
        check('a non-root peer (uid 65534) gets "permission denied" (-32001)', os.waitstatus_to_exitcode(status) == 0)
        rc, _, err = iserctl(sock, 'ls', user=65534)
        check('iserctl as uid 65534 cannot reach the 0600 socket: exit 3', rc == 3 and 'root' in err, f'{rc} {err}')

        # Initiators at work: iscsi-perf (libiscsi) on T1 LUN 1, our verifier on T1 LUN 0, a third session on T2.
        perf = subprocess.Popen(['iscsi-perf', '-i', 'iqn.2026-11.org.test:perf', '-x', '0',
                                 f'iscsi://127.0.0.1:{PORT}/{T1}/1'], stdout=subprocess.PIPE,
                                stderr=subprocess.STDOUT, text=True)
        ver = Verifier()
        ver.start()
        other = ic.Conn(PORT)
        check('a session to the second target logs in', other.login('iqn.2026-11.org.test:other', T2) == 0)
        three = {'iqn.2026-11.org.test:perf', 'iqn.2026-11.org.test:verifier', 'iqn.2026-11.org.test:other'}
        wait_for(lambda: three <= {s['initiator'] for s in rpc.call('sessions')['result']['sessions']})
        sess = rpc.call('sessions')['result']['sessions']
        by_ini = {s['initiator']: s for s in sess}
        check('sessions lists the three initiators', three <= set(by_ini), json.dumps(sorted(by_ini)))
        v = by_ini.get('iqn.2026-11.org.test:verifier', {})
        check('a session shows transport, addresses and negotiated parameters',
              v.get('transport') == 'tcp' and v.get('target') == T1 and v.get('peer', '').startswith('127.0.0.1:')
              and 'MaxBurstLength' in v.get('params', {}) and [lun['lun'] for lun in v.get('luns', [])] == [0, 1],
              json.dumps(v))
        tsih = {k: s['tsih'] for k, s in by_ini.items()}
        rc, out, _ = iserctl(sock, 'paths')
        check('iserctl paths lists the objects', rc == 0 and '/backstores/f0' in out.split('\n') and
              f'/iscsi/{T1}/tpg1/luns/lun1' in out.split('\n') and f'/iscsi/{T1}/tpg1/portals/127.0.0.1:{PORT}' in out,
              out)
        comp = os.path.join(os.path.dirname(os.path.abspath(__file__)), '..', '..', 'tools', 'iserctl', 'iserctl.bash')
        bash = subprocess.run(['bash', '-c', f'PATH={os.path.dirname(ISERCTL)}:$PATH; source {comp}; '
                               f'COMP_WORDS=(iserctl -s {sock} set /iscsi/{T1}/tpg1/luns/); COMP_CWORD=4; _iserctl; '
                               'printf "%s\\n" "${COMPREPLY[@]}"'], capture_output=True, text=True)
        check('bash completion offers the LUN paths', f'/iscsi/{T1}/tpg1/luns/lun0' in bash.stdout.split('\n'),
              bash.stdout + bash.stderr)
        rc, out, _ = iserctl(sock, 'ls')
        check('iserctl ls shows backstores, TPGs, LUNs and sessions', rc == 0 and '64.0 MiB' in out and
              'lun0 -> /backstores/f0' in out and 'iqn.2026-11.org.test:verifier' in out, out)
        rc, out, _ = iserctl(sock, '--json', 'sessions', str(tsih['iqn.2026-11.org.test:verifier']))
        check('iserctl --json sessions TSIH is the session as JSON',
              rc == 0 and json.loads(out)['initiator'] == 'iqn.2026-11.org.test:verifier', out)

        # Grow the file LUN under the verifier.
        cap0 = None
        r = rpc.call('backstore.resize', {'name': 'f0', 'size': '128M', 'generation': 1})
        check('backstore.resize f0 to 128M', r.get('result', {}).get('size') == 128 * MB, json.dumps(r))
        wait_for(lambda: (0x2A, 0x09) in ver.uas)
        ver.stop.set()
        ver.join(10)
        check('the verifier saw CAPACITY DATA HAS CHANGED (2A/09)', (0x2A, 0x09) in ver.uas, repr(ver.uas))
        cap0 = ver.capacity()
        check('READ CAPACITY now says 128 MiB', cap0 == 128 * MB, repr(cap0))
        check('the file grew', os.path.getsize(os.path.join(work, 'f0.img')) == 128 * MB)
        ver.stop.clear()
        ver2 = threading.Thread(target=ver.run, daemon=True)
        ver2.start()
        now = running()
        check('config.get: generation 2, f0 is 128M', now['generation'] == 2 and
              now['config']['backstores'][0]['size'] == 128 * MB)
        rc, _, err = iserctl(sock, '-g', '1', 'set', '/global', 'login_timeout=9')
        check('iserctl with a stale generation: exit 5', rc == 5 and 'stale' in err, f'{rc} {err}')
        rc, _, err = iserctl(sock, 'set', '/backstores/nope', 'size=1G')
        check('iserctl on a missing object: exit 4', rc == 4 and "'nope'" in err, f'{rc} {err}')
        rc, _, err = iserctl(sock, 'set', '/global', 'max_sessions=0')
        check('iserctl refused by a rule: exit 1, names the field', rc == 1 and 'global.max_sessions' in err, err)
        rc, _, err = iserctl(os.path.join(work, 'none.sock'), 'ls')
        check('iserctl without isertd: exit 3', rc == 3 and 'is isertd running' in err, err)
        rc, _, err = iserctl(sock, 'set', '/nowhere', 'a=1')
        check('iserctl usage error: exit 2', rc == 2, err)

        # Live limits: one more session than allowed is refused, then allowed again.
        r = rpc.call('global.set', {'max_sessions': 4})
        check('global.set max_sessions 4', 'result' in r, json.dumps(r))
        c4 = ic.Conn(PORT)
        check('a 4th session logs in', c4.login('iqn.2026-11.org.test:fourth', T2) == 0)
        c5 = ic.Conn(PORT)
        st5 = c5.login('iqn.2026-11.org.test:fifth', T2)
        check('a 5th is refused (max_sessions 4)', st5 != 0, f'{st5:#x}')
        c5.close()
        rpc.call('global.set', {'max_sessions': 4096})

        # Close one session; disable and enable a TPG: only what they name is touched.
        r = rpc.call('session.close', {'tsih': c4_tsih(rpc, 'iqn.2026-11.org.test:fourth')})
        check('session.close closes one session', r.get('result', {}).get('closed') == 1, json.dumps(r))
        check('its connection is closed', closed(c4))
        r = rpc.call('session.close', {'tsih': 65000})
        check('session.close of no session: -32003', r.get('error', {}).get('code') == -32003, json.dumps(r))
        rc, out, _ = iserctl(sock, 'set', f'/iscsi/{T2}/tpg1', 'enable=false')
        check('iserctl set TPG enable=false', rc == 0, out)
        check('the session of the disabled TPG is closed', closed(other))
        o2 = ic.Conn(PORT)
        check('a login to the disabled TPG is refused', o2.login('iqn.2026-11.org.test:other', T2) != 0)
        o2.close()
        rc, out, _ = iserctl(sock, 'set', f'/iscsi/{T2}/tpg1', 'enable=true')
        o3 = ic.Conn(PORT)
        check('enabled again, it takes logins', rc == 0 and o3.login('iqn.2026-11.org.test:other', T2) == 0)
        o3.close()

        # set reads a value as call does (one parser): an array (or object) is the JSON it is.
        def balance():
            tpg = [t for t in running()['config']['targets'] if t['iqn'] == T2][0]['tpgs'][0]
            return tpg.get('redirect_balance')
        rc, out, err = iserctl(sock, 'set', f'/iscsi/{T2}/tpg1', f'redirect_balance=["127.0.0.1:{PORT}"]')
        check('iserctl set redirect_balance=["IP:PORT"] (an array, as call tpg.set takes it): config.get has it',
              rc == 0 and balance() == [f'127.0.0.1:{PORT}'], (rc, out + err, balance()))
        rc, out, err = iserctl(sock, 'set', f'/iscsi/{T2}/tpg1', 'redirect_balance=null')
        check('... and redirect_balance=null takes it away', rc == 0 and balance() is None, (rc, out + err, balance()))

        # The write cache turned on live: WCE follows, the sessions are told (2A/01).
        ver.uas.clear()
        rc, out, err = iserctl(sock, 'set', '/backstores/f0', 'write_cache=true')
        check('iserctl set write_cache=true on a LUN in use', rc == 0, out + err)
        check('the verifier saw MODE PARAMETERS CHANGED (2A/01)', wait_for(lambda: (0x2A, 0x01) in ver.uas),
              repr(ver.uas))
        r = rpc.call('backstore.set', {'name': 'f0', 'thin': True})
        check('backstore.set thin on a LUN in use: refused, saying why',
              r.get('error', {}).get('code') == -32000 and 'remove its LUNs first' in r['error']['message'],
              json.dumps(r))

        # Objects added and removed while the verifier works on T1.
        before = running()
        r = rpc.call('backstore.create', {'name': 'r9', 'type': 'ram', 'size': '1M', 'serial': 'r0'})
        check('backstore.create with the serial of another LU (r0\'s name): refused, naming both',
              r.get('error', {}).get('code') == -32000 and 'is already the serial of backstores[1] ("r0"'
              in r['error']['message'] and running() == before, json.dumps(r))
        r = rpc.call('backstore.create', {'name': 'f1', 'type': 'file', 'path': os.path.join(work, 'f1.img'),
                                          'size': '16M'})
        check('backstore.create f1', 'result' in r, json.dumps(r))
        ver.uas.clear()
        # The dry run and the change itself number the LUN the same way (one function for both).
        r = rpc.call('lun.add', {'target': T1, 'tag': 1, 'backstore': 'f1', 'dry_run': True})
        dry = [(st['op'], st['path']) for st in r.get('result', {}).get('plan', [])]
        check('lun.add dry_run plans the lowest free LUN (2)', ('create', f'/iscsi/{T1}/tpg1/luns/lun2') in dry,
              json.dumps(r))
        r = rpc.call('lun.add', {'target': T1, 'tag': 1, 'backstore': 'f1', 'lun': 0})
        check('lun.add of a LUN number in use is refused, naming it', 'LUN 0 exists in this TPG' in
              r.get('error', {}).get('message', ''), json.dumps(r))
        r = rpc.call('lun.add', {'target': T1, 'tag': 1, 'backstore': 'f1'})
        plan = [(st['op'], st['path']) for st in r.get('result', {}).get('plan', [])]
        check('lun.add picks the lowest free LUN (2) and says so in its plan',
              plan == [('create', f'/iscsi/{T1}/tpg1/luns/lun2')], json.dumps(r))
        check('lun.add: the sessions of T1 are told', r.get('result', {}).get('sessions_with_new_luns', 0) >= 2,
              json.dumps(r))
        probe = ic.Conn(PORT)
        probe.login('iqn.2026-11.org.test:probe', T1)
        st_, data, _ = probe.command(bytes([0xA0, 0, 0, 0, 0, 0, 0, 0, 0x10, 0, 0, 0]), 4096, read=True)
        luns = sorted(int.from_bytes(data[8 + 8 * i:10 + 8 * i], 'big') & 0x3FFF
                      for i in range(int.from_bytes(data[:4], 'big') // 8))
        check('REPORT LUNS from a new session lists LUNs 0, 1, 2', st_ == 0 and luns == [0, 1, 2], repr(luns))
        check('the verifier (logged in before) saw REPORTED LUNS DATA HAS CHANGED (3F/0E)',
              wait_for(lambda: (0x3F, 0x0E) in ver.uas), repr(ver.uas))
        # Writes to the new LUN, then it goes while a command may be in flight: it finishes or fails cleanly.
        blk = os.urandom(4096)
        s2, _, _ = probe.command(bytes([0x2A, 0, 0, 0, 0, 0, 0, 0, 8, 0]), 4096, write_data=blk, lun=2)
        check('the new LUN takes writes', s2 == 0, repr(s2))
        r = rpc.call('backstore.delete', {'name': 'f1'})
        check('backstore.delete of a backstore in use is refused, naming the LUN',
              r.get('error', {}).get('code') == -32000 and '/lun2' in r['error']['message'], json.dumps(r))
        r = rpc.call('lun.remove', {'target': T1, 'tag': 1, 'lun': 2})
        check('lun.remove', 'result' in r, json.dumps(r))
        s3, _, sense3 = probe.command(bytes([0x28, 0, 0, 0, 0, 0, 0, 0, 8, 0]), 4096, read=True, lun=2)
        while s3 == 2 and len(sense3) > 13 and sense3[2] & 0xF == 6:
            s3, _, sense3 = probe.command(bytes([0x28, 0, 0, 0, 0, 0, 0, 0, 8, 0]), 4096, read=True, lun=2)
        check('a command to the removed LUN: LOGICAL UNIT NOT SUPPORTED',
              s3 == 2 and len(sense3) > 13 and sense3[12] == 0x25, f'{s3} {sense3.hex()}')
        r = rpc.call('backstore.delete', {'name': 'f1'})
        check('then backstore.delete closes it', 'result' in r, json.dumps(r))
        probe.close()
        # A portal added live takes logins; removed, it stops listening, its session stays.
        r = rpc.call('portal.add', {'target': T1, 'tag': 1, 'ip': '127.0.0.1', 'port': PORT + 1})
        check('portal.add', 'result' in r, json.dumps(r))
        p2 = ic.Conn(PORT + 1)
        check('a login through the new portal', p2.login('iqn.2026-11.org.test:p2', T1) == 0)
        r = rpc.call('portal.remove', {'target': T1, 'tag': 1, 'ip': '127.0.0.1', 'port': PORT + 1})
        check('portal.remove', 'result' in r, json.dumps(r))
        try:
            ic.Conn(PORT + 1).close()
            refused_conn = False
        except OSError:
            refused_conn = True
        check('the removed portal no longer listens', refused_conn)
        check('the session that came through it stays', p2.nop(b'ping') == b'ping')
        p2.close()
        # An ACL-only target built from nothing; removing the ACL ends its session.
        T3 = 'iqn.2026-11.org.isert:admin3'
        for m, prm in (('target.create', {'iqn': T3}),
                       ('portal.add', {'target': T3, 'tag': 1, 'ip': '127.0.0.1', 'port': PORT}),
                       ('lun.add', {'target': T3, 'tag': 1, 'backstore': 'r1', 'read_only': True}),
                       ('acl.add', {'target': T3, 'tag': 1, 'initiator': 'iqn.2026-11.org.test:acl'})):
            r = rpc.call(m, prm)
            check(f'{m} on a new target', 'result' in r, json.dumps(r))
        c3 = ic.Conn(PORT)
        check('the ACL initiator logs in to the new target', c3.login('iqn.2026-11.org.test:acl', T3) == 0)
        c4 = ic.Conn(PORT)
        check('another initiator is refused there', c4.login('iqn.2026-11.org.test:nope', T3) != 0)
        c4.close()
        r = rpc.call('acl.remove', {'target': T3, 'tag': 1, 'initiator': 'iqn.2026-11.org.test:acl'})
        check('acl.remove closes its session', r.get('result', {}).get('sessions_closed') == 1, json.dumps(r))
        check('its connection is closed', closed(c3))

        # apply: a file that changes one target (T2 gets a second LUN); dry run first.
        doc = running()['config']
        for t in doc['targets']:
            if t['iqn'] == T2:
                t['tpgs'][0]['luns'].append({'lun': 1, 'backstore': 'r0', 'read_only': True})
        newfile = os.path.join(work, 'new.json')
        with open(newfile, 'w') as f:
            json.dump(doc, f)
        before = running()
        rc, out, _ = iserctl(sock, 'apply', '--dry-run', newfile)
        check('iserctl apply --dry-run prints the plan and changes nothing',
              rc == 0 and f'create  /iscsi/{T2}/tpg1/luns/lun1' in out and running() == before, out)
        rc, out, err = iserctl(sock, 'apply', newfile)
        check('iserctl apply makes the file the running configuration', rc == 0 and running()['config'] == doc,
              out + err)
        check('only T2 changed: generation one more', running()['generation'] == before['generation'] + 1)
        rc, out, _ = iserctl(sock, 'apply', newfile)
        check('applying it again changes nothing', rc == 0 and 'nothing to change' in out, out)
        # A file that cannot be carried out leaves everything as it was.
        busy = socket.socket()
        busy.bind(('127.0.0.1', 0))
        busy.listen()
        bad = json.loads(json.dumps(doc))
        bad['backstores'].append({'name': 'f9', 'type': 'file', 'path': os.path.join(work, 'f9.img'), 'size': '1M'})
        bad['targets'][0]['tpgs'][0]['portals'].append({'ip': '127.0.0.1', 'port': busy.getsockname()[1]})
        bad['targets'][0]['tpgs'][0]['luns'].append({'lun': 9, 'backstore': 'f9'})
        before = running()
        r = rpc.call('apply', {'config': bad})
        check('apply with a portal whose port is taken: refused, naming it',
              r.get('error', {}).get('code') == -32000 and str(busy.getsockname()[1]) in r['error']['message'],
              json.dumps(r))
        check('nothing of it half-applied', running() == before)
        busy.close()
        # SIGHUP applies the file isertd was started with.
        with open(cfgfile, 'w') as f:
            json.dump(doc, f)
        proc.send_signal(1)
        time.sleep(1)
        check('SIGHUP with the file as it runs changes nothing',
              running()['generation'] == before['generation'] and running()['config'] == doc)
        doc['global']['login_timeout'] = 33
        with open(cfgfile, 'w') as f:
            json.dump(doc, f)
        proc.send_signal(1)
        check('SIGHUP with a changed login_timeout takes it',
              wait_for(lambda: running()['config']['global']['login_timeout'] == 33))

        # save, with rotating backups
        for _ in range(4):
            r = rpc.call('save', {'backups': 2})
        saved = json.load(open(cfgfile))
        check('save writes the running configuration to the file isertd started with',
              r.get('result', {}).get('path') == cfgfile and saved == running()['config'], json.dumps(r))
        backups = sorted(os.listdir(os.path.join(work, 'backup')))
        check('save keeps 2 backups in backup/', len(backups) == 2 and all(b.startswith('isertd-') for b in backups),
              repr(backups))
        check('the saved file is still mode 0600 or stricter', stat.S_IMODE(os.stat(cfgfile).st_mode) & 0o077 == 0,
              oct(os.stat(cfgfile).st_mode))
        rc, out, _ = iserctl(sock, 'config')
        check('iserctl config prints the running configuration', rc == 0 and json.loads(out) == running()['config'])

        # The initiators never noticed.
        time.sleep(1)
        ver.stop.set()
        ver2.join(10)
        check(f'the verifier verified every block ({ver.ios} I/Os), no error', not ver.errors and ver.ios > 100,
              repr(ver.errors[:3]))
        sess = {s['initiator']: s['tsih'] for s in rpc.call('sessions')['result']['sessions']}
        for ini in ('iqn.2026-11.org.test:perf', 'iqn.2026-11.org.test:verifier'):
            check(f'{ini}: the same session (TSIH {tsih.get(ini)}) from start to end', sess.get(ini) == tsih.get(ini),
                  f'{sess.get(ini)}')
        check('iscsi-perf is still running', perf.poll() is None)
    finally:
        if perf and perf.poll() is None:
            perf.send_signal(2)
            try:
                perf.wait(5)
            except subprocess.TimeoutExpired:
                perf.kill()
        rc = stop_isertd(proc)
        check('isertd exits 0', rc == 0, f'exit {rc}')
        check('the socket is removed at exit', not os.path.exists(sock))
        if HTTPS:
            text = open(os.path.join(work, 'isertd.log')).read()
            check('iserctl --url\'s changes are audited with the principal and address', re.search(
                r'audit https \(principal admin from 127\.0\.0\.1:\d+\): tpg\.set \{[^\n]*: done, generation \d+',
                text) is not None)
        if checks.failed:
            print(open(os.path.join(work, 'isertd.log')).read()[-3000:])
        shutil.rmtree(work, ignore_errors=True)
    checks.finish()


def c4_tsih(rpc, ini):
    for s in rpc.call('sessions', {'initiator': ini})['result']['sessions']:
        return s['tsih']
    return 0


def closed(c):
    try:
        c.s.settimeout(3)
        while True:
            if not c.s.recv(65536):
                return True
    except (ConnectionError, OSError):
        return True


if __name__ == '__main__':
    main()
