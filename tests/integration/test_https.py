#!/usr/bin/env python3
"""The HTTPS admin door (global.admin_https, docs/admin.md "Remote administration") over real TLS on
loopback: each role allowed and refused per kind of method, a principal limited to one target, client
certificates (valid, from another CA, expired, unknown), bearer tokens (good, bad, revoked by a live change,
rotated by SIGHUP), the audit lines, the bounds (a huge body, a body past the bound, a slowloris, connections
per address and in all, backoff after a flood of bad tokens), the refusals counted in the metrics,
certificates taken again at SIGHUP, sslscan's view of the protocol and cipher floor, and curl as a second
client.

usage: test_https.py ISERTD [PORT]   (PORT the portal; PORT+1 the HTTPS door, PORT+2 the metrics)"""
import json
import os
import re
import shutil
import signal
import socket
import ssl
import subprocess
import sys
import time
import urllib.request

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import checks  # noqa: E402
import tls_util as tu  # noqa: E402
from admin_rpc import Rpc, end_isertd, start_isertd  # noqa: E402
from checks import check, wait_for  # noqa: E402

ISERTD = sys.argv[1]
PORT = int(sys.argv[2]) if len(sys.argv) > 2 else 3690
HPORT, MPORT = PORT + 1, PORT + 2
T1, T2 = 'iqn.2026-11.org.isert:https1', 'iqn.2026-11.org.isert:https2'
TIMEOUT = 3  # admin_https.request_timeout in this test


def config(work, m, tokens):
    def tgt(iqn, bs):
        return {'iqn': iqn, 'tpgs': [{'tag': 1, 'demo_mode': True, 'portals': [{'ip': '127.0.0.1', 'port': PORT}],
                                      'luns': [{'lun': 0, 'backstore': bs}]}]}
    return {
        'global': {
            'metrics': str(MPORT),
            'admin_https': {
                'listen': f'127.0.0.1:{HPORT}', 'certificate': m.server[0], 'key': m.server[1],
                'client_ca': m.ca[0], 'max_connections': 8, 'max_connections_per_address': 4,
                'request_timeout': TIMEOUT,
                'principals': [
                    {'name': 'root-bot', 'role': 'admin', 'token_hash_file': tokens['admin'][2]},
                    {'name': 'ops', 'role': 'operator', 'subject': 'CN=ops,O=Example'},
                    {'name': 'mon', 'role': 'reader', 'san': 'mon.example.com'},
                    {'name': 'tenant', 'role': 'admin', 'token_hash_file': tokens['tenant'][2], 'targets': [T1]},
                    {'name': 'old', 'role': 'reader', 'token_hash_file': tokens['old'][2]},
                ]}},
        'backstores': [{'name': 'r1', 'type': 'ram', 'size': '16M'}, {'name': 'r2', 'type': 'ram', 'size': '16M'}],
        'targets': [tgt(T1, 'r1'), tgt(T2, 'r2')],
    }


def metric(reason):
    text = urllib.request.urlopen(f'http://127.0.0.1:{MPORT}/metrics', timeout=10).read().decode()
    m = re.search(r'^isert_admin_https_refused_total\{reason="%s"\} (\d+)$' % reason, text, re.M)
    return int(m.group(1)) if m else None


def tls_connect(src='127.0.0.1', client=None, ca=None):
    """A TLS connection from source address src, handshaken; the socket."""
    raw = socket.create_connection(('127.0.0.1', HPORT), timeout=10, source_address=(src, 0))
    return tu.context(ca, client).wrap_socket(raw, server_hostname='127.0.0.1')


def closed_by_peer(s, seconds):
    """True when the server closes s within seconds (reads nothing but the end)."""
    s.settimeout(seconds)
    try:
        return s.recv(1) == b''
    except (socket.timeout, TimeoutError):
        return False
    except (ssl.SSLError, OSError):
        return True


