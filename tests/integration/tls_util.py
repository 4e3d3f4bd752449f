"""TLS material for the tests of the HTTPS admin door, made with the openssl command in a test's folder: a CA,
a server certificate for localhost, 127.0.0.1 and ::1, client certificates (valid, expired, from another CA),
bearer tokens and their hash files; and a small HTTPS JSON-RPC client (Python's ssl, a second client beside
curl and iserctl)."""
import hashlib
import http.client
import json
import os
import secrets
import ssl
import subprocess


def _openssl(*args):
    subprocess.run(['openssl', *args], check=True, capture_output=True)


def _key(path):
    _openssl('genpkey', '-algorithm', 'EC', '-pkeyopt', 'ec_paramgen_curve:P-256', '-out', path)
    os.chmod(path, 0o600)


def ca(folder, name):
    """A self-signed CA: (cert path, key path)."""
    key, crt = os.path.join(folder, name + '.key'), os.path.join(folder, name + '.pem')
    _key(key)
    _openssl('req', '-x509', '-new', '-key', key, '-out', crt, '-days', '30', '-subj', f'/CN={name}')
    return crt, key


def cert(folder, name, ca_pair, subj, san=None, days=30):
    """A certificate signed by ca_pair; days -1 makes one that expired yesterday.  (cert path, key path)."""
    key, csr, crt = (os.path.join(folder, name + s) for s in ('.key', '.csr', '.pem'))
    _key(key)
    _openssl('req', '-new', '-key', key, '-out', csr, '-subj', subj)
    args = ['x509', '-req', '-in', csr, '-CA', ca_pair[0], '-CAkey', ca_pair[1], '-CAcreateserial', '-out', crt,
            '-days', str(days)]
    if san:
        ext = os.path.join(folder, name + '.ext')
        with open(ext, 'w') as f:
            f.write(f'subjectAltName={san}\n')
        args += ['-extfile', ext]
    _openssl(*args)
    return crt, key


def token(folder, name):
    """A 256-bit token in NAME.token (what a client holds) and its hash in NAME.sha256 (what isertd holds)."""
    t = secrets.token_hex(32)
    tok, hsh = os.path.join(folder, name + '.token'), os.path.join(folder, name + '.sha256')
    for path, text in ((tok, t), (hsh, 'sha256:' + hashlib.sha256(t.encode()).hexdigest() + '\n')):
        with open(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600), 'w') as f:
            f.write(text)
    return t, tok, hsh


class Material:
    """Everything one test needs, in folder."""

    def __init__(self, folder):
        self.folder = folder
        self.ca = ca(folder, 'ca')
        self.other_ca = ca(folder, 'other-ca')
        self.server = cert(folder, 'server', self.ca, '/CN=localhost', 'DNS:localhost,IP:127.0.0.1,IP:::1')
        self.ops = cert(folder, 'ops', self.ca, '/O=Example/CN=ops', 'DNS:ops.example.com')
        self.mon = cert(folder, 'mon', self.ca, '/CN=mon', 'DNS:mon.example.com')
        self.stranger = cert(folder, 'stranger', self.ca, '/CN=stranger')
        self.expired = cert(folder, 'expired', self.ca, '/O=Example/CN=ops', 'DNS:ops.example.com', days=-1)
        self.foreign = cert(folder, 'foreign', self.other_ca, '/O=Example/CN=ops', 'DNS:ops.example.com')


def context(cafile, client=None):
    ctx = ssl.create_default_context(cafile=cafile)
    if client:
        ctx.load_cert_chain(client[0], client[1])
    return ctx


def post(host, port, body, cafile, client=None, token=None, path='/rpc', method='POST', headers=None, timeout=15,
         src=None):
    """One HTTPS request (from source address src): (status, headers dict, parsed JSON body or the raw bytes)."""
    c = http.client.HTTPSConnection(host, port, context=context(cafile, client), timeout=timeout,
                                    source_address=(src, 0) if src else None)
    h = {'Content-Type': 'application/json'}
    if token:
        h['Authorization'] = 'Bearer ' + token
    h.update(headers or {})
    data = body if isinstance(body, (bytes, type(None))) else json.dumps(body).encode()
    try:
        c.request(method, path, body=data, headers=h)
        r = c.getresponse()
        raw = r.read()
        try:
            parsed = json.loads(raw)
        except ValueError:
            parsed = raw
        return r.status, dict(r.getheaders()), parsed
    finally:
        c.close()


def rpc(method, params=None, rid=1):
    req = {'jsonrpc': '2.0', 'id': rid, 'method': method}
    if params is not None:
        req['params'] = params
    return req
