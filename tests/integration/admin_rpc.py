"""What the tests that drive isertd's admin socket share: a raw JSON-RPC
client, and stopping isertd."""
import json
import socket
import subprocess


class Rpc:
    """A raw JSON-RPC client of the socket (iserctl is tested separately)."""

    def __init__(self, path):
        self.path = path
        self.id = 0

    def raw(self, data, read=True):
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.settimeout(10)
        s.connect(self.path)
        try:
            s.sendall(data)
            s.shutdown(socket.SHUT_WR)
        except BrokenPipeError:
            pass  # isertd answered (a request too large) and closed: the answer is there to read
        out = bytearray()  # answers of many MiB (stats of thousands of LUNs) come in many pieces
        if read:
            while not out.endswith(b'\n'):
                try:
                    b = s.recv(65536)
                except ConnectionResetError:
                    break
                if not b:
                    break
                out += b
        s.close()
        # Every answer is UTF-8 (a peer's name comes in its shown form): a strict decode checks it.
        return json.loads(out.decode('utf-8')) if out.strip() else None

    def call(self, method, params=None):
        self.id += 1
        req = {'jsonrpc': '2.0', 'id': self.id, 'method': method}
        if params is not None:
            req['params'] = params
        return self.raw(json.dumps(req).encode())

    def stats_rows(self, params=None, limit=None):
        """Every row of the stats luns section, following the pages; (rows, number of pages)."""
        params = dict(params or {}, sections=['luns'])
        if limit:
            params['limit'] = limit
        rows, pages = [], 0
        while True:
            r = self.call('stats', params)['result']
            rows += r['luns']
            pages += 1
            if not r.get('more'):
                return rows, pages
            params['cursor'] = r['cursor']


def shown(raw):
    """A peer's name (bytes) as isertd shows it (common/utf8.h): printable UTF-8 as it is; each byte of a
    control character, of what is not UTF-8, and each backslash as \\xNN."""
    out, i = [], 0
    while i < len(raw):
        ch = None
        for n in (1, 2, 3, 4):
            try:
                ch = raw[i:i + n].decode('utf-8')
                break
            except UnicodeDecodeError:
                pass
        n = len(ch.encode()) if ch else 1
        if ch and ch != '\\' and not (ord(ch) < 0x20 or 0x7f <= ord(ch) <= 0x9f):
            out.append(ch)
        else:
            out.extend('\\x%02x' % b for b in raw[i:i + n])
        i += n
    return ''.join(out)


def stop_isertd(proc, timeout=15):
    """SIGTERM, then SIGKILL after timeout seconds; returns the exit status (-9 when killed)."""
    proc.terminate()
    try:
        return proc.wait(timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
        return -9
