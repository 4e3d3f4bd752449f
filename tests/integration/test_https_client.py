#!/usr/bin/env python3
"""iserctl --url against a fake of isertd's HTTPS admin listener
(docs/admin.md, "iserctl over HTTPS"): Python's ssl and http.server speaking the
protocol's client-facing half, with a CA, server and client certificates
made here with openssl.  Checks the request iserctl sends (POST /rpc, its
headers, the JSON-RPC body, the bearer token from a file and from
$ISERCTL_TOKEN, the client certificate the server sees), that the answer
prints as it does over the socket, and every refusal: an untrusted
certificate, a name mismatch, URLs that could carry a secret or are not
https, a token file others can read, an answer that is not JSON, one past
the bound, a server that never answers; iserctl token create/hash.  Last,
the same against isertd's real listener: answers as over its socket, a
change, each credential and a refused role.

usage: test_https_client.py ISERTD ISERCTL PORT   (PORT and PORT+1)"""
import hashlib
import http.server
import json
import os
import socket
import socketserver
import ssl
import stat
import subprocess
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import checks  # noqa: E402
from admin_rpc import end_isertd, start_isertd  # noqa: E402
from checks import check  # noqa: E402

ISERTD, ISERCTL, PORT = sys.argv[1], sys.argv[2], int(sys.argv[3])
WORK = checks.workdir('isert-https-cli-')
ANSWER_MAX = 64 << 20


def path(name):
    return os.path.join(WORK, name)


def openssl(*args):
    subprocess.run(['openssl', *args], check=True, capture_output=True, timeout=60)


def make_cert(name, cn, ca, sans=None, client=False):
    """name.key and name.pem, signed by ca (ca.pem/ca.key), or a CA of its own when ca is None."""
    key, pem = path(name + '.key'), path(name + '.pem')
    openssl('req', '-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:prime256v1', '-nodes', '-keyout', key,
            '-subj', f'/CN={cn}', '-out', path(name + '.csr'))
    ext = path(name + '.ext')
    with open(ext, 'w') as f:
        if ca is None:
            f.write('basicConstraints=critical,CA:TRUE\nkeyUsage=critical,keyCertSign,cRLSign\n')
        else:
            f.write('basicConstraints=CA:FALSE\n')
            f.write(f'extendedKeyUsage={"clientAuth" if client else "serverAuth"}\n')
            if sans:
                f.write('subjectAltName=' + ','.join(sans) + '\n')
    sign = ['-signkey', key] if ca is None else ['-CA', path(ca + '.pem'), '-CAkey', path(ca + '.key'),
                                                  '-CAcreateserial']
    openssl('x509', '-req', '-in', path(name + '.csr'), '-days', '2', '-sha256', '-extfile', ext, '-out', pem,
            *sign)
    return pem, key


make_cert('ca', 'isert test CA', None)
make_cert('otherca', 'another CA', None)
make_cert('server', 'localhost', 'ca', ['DNS:localhost', 'IP:127.0.0.1', 'IP:::1'])
make_cert('wrongname', 'elsewhere', 'ca', ['DNS:elsewhere.example'])
make_cert('client', 'admin-client', 'ca', client=True)
make_cert('stranger', 'stranger', 'otherca', client=True)


def server_ctx(cert):
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.minimum_version = ssl.TLSVersion.TLSv1_2
    ctx.load_cert_chain(path(cert + '.pem'), path(cert + '.key'))
    ctx.load_verify_locations(path('ca.pem'))
    ctx.verify_mode = ssl.CERT_OPTIONAL
    return ctx


class Fake:
    """What the fake answers next, and the requests it saw."""
    answers = {}          # method -> the JSON-RPC answer object ('result' or 'error')
    mode = 'json'         # json | notjson | big | hang | status401
    seen = []
    release = threading.Event()


class Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = 'HTTP/1.1'

    def log_message(self, *a):
        pass

    def do_POST(self):
        n = int(self.headers.get('Content-Length', '0'))
        body = self.rfile.read(n)
        peer = self.connection.getpeercert()
        subject = dict(x[0] for x in peer['subject']) if peer else None
        Fake.seen.append({'method': 'POST', 'path': self.path, 'headers': dict(self.headers.items()),
                          'body': body, 'client_cn': subject and subject.get('commonName'),
                          'version': self.request_version, 'tls': self.connection.version()})
        mode = Fake.mode
        if mode == 'hang':
            Fake.release.wait(60)
            return
        if mode == 'notjson':
            self.reply(502, b'<html>bad gateway</html>', 'text/html')
            return
        if mode == 'big':
            # Says more than the bound: iserctl must refuse without reading it.
            self.send_response(200)
            self.send_header('Content-Type', 'application/json')
            self.send_header('Content-Length', str(ANSWER_MAX + 1))
            self.end_headers()
            try:
                self.wfile.write(b'{"jsonrpc":"2.0","result":"' + b'x' * 65536)
            except OSError:
                pass
            return
        if mode == 'bigclose':
            # No Content-Length: read to the end, which comes past the bound.
            self.send_response(200)
            self.send_header('Content-Type', 'application/json')
            self.send_header('Connection', 'close')
            self.end_headers()
            chunk = b' ' * (1 << 20)
            try:
                for _ in range(ANSWER_MAX // len(chunk) + 2):
                    self.wfile.write(chunk)
            except OSError:
                pass
            self.close_connection = True
            return
        if mode == 'status401':
            self.reply(401, json.dumps({'jsonrpc': '2.0', 'error': {'code': -32001, 'message':
                                        'no or bad credentials'}, 'id': None}).encode())
            return
        req = json.loads(body)
        ans = dict(Fake.answers.get(req['method'], {'result': {}}))
        ans.update({'jsonrpc': '2.0', 'id': req['id']})
        self.reply(200, json.dumps(ans).encode())

    def reply(self, status, data, ctype='application/json'):
        self.send_response(status)
        self.send_header('Content-Type', ctype)
        self.send_header('Content-Length', str(len(data)))
        self.send_header('Connection', 'close')
        self.end_headers()
        self.wfile.write(data)
        self.close_connection = True


class TLSServer(socketserver.ThreadingMixIn, http.server.HTTPServer):
    daemon_threads = True
    allow_reuse_address = True

    def __init__(self, addr, family, cert):
        self.address_family = family
        self.ctx = server_ctx(cert)
        super().__init__(addr, Handler)

    def get_request(self):
        sock, addr = self.socket.accept()
        return sock, addr

    def finish_request(self, sock, addr):
        # The handshake in the request's thread: a client that fails it holds up no other.
        try:
            sock.settimeout(70)
            tls = self.ctx.wrap_socket(sock, server_side=True)
        except (ssl.SSLError, OSError):
            return
        try:
            super().finish_request(tls, addr)
        except (ssl.SSLError, OSError):
            pass


def serve(addr, family, cert):
    s = TLSServer(addr, family, cert)
    threading.Thread(target=s.serve_forever, daemon=True).start()
    return s


srv4 = serve(('127.0.0.1', PORT), socket.AF_INET, 'server')
try:
    srv6 = serve(('::1', PORT + 1), socket.AF_INET6, 'server')
except OSError as e:
    srv6 = None
    print(f'note: no IPv6 loopback here ({e}): the [::1] checks fail')

URL4 = f'https://127.0.0.1:{PORT}'
URLDNS = f'https://localhost:{PORT}'
URL6 = f'https://[::1]:{PORT + 1}'
ENV0 = {k: v for k, v in os.environ.items() if not k.startswith('ISERCTL_')}


def iserctl(*args, env=None, timeout=60):
    e = dict(ENV0)
    e.update(env or {})
    t0 = time.monotonic()
    p = subprocess.run([ISERCTL, *args], capture_output=True, text=True, timeout=timeout, env=e)
    return p.returncode, p.stdout, p.stderr, time.monotonic() - t0


def last():
    return Fake.seen[-1] if Fake.seen else {}


# A token and its hash, made by iserctl.
TOK, HASH = path('admin.token'), path('admin.hash')
rc, out, err, _ = iserctl('token', 'create', TOK, HASH)
check('token create', rc == 0, err)
check('token create: its line names both files and token_hash_file',
      TOK in out and HASH in out and 'token_hash_file' in out and out.count('\n') == 1, out)
token = open(TOK).read()
check('token file: 64 lowercase hex characters and a newline',
      len(token) == 65 and token.endswith('\n') and all(c in '0123456789abcdef' for c in token[:64]), repr(token))
token = token.strip()
hashtext = open(HASH).read()
check('hash file: sha256: and the SHA-256 of the token text (hashlib)',
      hashtext == 'sha256:' + hashlib.sha256(token.encode('ascii')).hexdigest() + '\n', hashtext)
check('token and hash files: mode 0600', stat.S_IMODE(os.stat(TOK).st_mode) == 0o600 and
      stat.S_IMODE(os.stat(HASH).st_mode) == 0o600, oct(os.stat(TOK).st_mode))
rc, out, err, _ = iserctl('token', 'hash', TOK)
check('token hash: the hash file\'s line', rc == 0 and out == hashtext, out + err)
rc, out, err, _ = iserctl('token', 'create', TOK, path('other.hash'))
check('token create: an existing token file is refused, not overwritten',
      rc != 0 and 'exists' in err and open(TOK).read().strip() == token and not os.path.exists(path('other.hash')),
      err)
rc, out, err, _ = iserctl('token', 'create', path('new.token'), HASH)
check('token create: an existing hash file is refused, and no token file is left',
      rc != 0 and 'exists' in err and open(HASH).read() == hashtext and not os.path.exists(path('new.token')), err)
rc2, out2, _, _ = iserctl('token', 'create', path('t2'), path('h2'))
check('token create: two tokens differ', rc2 == 0 and open(path('t2')).read() != open(TOK).read())

# The request, with the token from a file.
CA = ['--cacert', path('ca.pem')]
Fake.answers = {'acl.set': {'result': {'generation': 7, 'plan': []}}}
secret_params = ('{"iqn":"iqn.2026-11.org.isert:t","tpg":1,"initiator":"iqn.i",'
                 '"chap":{"userid":"u","password":"s3cret-chap-pw"}}')
rc, out, err, _ = iserctl('--url', URL4, *CA, '--token-file', TOK, 'call', 'acl.set', secret_params)
r = last()
h = {k.lower(): v for k, v in r.get('headers', {}).items()}
check('request: done', rc == 0, err)
check('request: POST /rpc HTTP/1.1', r.get('path') == '/rpc' and r.get('version') == 'HTTP/1.1', r.get('path'))
check('request: TLS 1.2 or 1.3', r.get('tls') in ('TLSv1.2', 'TLSv1.3'), r.get('tls'))
check('request: Content-Type application/json', h.get('content-type') == 'application/json', h)
check('request: Content-Length the body\'s', h.get('content-length') == str(len(r.get('body', b''))), h)
check('request: Host HOST:PORT', h.get('host') == f'127.0.0.1:{PORT}', h.get('host'))
check('request: Authorization: Bearer the token of --token-file', h.get('authorization') == 'Bearer ' + token,
      h.get('authorization'))
body = json.loads(r.get('body', b'{}'))
check('request: the JSON-RPC object the socket takes',
      body.get('jsonrpc') == '2.0' and body.get('id') == 1 and body.get('method') == 'acl.set' and
      body.get('params') == json.loads(secret_params), body)
check('request: no client certificate when none is given', r.get('client_cn') is None, r.get('client_cn'))

# The token from the environment; the client certificate.
rc, out, err, _ = iserctl('--url', URL4, *CA, '--cert', path('client.pem'), '--key', path('client.key'),
                          'config', env={'ISERCTL_TOKEN': token})
h = {k.lower(): v for k, v in last().get('headers', {}).items()}
check('ISERCTL_TOKEN: sent as the bearer token', rc == 0 and h.get('authorization') == 'Bearer ' + token,
      err + str(h.get('authorization')))
check('--cert/--key: the server sees the client certificate', last().get('client_cn') == 'admin-client',
      last().get('client_cn'))
rc, out, err, _ = iserctl('config', env={'ISERCTL_URL': URL4, 'ISERCTL_CACERT': path('ca.pem'),
                                         'ISERCTL_CERT': path('client.pem'), 'ISERCTL_KEY': path('client.key'),
                                         'ISERCTL_TOKEN_FILE': TOK})
h = {k.lower(): v for k, v in last().get('headers', {}).items()}
check('ISERCTL_URL, _CACERT, _CERT, _KEY, _TOKEN_FILE: used',
      rc == 0 and last().get('client_cn') == 'admin-client' and h.get('authorization') == 'Bearer ' + token, err)
n = len(Fake.seen)
rc, out, err, _ = iserctl('--url', URL4, *CA, 'config')
h = {k.lower(): v for k, v in last().get('headers', {}).items()}
check('no token: no Authorization header', rc == 0 and len(Fake.seen) == n + 1 and 'authorization' not in h, h)
rc, out, err, _ = iserctl('--url', URLDNS, *CA, 'config')
check('a DNS name (localhost): verified and served', rc == 0 and last().get('path') == '/rpc', err)

# The answer prints as it does over the socket.
CONFIG = {'backstores': [{'name': 'bs0', 'type': 'ram', 'size': 1048576, 'serial': 'é\u0007x'}],
          'targets': [{'iqn': 'iqn.2026-11.org.isert:t', 'tpgs': [{'tag': 1, 'enable': True, 'portals': [],
                                                                     'luns': [], 'acls': []}]}]}
Fake.answers = {'config.get': {'result': {'config': CONFIG, 'generation': 3}},
                'sessions': {'result': {'sessions': []}},
                'nope': {'error': {'code': -32601, 'message': 'no such method: nope'}},
                'stale': {'error': {'code': -32002, 'message': 'generation 2 is stale'}}}
SOCK = path('fake.sock')


def unix_fake():
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.bind(SOCK)
    s.listen(8)
    while True:
        c, _ = s.accept()
        data = b''
        while True:
            try:
                req = json.loads(data)
                break
            except ValueError:
                d = c.recv(65536)
                if not d:
                    req = None
                    break
                data += d
        if req:
            ans = dict(Fake.answers.get(req['method'], {'result': {}}))
            ans.update({'jsonrpc': '2.0', 'id': req['id']})
            c.sendall(json.dumps(ans).encode() + b'\n')
        c.close()


threading.Thread(target=unix_fake, daemon=True).start()
checks.wait_for(lambda: os.path.exists(SOCK))
for args in (['config'], ['ls'], ['--json', 'sessions'], ['--json', 'call', 'nope'], ['call', 'stale', '{}']):
    a = iserctl('-s', SOCK, *args)
    b = iserctl('--url', URL4, *CA, *args)
    check(f'{" ".join(args)}: output and exit status as over the socket',
          a[:3] == b[:3] and (a[0] != 0 or a[1]), f'socket {a[:3]} https {b[:3]}')
check('a JSON-RPC error: EX_REFUSED (1); stale: 5', iserctl('--url', URL4, *CA, 'call', 'nope')[0] == 1 and
      iserctl('--url', URL4, *CA, 'call', 'stale', '{}')[0] == 5)
Fake.mode = 'status401'
rc, out, err, _ = iserctl('--url', URL4, *CA, 'config')
check('HTTP 401 with its JSON-RPC error: the error\'s message, EX_REFUSED',
      rc == 1 and 'no or bad credentials' in err, f'{rc} {err}')
Fake.mode = 'json'

if srv6:
    rc, out, err, _ = iserctl('--url', URL6, *CA, 'config')
    h = {k.lower(): v for k, v in last().get('headers', {}).items()}
    check('[::1]: verified against the IP SAN, Host in brackets', rc == 0 and h.get('host') == f'[::1]:{PORT + 1}',
          err + str(h.get('host')))
else:
    check('[::1]: an IPv6 loopback to test on', False)

# Refusals of the server's certificate.
rc, out, err, _ = iserctl('--url', URL4, '--cacert', path('otherca.pem'), 'config')
check('untrusted certificate: refused, EX_UNREACHABLE, names --cacert',
      rc == 3 and 'not trusted' in err and '--cacert' in err, f'{rc} {err}')
rc, out, err, _ = iserctl('--url', URL4, 'config', env={'SSL_CERT_FILE': path('otherca.pem'),
                                                         'SSL_CERT_DIR': WORK})
check('untrusted by the default store: refused, says to give --cacert', rc == 3 and '--cacert' in err,
      f'{rc} {err}')
if srv6:
    srv6.ctx = server_ctx('wrongname')
    n = len(Fake.seen)
    rc, out, err, _ = iserctl('--url', URL6, *CA, '--token-file', TOK, 'config')
    check('name mismatch ([::1], a certificate for elsewhere.example only): refused before any request',
          rc == 3 and 'name mismatch' in err and 'elsewhere.example' in err and len(Fake.seen) == n, f'{rc} {err}')
    srv6.ctx = server_ctx('server')
srv4.ctx = server_ctx('wrongname')
n = len(Fake.seen)
rc, out, err, _ = iserctl('--url', URL4, *CA, '--token-file', TOK, 'config')
check('name mismatch (127.0.0.1, a certificate for elsewhere.example only): refused before any request',
      rc == 3 and 'name mismatch' in err and len(Fake.seen) == n, f'{rc} {err}')
srv4.ctx = server_ctx('server')

# A server that wants a client certificate it trusts.
strict = server_ctx('server')
strict.verify_mode = ssl.CERT_REQUIRED
srv4.ctx = strict
rc, out, err, _ = iserctl('--url', URL4, *CA, 'config')
check('no client certificate where one is required: the alert, and --cert named',
      rc == 3 and 'alert' in err and '--cert' in err, f'{rc} {err}')
rc, out, err, _ = iserctl('--url', URL4, *CA, '--cert', path('stranger.pem'), '--key', path('stranger.key'),
                          'config')
check('a client certificate of another CA: the alert', rc == 3 and 'alert' in err, f'{rc} {err}')
rc, out, err, _ = iserctl('--url', URL4, *CA, '--cert', path('client.pem'), '--key', path('client.key'), 'config')
check('the right client certificate: served', rc == 0, err)
srv4.ctx = server_ctx('server')
rc, out, err, _ = iserctl('--url', URL4, *CA, '--cert', path('client.pem'), '--key', path('stranger.key'), 'config')
check('--key not the key of --cert: EX_USAGE', rc == 2 and '--key' in err, f'{rc} {err}')

# URLs and options refused before anything is sent.
n = len(Fake.seen)
for url, want in ((f'https://admin:pw@127.0.0.1:{PORT}', 'user-info'),
                  (f'https://127.0.0.1:{PORT}/?token={token}', 'query'),
                  (f'https://127.0.0.1:{PORT}#{token}', 'fragment'),
                  (f'http://127.0.0.1:{PORT}', 'only https://'),
                  (f'127.0.0.1:{PORT}', 'only https://'),
                  (f'https://127.0.0.1:{PORT}/admin', '/rpc'),
                  ('https://[::1:99', "'['"),
                  ('https://127.0.0.1:99999', 'port')):
    rc, out, err, _ = iserctl('--url', url, *CA, 'config')
    check(f'--url {want}: refused (EX_USAGE), says why', rc == 2 and want in err, f'{rc} {err}')
    check(f'--url {want}: no secret echoed', 'pw@' not in err and token not in err, err)
rc, out, err, _ = iserctl('config', env={'ISERCTL_URL': f'https://u:pw@127.0.0.1:{PORT}'})
check('ISERCTL_URL with user-info: refused too', rc == 2 and 'user-info' in err and 'pw' not in err, err)
rc, out, err, _ = iserctl('--url', URL4, '-s', SOCK, 'config')
check('--socket and --url: refused', rc == 2 and '--socket' in err and '--url' in err, err)
rc, out, err, _ = iserctl('-s', SOCK, '--cacert', path('ca.pem'), 'config')
check('--cacert without --url: refused', rc == 2 and '--url' in err, err)
rc, out, err, _ = iserctl('-s', SOCK, 'config', env={'ISERCTL_URL': URL4})
check('--socket given: it wins over ISERCTL_URL', rc == 0 and len(Fake.seen) == n, f'{rc} {err}')
rc, out, err, _ = iserctl('--url', URL4, *CA, '--cert', path('client.pem'), 'config')
check('--cert without --key: refused', rc == 2 and '--key' in err, err)
rc, out, err, _ = iserctl('--url', URL4, *CA, '--token', token, 'config')
check('there is no --token option', rc == 2, f'{rc} {err}')
rc, out, err, _ = iserctl('--url', URL4, *CA, 'config', env={'ISERCTL_TOKEN': 'abc'})
check('ISERCTL_TOKEN not a token: refused', rc == 2 and 'ISERCTL_TOKEN' in err and 'abc' not in err, err)
check('nothing reached the server', len(Fake.seen) == n, len(Fake.seen) - n)

# Token files others may read.
LOOSE = path('loose.token')
with open(LOOSE, 'w') as f:
    f.write(token + '\n')
os.chmod(LOOSE, 0o644)
rc, out, err, _ = iserctl('--url', URL4, *CA, '--token-file', LOOSE, 'config')
check('a 0644 token file: refused, says chmod 600, nothing sent',
      rc == 2 and 'chmod 600' in err and '0644' in err and len(Fake.seen) == n, err)
os.chmod(LOOSE, 0o640)
rc, out, err, _ = iserctl('token', 'hash', LOOSE)
check('token hash of a 0640 file: refused, names its group', rc == 2 and 'its group' in err, err)
os.chmod(LOOSE, 0o600)
with open(LOOSE, 'w') as f:
    f.write(token.upper() + '\n')
rc, out, err, _ = iserctl('--url', URL4, *CA, '--token-file', LOOSE, 'config')
check('a token file that holds no token: refused', rc == 2 and 'not a token' in err, err)

# Answers iserctl cannot use.
Fake.mode = 'notjson'
rc, out, err, _ = iserctl('--url', URL4, *CA, 'config')
check('a 502 HTML answer: EX_UNREACHABLE, the message has "HTTP 502 Bad Gateway"',
      rc == 3 and 'HTTP 502 Bad Gateway' in err, f'{rc} {err}')
Fake.mode = 'big'
rc, out, err, t = iserctl('--url', URL4, *CA, 'config')
check('an answer past 64 MiB (Content-Length): refused', rc == 3 and '64 MiB' in err, f'{rc} {err}')
Fake.mode = 'bigclose'
rc, out, err, t = iserctl('--url', URL4, *CA, 'config')
check('an answer past 64 MiB (read to the end): refused', rc == 3 and '64 MiB' in err, f'{rc} {err}')
Fake.mode = 'hang'
rc, out, err, t = iserctl('--url', URL4, *CA, 'config', timeout=90)
check('a server that never answers: EX_UNREACHABLE after the timeout (30 s)',
      rc == 3 and 'did not answer within 30 s' in err and 29 <= t < 60, f'{rc} {t:.1f}s {err}')
Fake.release.set()
Fake.mode = 'json'
rc, out, err, _ = iserctl('--url', f'https://127.0.0.1:{PORT + 1}', *CA, 'config')
check('nobody listening: connection refused, EX_UNREACHABLE', rc == 3 and 'Connection refused' in err, err)

# The real listener, on the fakes' ports: the portal on PORT, admin_https on PORT+1.
for s in (srv4, srv6):
    if s:
        s.shutdown()
        s.server_close()
RTOK, RHASH = path('reader.token'), path('reader.hash')
iserctl('token', 'create', RTOK, RHASH)
IQN = 'iqn.2026-11.org.isert:https-client'
cfg = {'global': {'admin_https': {
    'listen': f'127.0.0.1:{PORT + 1}', 'certificate': path('server.pem'), 'key': path('server.key'),
    'client_ca': path('ca.pem'), 'principals': [
        {'name': 'bot', 'role': 'admin', 'token_hash_file': HASH},
        {'name': 'watcher', 'role': 'reader', 'token_hash_file': RHASH},
        {'name': 'ops', 'role': 'operator', 'subject': 'CN=admin-client'}]}},
    'backstores': [{'name': 'r1', 'type': 'ram', 'size': '16M'}],
    'targets': [{'iqn': IQN, 'tpgs': [{'tag': 1, 'portals': [{'ip': '127.0.0.1', 'port': PORT}],
                                       'luns': [{'lun': 0, 'backstore': 'r1'}]}]}]}
for f in ('server.key', 'client.key'):
    os.chmod(path(f), 0o600)
with open(path('isertd.json'), 'w') as f:
    json.dump(cfg, f)
proc, sock = start_isertd(ISERTD, WORK, path('isertd.json'), ready=PORT + 1)
REAL = ['--url', f'https://127.0.0.1:{PORT + 1}', '--cacert', path('ca.pem')]
for args in (['ls'], ['config'], ['--json', 'sessions'], ['paths'], ['stats'], ['call', 'rpc.methods']):
    a = iserctl('-s', sock, *args)
    b = iserctl(*REAL, '--token-file', TOK, *args)
    check(f'isertd: {" ".join(args)} as over its socket', a[:3] == b[:3] and a[0] == 0, f'{a[:3]} {b[:3]}'[:600])
rc, out, err, _ = iserctl(*REAL, '--token-file', TOK, 'create', '/backstores/r2', 'type=ram', 'size=8M')
check('isertd: a change by the admin token', rc == 0 and 'r2' in iserctl('-s', sock, 'paths')[1], f'{rc} {err}')
rc, out, err, _ = iserctl(*REAL, '--token-file', RTOK, 'delete', '/backstores/r2')
check('isertd: a reader\'s change refused (403): exit 1, the role named',
      rc == 1 and 'reader' in err and 'r2' in iserctl('-s', sock, 'paths')[1], f'{rc} {err}')
rc, out, err, _ = iserctl(*REAL, 'ls')
check('isertd: no credentials (401): exit 1 with its message', rc == 1 and err.startswith('iserctl: '), f'{rc} {err}')
rc, out, err, _ = iserctl(*REAL, '--cert', path('client.pem'), '--key', path('client.key'), 'stats', 'reset')
check('isertd: the operator by client certificate resets statistics', rc == 0, f'{rc} {err}')
rc, out, err, _ = iserctl(*REAL, '--cert', path('stranger.pem'), '--key', path('stranger.key'), 'ls')
check('isertd: a client certificate of another CA refused: exit 1, said', rc == 1 and 'client certificate' in err,
      f'{rc} {err}')
end_isertd(proc, WORK)

checks.finish()