def main():
    work = checks.workdir('isert-https-')
    m = tu.Material(work)
    tokens = {k: tu.token(work, k) for k in ('admin', 'tenant', 'old', 'bad')}
    cfgfile = os.path.join(work, 'isertd.json')
    with open(cfgfile, 'w') as f:
        json.dump(config(work, m, tokens), f)
    os.chmod(cfgfile, 0o600)
    proc, sock = start_isertd(ISERTD, work, cfgfile, '-r', '1', ready=HPORT)
    CA = m.ca[0]

    def call(method, params=None, **kw):
        st, hd, body = tu.post('127.0.0.1', HPORT, tu.rpc(method, params), CA, **kw)
        return st, body

    def log():
        with open(os.path.join(work, 'isertd.log')) as f:
            return f.read()

    admin = {'token': tokens['admin'][0]}
    try:
        check('isertd listens on the HTTPS door', proc.poll() is None, log()[-2000:])
        st, b = call('rpc.methods', **admin)
        check('admin token: rpc.methods answers 200 with the methods', st == 200 and
              any(x['name'] == 'backstore.create' for x in b['result']), f'{st} {b}')
        roles = {x['name']: x.get('role') for x in b['result']}
        check('rpc.methods gives each method its role', roles.get('config.get') == 'reader' and
              roles.get('stats.reset') == 'operator' and roles.get('alua.set') == 'operator' and
              roles.get('session.close') == 'operator' and
              roles.get('backstore.create') == 'admin' and roles.get('save') == 'admin', json.dumps(roles))

        # Each role, per kind of method.
        ops, mon = {'client': m.ops}, {'client': m.mon}
        st, b = call('config.get', **mon)
        check('reader (certificate by subjectAltName): config.get 200', st == 200 and 'result' in b, f'{st} {b}')
        st, b = call('stats', {'sections': ['luns']}, **mon)
        check('reader: stats 200', st == 200 and 'result' in b, f'{st} {b}')
        for meth, params in (('stats.reset', None), ('backstore.create', {'name': 'x', 'type': 'ram', 'size': '1M'}),
                             ('save', None)):
            st, b = call(meth, params, **mon)
            check(f'reader: {meth} refused 403 (-32001, names the role)', st == 403 and
                  b['error']['code'] == -32001 and 'role reader' in b['error']['message'], f'{st} {b}')
        st, b = call('config.get', {'show_secrets': True}, **ops)
        check('operator: config.get show_secrets refused 403', st == 403 and 'admin' in b['error']['message'],
              f'{st} {b}')
        st, b = call('stats.reset', **ops)
        check('operator (certificate by subject): stats.reset 200', st == 200 and 'result' in b, f'{st} {b}')
        st, b = call('alua.set', {'target': T1, 'group': 1, 'state': 'active_optimized'}, **ops)
        check('operator: alua.set is allowed (not -32001)', st == 200 and
              (b.get('error') or {}).get('code') != -32001, f'{st} {b}')
        st, b = call('session.close', {'tsih': 999}, **ops)
        check('operator: session.close is allowed (no such session: not found, not refused)', st == 200 and
              b['error']['code'] == -32003, f'{st} {b}')
        for meth, params in (('backstore.create', {'name': 'x', 'type': 'ram', 'size': '1M'}),
                             ('global.set', {'login_timeout': 9}), ('tpg.disable', {'target': T1, 'tag': 1})):
            st, b = call(meth, params, **ops)
            check(f'operator: {meth} refused 403', st == 403 and 'role operator' in b['error']['message'],
                  f'{st} {b}')
        gen0 = Rpc(sock).call('config.get')['result']['generation']
        st, b = call('backstore.create', {'name': 'made', 'type': 'ram', 'size': '1M'}, **admin)
        check('admin: backstore.create 200', st == 200 and 'result' in b, f'{st} {b}')
        st, b = call('config.get', {'show_secrets': True}, **admin)
        check('admin: config.get show_secrets 200', st == 200 and 'result' in b, f'{st} {b}')
        st, b = call('acl.add', {'target': T1, 'tag': 1, 'initiator': 'iqn.2026-11.org.test:h1',
                                 'chap': {'userid': 'u', 'password': 'SecretPassw0rd!'}}, **admin)
        check('admin: acl.add with a CHAP secret 200', st == 200 and 'result' in b, f'{st} {b}')
        st, b = call('backstore.delete', {'name': 'made'}, **admin)
        check('admin: backstore.delete 200', st == 200 and 'result' in b, f'{st} {b}')
        check('the changes are the socket\'s too (generation +3)',
              Rpc(sock).call('config.get')['result']['generation'] == gen0 + 3)
        st, b = call('tpg.set', {'target': T1, 'tag': 1, 'demo_write_protect': False}, token=tokens['tenant'][0])
        check('tenant (limited to T1): tpg.set on T1 200', st == 200 and 'result' in b, f'{st} {b}')
        st, b = call('tpg.set', {'target': T2, 'tag': 1, 'demo_write_protect': False}, token=tokens['tenant'][0])
        check('tenant: tpg.set on T2 refused 403, naming the target', st == 403 and T2 in b['error']['message'],
              f'{st} {b}')
        st, b = call('backstore.create', {'name': 'y', 'type': 'ram', 'size': '1M'}, token=tokens['tenant'][0])
        check('tenant: backstore.create (names no target) refused 403', st == 403 and
              'names no target' in b['error']['message'], f'{st} {b}')
        st, b = call('sessions', token=tokens['tenant'][0])
        check('tenant: sessions without a target refused 403', st == 403 and 'give its target' in
              b['error']['message'], f'{st} {b}')
        st, b = call('sessions', {'target': T1}, token=tokens['tenant'][0])
        check('tenant: sessions of T1 200', st == 200 and 'result' in b, f'{st} {b}')

        # The audit trail.
        text = log()
        check('audit: the admin\'s change, with principal, address, method, parameters, result, generation',
              re.search(r'audit https \(principal root-bot from 127\.0\.0\.1:\d+\): backstore\.create '
                        r'\{"name":"made".*\}: done, generation \d+', text) is not None, text[-3000:])
        check('audit: the operator\'s action', re.search(r'audit https \(principal ops from 127\.0\.0\.1:\d+\): '
                                                         r'stats\.reset \{\}: done', text) is not None)
        check('audit: a refusal, with its reason', re.search(
            r'audit https \(principal ops from [^)]*\): global\.set \{"login_timeout":9\}: refused \(-32001\): '
            r'permission denied', text) is not None)
        check('audit: the CHAP secret is masked, never written', 'SecretPassw0rd!' not in text and
              re.search(r'audit https [^\n]*acl\.add [^\n]*"password":"\*+"', text) is not None)
        check('readers are not audited', not re.search(r'audit https[^\n]*config\.get', text))
        st, b = call('global.set', {'login_timeout': 7}, token=tokens['admin'][0])
        Rpc(sock).call('global.set', {'login_timeout': 8})
        check('audit: the socket\'s changes keep their line', re.search(
            r'admin \(uid \d+\): global\.set \{"login_timeout":8\}: done, generation \d+', log()) is not None)

        # Refused authentications, each counted by reason.
        base = {r: metric(r) for r in ('no_credentials', 'bad_token', 'certificate_untrusted',
                                       'certificate_expired', 'certificate_unknown', 'forbidden')}
        check('the metrics count the refusals so far (forbidden among them)', (base['forbidden'] or 0) >= 8,
              json.dumps(base))

        srcs = iter(f'127.0.1.{i}' for i in range(1, 100))  # each its own: the backoff is tried on its own

        def refused(label, reason, words, **kw):
            st, hd, b = tu.post('127.0.0.1', HPORT, tu.rpc('config.get'), CA, src=next(srcs), **kw)
            check(f'{label}: 401 -32001 "{words}"', st == 401 and b['error']['code'] == -32001 and
                  words in b['error']['message'] and 'Bearer' in hd.get('WWW-Authenticate', ''), f'{st} {b}')
            check(f'{label}: counted as {reason}', metric(reason) == base[reason] + 1, str(metric(reason)))
        refused('no credentials', 'no_credentials', 'authentication required')
        refused('a token no principal has', 'bad_token', 'not a principal', token=tokens['bad'][0])
        base['bad_token'] += 1
        refused('a token that is not 64 hex digits', 'bad_token', 'not a principal', token='x' * 64)
        refused('a certificate from another CA', 'certificate_untrusted', 'not signed', client=m.foreign)
        refused('an expired certificate', 'certificate_expired', 'expired', client=m.expired)
        refused('a valid certificate no principal names', 'certificate_unknown', 'no principal', client=m.stranger)
        st, _h, b = tu.post('127.0.0.1', HPORT, tu.rpc('config.get'), CA, src=next(srcs), client=m.foreign,
                            token=tokens['admin'][0])
        check('a bad certificate is refused even with a good token', st == 401, f'{st} {b}')

        # Revocation by a live change, rotation by SIGHUP.
        st, b = call('config.get', token=tokens['old'][0])
        check('token "old" works', st == 200, f'{st} {b}')
        doc = Rpc(sock).call('config.get')['result']['config']['global']['admin_https']
        doc['principals'] = [p for p in doc['principals'] if p['name'] != 'old']
        st, b = call('global.set', {'admin_https': doc}, **admin)
        check('global.set removes principal "old" (over HTTPS itself)', st == 200 and 'result' in b, f'{st} {b}')
        st, _h, b = tu.post('127.0.0.1', HPORT, tu.rpc('config.get'), CA, src=next(srcs), token=tokens['old'][0])
        check('token "old" is refused after the live change (revoked)', st == 401, f'{st} {b}')
        new = tu.token(work, 'admin2')
        shutil.copy(new[2], tokens['admin'][2])
        os.kill(proc.pid, signal.SIGHUP)
        check('SIGHUP: the rotated token is taken', wait_for(lambda: call('config.get', token=new[0])[0] == 200, 10))
        st, _h, b = tu.post('127.0.0.1', HPORT, tu.rpc('config.get'), CA, src=next(srcs), **admin)
        check('SIGHUP: the token the file no longer holds is refused', st == 401, f'{st} {b}')
        admin = {'token': new[0]}

        # A change that would break the door is refused and changes nothing.
        bad = json.loads(json.dumps(doc))
        loose = os.path.join(work, 'loose.key')
        shutil.copy(m.server[1], loose)
        os.chmod(loose, 0o644)
        bad['key'] = loose
        gen = Rpc(sock).call('config.get')['result']['generation']
        st, b = call('global.set', {'admin_https': bad}, **admin)
        check('a key readable by others is refused ("chmod 600"), nothing changed',
              st == 200 and 'chmod 600' in b.get('error', {}).get('message', '') and
              Rpc(sock).call('config.get')['result']['generation'] == gen, f'{st} {b}')

        # Certificates taken again at SIGHUP.
        before = tls_connect(ca=CA).getpeercert(binary_form=True)
        fresh = tu.cert(work, 'server2', m.ca, '/CN=localhost', 'DNS:localhost,IP:127.0.0.1,IP:::1')
        shutil.copy(fresh[0], m.server[0])
        shutil.copy(fresh[1], m.server[1])
        os.kill(proc.pid, signal.SIGHUP)
        want = ssl.PEM_cert_to_DER_cert(open(fresh[0]).read())

        def served():
            try:  # a handshake the reload cut (docs/admin.md says so) is tried again
                return tls_connect(ca=CA).getpeercert(binary_form=True)
            except (ssl.SSLError, OSError):
                return None
        check('SIGHUP: new connections get the new certificate', wait_for(lambda: served() == want, 10) and
              before != want)
        check('SIGHUP: the log says so', 'admin https takes its certificate files again' in log())

        # HTTP-level refusals.
        st, hd, b = tu.post('127.0.0.1', HPORT, None, CA, method='GET', **admin)
        check('GET: 405 with Allow: POST', st == 405 and hd.get('Allow') == 'POST', f'{st} {hd}')
        st, hd, b = tu.post('127.0.0.1', HPORT, tu.rpc('config.get'), CA, path='/other', **admin)
        check('another path: 404 naming /rpc', st == 404 and '/rpc' in b['error']['message'], f'{st} {b}')
        st, hd, b = tu.post('127.0.0.1', HPORT, {'jsonrpc': '2.0', 'method': 'stats.reset'}, CA, **admin)
        check('a notification: 204, no body', st == 204 and b == b'', f'{st} {b}')
        st, hd, b = tu.post('127.0.0.1', HPORT, b'{"jsonrpc": "2.0", "id": 1, "method": ', CA, **admin)
        check('malformed JSON: the dispatcher\'s -32700', st == 200 and b['error']['code'] == -32700, f'{st} {b}')

        # Bounds: a body past 1 MiB, announced or not; a slowloris; connections; backoff.
        s = tls_connect(ca=CA)
        s.sendall(f'POST /rpc HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {new[0]}\r\n'
                  f'Content-Length: {64 << 20}\r\n\r\n'.encode())
        s.settimeout(10)
        head = s.recv(4096).decode(errors='replace')
        check('Content-Length of 64 MiB: 413 before any of the body is read', head.startswith('HTTP/1.1 413'), head)
        s.close()
        s = tls_connect(ca=CA)
        s.sendall(f'POST /rpc HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {new[0]}\r\n'
                  'Transfer-Encoding: chunked\r\n\r\n'.encode())
        chunk = b'x' * 65536
        try:
            for _ in range(20):
                s.sendall(b'%x\r\n' % len(chunk) + chunk + b'\r\n')
            s.sendall(b'0\r\n\r\n')
        except OSError:
            pass
        s.settimeout(10)
        head = s.recv(4096).decode(errors='replace')
        check('a chunked body growing past 1 MiB: 413', head.startswith('HTTP/1.1 413'), head)
        s.close()

        slow = tls_connect(ca=CA)
        t0 = time.monotonic()
        req = f'POST /rpc HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {new[0]}\r\nX-Pad: '.encode()
        cut = False
        for i in range(40):  # a byte every 0.25 s: never idle, never done
            try:
                slow.sendall(req[i:i + 1] if i < len(req) else b'a')
            except OSError:
                cut = True
                break
            if i == 4:
                st, b = call('config.get', **admin)
                check('others are served while a slowloris trickles', st == 200, f'{st}')
            time.sleep(0.25)
            if time.monotonic() - t0 > TIMEOUT + 3:
                break
        cut = cut or closed_by_peer(slow, 2)
        took = time.monotonic() - t0
        check(f'a slowloris is cut at request_timeout ({TIMEOUT} s) though it never goes idle',
              cut and took < TIMEOUT + 3, f'cut {cut} after {took:.1f} s')
        slow.close()

        held = [tls_connect('127.0.0.2', ca=CA) for _ in range(4)]
        extra = tls_connect_or_none('127.0.0.2', CA)
        check('a 5th connection from one address is refused (max_connections_per_address 4)',
              extra is None or closed_by_peer(extra, 3))
        st, b = call('config.get', **admin)
        check('another address is still served', st == 200, f'{st}')
        held += [tls_connect('127.0.0.3', ca=CA) for _ in range(4)]
        extra = tls_connect_or_none('127.0.0.4', CA)
        check('a 9th connection in all is refused (max_connections 8)', extra is None or closed_by_peer(extra, 3))
        for h in held:
            h.close()
        check('once they close, requests are served again',
              wait_for(lambda: call('config.get', **admin)[0] == 200, 10))

        b0 = metric('backoff')
        flood = []
        for _ in range(12):
            st, hd, _b = tu.post('127.0.0.1', HPORT, tu.rpc('config.get'), CA, token=tokens['bad'][0], src='127.0.0.5')
            flood.append((st, hd.get('Retry-After')))
        check('a flood of bad tokens: 5 refused 401, then 429 with Retry-After',
              [s for s, _ in flood[:5]] == [401] * 5 and all(s == 429 and r for s, r in flood[5:]), repr(flood))
        st, hd, _b = tu.post('127.0.0.1', HPORT, tu.rpc('config.get'), CA, src='127.0.0.5', **admin)
        check('during the backoff even a good token from that address waits (429)', st == 429, f'{st}')
        check('the backoff refusals are counted', metric('backoff') == b0 + 8, str(metric('backoff')))
        st, _h, b = tu.post('127.0.0.1', HPORT, tu.rpc('config.get'), CA, src='127.0.0.6', **admin)
        check('another address is not held back by it', st == 200, f'{st} {b}')

        # sslscan: nothing below TLS 1.2, only ECDHE with AEAD ciphers.
        if shutil.which('sslscan'):
            x = subprocess.run(['sslscan', '--no-colour', '--xml=-', f'127.0.0.1:{HPORT}'], capture_output=True,
                               text=True, timeout=120).stdout
            protos = dict(re.findall(r'<protocol type="[^"]*" version="([\d.]+)" enabled="(\d)"', x))
            ciphers = re.findall(r'<cipher status="[^"]*" sslversion="([^"]+)" bits="\d+" cipher="([^"]+)"', x)
            check('sslscan: SSLv2, SSLv3, TLS 1.0 and 1.1 off; TLS 1.2 and 1.3 on',
                  protos.get('2') in ('0', None) and protos.get('3') == '0' and protos.get('1.0') == '0' and
                  protos.get('1.1') == '0' and protos.get('1.2') == '1' and protos.get('1.3') == '1', repr(protos))
            weak = [c for v, c in ciphers if not (c.startswith('TLS_AES_') or c.startswith('TLS_CHACHA20') or
                                                  (c.startswith('ECDHE-') and ('GCM' in c or 'CHACHA20' in c)))]
            check('sslscan: every accepted cipher is ECDHE with AES-GCM or ChaCha20-Poly1305 (or TLS 1.3\'s)',
                  ciphers and not weak, f'{weak} of {ciphers}')
        else:
            check('sslscan is installed (tools/deps.sh)', False)

        # curl, a second client: a client certificate, and a token from a header file (never on its command line).
        body = json.dumps(tu.rpc('stats.reset'))
        cp = subprocess.run(['curl', '-sS', '--cacert', CA, '--cert', m.ops[0], '--key', m.ops[1], '-d', body,
                             f'https://127.0.0.1:{HPORT}/rpc'], capture_output=True, text=True, timeout=30)
        check('curl with the operator\'s certificate: stats.reset', cp.returncode == 0 and
              json.loads(cp.stdout or '{}').get('result') == {}, cp.stdout + cp.stderr)
        hdr = os.path.join(work, 'auth.hdr')
        with open(os.open(hdr, os.O_WRONLY | os.O_CREAT, 0o600), 'w') as f:
            f.write(f'Authorization: Bearer {new[0]}\n')
        cp = subprocess.run(['curl', '-sS', '--cacert', CA, '-H', f'@{hdr}', '-d',
                             json.dumps(tu.rpc('config.get')), f'https://localhost:{HPORT}/rpc'],
                            capture_output=True, text=True, timeout=30)
        check('curl with the token from a header file, by name (localhost): config.get',
              cp.returncode == 0 and 'result' in json.loads(cp.stdout or '{}'), cp.stdout + cp.stderr)
        cp = subprocess.run(['curl', '-sS', '--tlsv1.1', '--tls-max', '1.1', '--cacert', CA, '-d', '{}',
                             f'https://127.0.0.1:{HPORT}/rpc'], capture_output=True, text=True, timeout=30)
        check('curl limited to TLS 1.1 cannot connect', cp.returncode != 0, cp.stdout + cp.stderr)

        check('the local socket still answers root', 'result' in Rpc(sock).call('config.get'))
        check('isertd is still up', proc.poll() is None)
    finally:
        end_isertd(proc, work)
    checks.finish()


def tls_connect_or_none(src, ca):
    try:
        return tls_connect(src, ca=ca)
    except (ssl.SSLError, OSError):
        return None


if __name__ == '__main__':
    main()
