"""What the tests that drive isertd's admin socket share: a raw JSON-RPC
client, and starting and stopping isertd."""
import json
import os
import shutil
import socket
import subprocess

import checks


class Rpc:
    """A raw JSON-RPC client of the socket (iserctl is tested separately)."""

    def __init__(self, path, separators=None):
        self.path = path
        self.id = 0
        self.separators = separators  # json.dumps's, for the requests' text

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
        return self.raw(json.dumps(req, separators=self.separators).encode())

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


def port_open(port, host='127.0.0.1'):
    """True once a TCP connection to HOST:PORT is accepted (and closed at once)."""
    try:
        socket.create_connection((host, port), timeout=1).close()
        return True
    except OSError:
        return False


def start_isertd(isertd, work, cfgfile, *args, admin='admin.sock', state='state', log='isertd.log', ready=None,
                 seconds=5, prefix=(), **popen):
    """isertd -c CFGFILE --admin-socket WORK/admin.sock --state-dir WORK/state ARGS..., its output in
    WORK/isertd.log; once the socket is there (at most 5 s): (the process, the socket's path).  Socket and
    state folder are this test's own: the defaults (/run/isertd.sock, /var/lib/isert) are shared with every
    other isertd on the host, a test running beside this one included.

    admin, state: a name in WORK, 'none' (isertd's own word: no socket, no state folder), or None to leave
    the option out (the host's default: only for a test that runs alone).  log: a name in WORK, or an open
    file (or subprocess.DEVNULL) for isertd's output.  ready: what to wait for instead of the socket, a
    function or a port (ready once 127.0.0.1:PORT accepts a connection); at most SECONDS, and not past
    isertd's exit.  prefix: a command isertd runs under (prlimit, setpriv).  popen: more for
    subprocess.Popen (env, preexec_fn, stderr).  The socket's path is None without a socket."""
    sock = os.path.join(work, admin) if admin not in (None, 'none') else None
    cmd = [*prefix, isertd, '-c', cfgfile]
    if admin is not None:
        cmd += ['--admin-socket', sock or 'none']
    if state is not None:
        cmd += ['--state-dir', state if state == 'none' else os.path.join(work, state)]
    out = open(os.path.join(work, log), 'w') if isinstance(log, str) else log
    popen.setdefault('stderr', subprocess.STDOUT)
    proc = subprocess.Popen(cmd + list(args), stdout=out, **popen)
    if isinstance(log, str):
        out.close()
    if isinstance(ready, int):
        port = ready
        ready = lambda: port_open(port)  # noqa: E731
    elif ready is None:
        ready = (lambda: os.path.exists(sock)) if sock else (lambda: True)
    checks.wait_for(lambda: ready() or proc.poll() is not None, seconds)
    return proc, sock


def end_isertd(proc, work):
    """Stop isertd (start_isertd's) and check that it exits 0; its log's tail when a check failed; WORK removed."""
    rc = stop_isertd(proc)
    checks.check('isertd exits 0', rc == 0, f'exit {rc}')
    if checks.failed:
        print(open(os.path.join(work, 'isertd.log')).read()[-3000:])
    shutil.rmtree(work, ignore_errors=True)
