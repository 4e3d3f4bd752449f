#!/usr/bin/env python3
"""Hostile and buggy peers against isertd over loopback TCP: each check tries
to make one peer crash, stall or exhaust the target (docs/security.md lists
what each one proves).  Every check also passes only if the target still
serves a well-behaved session afterwards.

usage: test_hostile.py ISERTD PORT [--strip-new-keys] [--only CHECK,...]
PORT .. PORT+29 are used.  --strip-new-keys removes the configuration keys
older isertd builds do not know, to run the same checks against them;
--only runs the named checks (function names below)."""
import json
import os
import signal
import socket
import struct
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import iscsi_client as ic  # noqa: E402
import checks  # noqa: E402
from admin_rpc import start_isertd  # noqa: E402
from checks import check  # noqa: E402

ISERTD = sys.argv[1]
PORT = int(sys.argv[2])
STRIP = '--strip-new-keys' in sys.argv
ONLY = sys.argv[sys.argv.index('--only') + 1].split(',') if '--only' in sys.argv else None
PFX = 'iqn.2026-11.org.isert.hostile'
TGT, HIDDEN = PFX + ':t', PFX + ':hidden'
RW, RO, RESET, CHAP = (PFX + ':' + n for n in ('rw', 'ro', 'reset', 'chap'))
QUEUE_DEPTH, MAX_IMMEDIATE = 16, 4
work = checks.workdir('isertd-hostile-')


def config(port, **glob):
    acl = lambda ini, wp=False, **kw: dict(initiator=ini, mapped_luns=[  # noqa: E731
        dict(mapped_lun=0, tpg_lun=0, write_protect=wp), dict(mapped_lun=1, tpg_lun=1, write_protect=wp)], **kw)
    cfg = {
        'backstores': [{'name': 'disk', 'type': 'ram', 'size': '64M'},
                       {'name': 'file', 'type': 'file', 'path': os.path.join(work, f'lun-{port}.img'), 'size': '64M'}],
        'targets': [
            {'iqn': TGT, 'tpgs': [{
                'tag': 1,
                'portals': [{'ip': '127.0.0.1', 'port': port}, {'ip': '127.0.0.1', 'port': port + 2, 'iser': True}],
                'luns': [{'lun': 0, 'backstore': 'disk'}, {'lun': 1, 'backstore': 'file'}],
                'acls': [acl(RW), acl(RO, True), acl(RESET, allow_target_reset=True),
                         acl(CHAP, chap={'userid': 'carol', 'password': 'carol-secret-12',
                                         'mutual_userid': 'target', 'mutual_password': 'target-secret-34'})],
                'params': {'QueueDepth': QUEUE_DEPTH, 'MaxImmediateCommands': MAX_IMMEDIATE, 'SessionBufferMB': 16}}]},
            {'iqn': HIDDEN, 'tpgs': [{'tag': 1, 'demo_mode': True, 'portals': [{'ip': '127.0.0.1', 'port': port + 1}],
                                      'luns': [{'lun': 0, 'backstore': 'disk'}]}]}],
        'global': dict({'login_timeout': 2, 'max_connections_per_host': 24, 'shutdown_timeout': 5}, **glob)}
    if STRIP:
        del cfg['global']
        for a in cfg['targets'][0]['tpgs'][0]['acls']:
            a.pop('allow_target_reset', None)
        for k in ('MaxImmediateCommands', 'SessionBufferMB'):
            del cfg['targets'][0]['tpgs'][0]['params'][k]
    return cfg


class Target:
    """One isertd on its own configuration; the log is kept for checks."""

    def __init__(self, port, prlimit=None, **glob):
        self.port = port
        self.cfg = os.path.join(work, f'isertd-{port}.json')
        with open(self.cfg, 'w') as f:
            json.dump(config(port, **glob), f)
        os.chmod(self.cfg, 0o644)  # world-readable on purpose: it holds CHAP secrets
        self.logname = os.path.join(work, f'isertd-{port}.log')
        # The host's default admin socket and state folder: this test runs alone.
        self.proc, _ = start_isertd(ISERTD, work, self.cfg, admin=None, state=None, log=f'isertd-{port}.log',
                                    prefix=['prlimit', f'--nofile={prlimit}:{prlimit}', '--'] if prlimit else [],
                                    ready=lambda: f'listening on 127.0.0.1:{port + 1}'.encode() in self.logtext())

    def logtext(self):
        with open(self.logname, 'rb') as f:
            return f.read()

    def stat(self, field):
        with open(f'/proc/{self.proc.pid}/status') as f:
            for line in f:
                if line.startswith(field + ':'):
                    return int(line.split()[1])
        return 0

    def cpu_ticks(self):
        with open(f'/proc/{self.proc.pid}/stat') as f:
            fields = f.read().rsplit(')', 1)[1].split()
        return int(fields[11]) + int(fields[12])

    def stop(self):
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        try:
            rc = self.proc.wait(15)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            rc = 'hung'
        return rc


def session(port, initiator=RW, target=TGT, src=None, **kw):
    c = ic.Conn(port, src=src)
    st = c.login(initiator, target, **kw)
    return c, st


def serves(t, label):
    """A fresh, well-behaved session works: log in, write, read back."""
    try:
        c, st = session(t.port, src='127.0.0.3')
        block = os.urandom(512)
        ok = st == 0 and c.command(bytes([0x2A, 0, 0, 0, 0, 9, 0, 0, 1, 0]), 512, write_data=block)[0] == 0
        ok = ok and c.command(bytes([0x28, 0, 0, 0, 0, 9, 0, 0, 1, 0]), 512, read=True)[1] == block
        c.close()
        check(f'{label}: a well-behaved session is still served', ok, f'login status {st:#x}')
    except Exception as e:  # noqa: BLE001 - any failure here is the finding
        check(f'{label}: a well-behaved session is still served', False, repr(e))


def collect(c, seconds, until=None):
    """PDUs the target sends within seconds (or until until(pdus) is true)."""
    pdus, end = [], time.time() + seconds
    while time.time() < end and not (until and until(pdus)):
        c.s.settimeout(max(0.01, end - time.time()))
        try:
            pdus.append(c.recv())
        except (socket.timeout, TimeoutError):
            break
        except (ConnectionError, OSError):
            pdus.append(('closed', None, None))
            break
    c.s.settimeout(5)
    return pdus


def count(pdus, op, reason=None):
    return sum(1 for o, b, _ in pdus if o == op and (reason is None or b[2] == reason))


def data_out(itt, ttt, datasn, offset, length, final, statsn):
    bhs = bytes([ic.OP_DATA_OUT, 0x80 if final else 0, 0, 0, 0]) + length.to_bytes(3, 'big') + b'\0' * 8
    return bhs + struct.pack('>IIIIIII', itt, ttt, 0, statsn, 0, datasn, offset) + b'\0' * 4


def tmf(c, function, lun=0):
    itt = c.next_itt()
    bhs = bytes([ic.OP_TMF | 0x40, 0x80 | function, 0, 0, 0, 0, 0, 0]) + struct.pack('>Q', lun << 48)
    bhs += struct.pack('>IIIIII', itt, 0xFFFFFFFF, c.cmdsn, c.statsn + 1, 0, 0) + b'\0' * 8
    c.send(bhs)
    for op, rbhs, _ in collect(c, 3, lambda p: any(o == ic.OP_TMF_RSP for o, _, _ in p)):
        if op == ic.OP_TMF_RSP:
            return rbhs[2]
    return None


def write10(lba, blocks):
    return bytes([0x2A, 0]) + struct.pack('>I', lba) + bytes([0]) + struct.pack('>H', blocks) + bytes([0])


def read10(lba, blocks):
    return bytes([0x28, 0]) + struct.pack('>I', lba) + bytes([0]) + struct.pack('>H', blocks) + bytes([0])


NO_IMMEDIATE = {'ImmediateData': 'No', 'InitialR2T': 'Yes'}


# -- finding 2: the CmdSN window, immediate commands --------------------------------------------------------------

def cmdsn_window(t):
    """1000 in-order 1 MiB WRITEs from an initiator that ignores MaxCmdSN: only QueueDepth get an R2T."""
    c, st = session(t.port, op_keys=NO_IMMEDIATE)
    vm0 = t.stat('VmSize')
    burst = b''.join(c.scsi_bhs(write10(2048 * (i % 32), 2048), 1 << 20, write=True) for i in range(1000))
    c.send_raw(burst)
    pdus = collect(c, 2)
    vm1 = t.stat('VmSize')
    r2ts = [b for o, b, _ in pdus if o == ic.OP_R2T]
    exp, mx = struct.unpack('>II', r2ts[-1][28:36]) if r2ts else (0, 0)
    check(f'1000 WRITEs ignoring the window: only QueueDepth ({QUEUE_DEPTH}) taken, the rest dropped',
          len(r2ts) == QUEUE_DEPTH, f'{len(r2ts)} R2Ts')
    check('the window is closed while QueueDepth commands are in flight (MaxCmdSN = ExpCmdSN - 1)',
          r2ts and (mx + 1) & 0xFFFFFFFF == exp, f'ExpCmdSN {exp} MaxCmdSN {mx}')
    check('target memory stays bounded (VmSize grew < 64 MiB)', vm1 - vm0 < 64 * 1024,
          f'VmSize +{(vm1 - vm0) // 1024} MiB')
    c.close()
    serves(t, 'after 1000 WRITEs past the window')


def immediate_cap(t):
    c, st = session(t.port, op_keys=NO_IMMEDIATE)
    burst = b''.join(c.scsi_bhs(write10(i * 8, 8), 4096, write=True, immediate=True) for i in range(32))
    c.send_raw(burst)
    pdus = collect(c, 1.5)
    check(f'32 immediate WRITEs at once: {MAX_IMMEDIATE} taken (MaxImmediateCommands)',
          count(pdus, ic.OP_R2T) == MAX_IMMEDIATE, f'{count(pdus, ic.OP_R2T)} R2Ts')
    check('the others get Reject "immediate command reject" (0x06)',
          count(pdus, ic.OP_REJECT, 0x06) == 32 - MAX_IMMEDIATE, f'{count(pdus, ic.OP_REJECT, 0x06)} Rejects 0x06')
    c.close()
    serves(t, 'after a flood of immediate commands')


# -- finding 3: Data-Out for commands that have not started --------------------------------------------------------

def stash_bound(t):
    c, st = session(t.port, op_keys={'ImmediateData': 'Yes', 'InitialR2T': 'No', 'FirstBurstLength': '65536'})
    itt = c.next_itt()
    first = c.cmdsn
    c.cmdsn += 1  # leave a hole: the READ waits for CmdSN `first`
    c.send(c.scsi_bhs(read10(0, 8), 4096, read=True, itt=itt))
    rss0 = t.stat('VmRSS')
    chunk = os.urandom(256 * 1024)
    for i in range(200):
        c.send(data_out(itt, 0xFFFFFFFF, i, i * len(chunk), len(chunk), False, c.statsn + 1), chunk)
    pdus = collect(c, 1.5, lambda p: count(p, ic.OP_REJECT) >= 200)
    rss1 = t.stat('VmRSS')
    check('200 x 256 KiB Data-Out for a queued READ: every one rejected', count(pdus, ic.OP_REJECT) == 200,
          f'{count(pdus, ic.OP_REJECT)} Rejects')
    check('target memory stays bounded (RSS grew < 16 MiB)', rss1 - rss0 < 16 * 1024,
          f'RSS +{(rss1 - rss0) // 1024} MiB')
    # A queued WRITE keeps exactly its unsolicited data (FirstBurstLength), no more.
    witt = c.next_itt()
    c.send(c.scsi_bhs(write10(64, 2048), 1 << 20, write=True, itt=witt, final=False))
    for i in range(9):
        c.send(data_out(witt, 0xFFFFFFFF, i, i * 8192, 8192, False, c.statsn + 1), b'u' * 8192)
    pdus = collect(c, 1)
    check('a queued WRITE: 64 KiB of unsolicited Data-Out kept, the 8 KiB past FirstBurstLength rejected',
          count(pdus, ic.OP_REJECT) == 1, f'{count(pdus, ic.OP_REJECT)} Rejects')
    c.close()
    serves(t, 'after Data-Out floods for queued commands')


# -- finding 4: login time, connection caps, EMFILE ---------------------------------------------------------------

def closed_within(s, seconds):
    s.settimeout(seconds)
    try:
        while True:
            if not s.recv(4096):
                return True
    except (socket.timeout, TimeoutError):
        return False
    except OSError:
        return True


def login_timeout(t):
    idle = socket.create_connection(('127.0.0.1', t.port))
    slow = socket.create_connection(('127.0.0.1', t.port))
    t0 = time.time()
    closed = False
    while time.time() - t0 < 5 and not closed:
        try:
            slow.send(b'\x43')  # a byte at a time, never a whole login
        except OSError:
            closed = True
        closed = closed or closed_within(slow, 0.5)
    check('a login sending a byte every 0.5 s is closed after login_timeout (2 s)', closed and time.time() - t0 < 4,
          f'closed={closed} after {time.time() - t0:.1f} s')
    check('an idle connection is closed after login_timeout', closed_within(idle, 1.5))
    idle.close()
    slow.close()


def drained(port, seconds=10):
    """Wait until the target holds no connection on PORT (a peer's close is seen by its reactor a
    little later, and a count taken before would include it)."""
    out = ''
    for _ in range(int(seconds / 0.1)):
        out = subprocess.run(['ss', '-tnH', 'state', 'established', 'state', 'close-wait',
                              f'( sport = :{port} )'], capture_output=True, text=True).stdout
        if not out.strip():
            return True
        time.sleep(0.1)
    return False


def conn_caps(t):
    check('before the flood: the target holds no earlier connection on the portal', drained(t.port))
    socks = [socket.create_connection(('127.0.0.1', t.port)) for _ in range(30)]
    refused = sum(closed_within(s, 0.05) for s in socks)
    check('30 connections from one address: the 6 past max_connections_per_host (24) are closed at once',
          refused == 6, f'{refused} closed')
    c, st = session(t.port, src='127.0.0.2')
    check('meanwhile an initiator on another address logs in', st == 0, f'status {st:#x}')
    c.close()
    for s in socks:
        s.close()
    time.sleep(0.3)


def caps_global():
    """max_connections in all and per portal, max_sessions: past them, refused at once."""
    t = Target(PORT + 25, max_connections=6, max_connections_per_portal=4, max_sessions=2)
    a = [socket.create_connection(('127.0.0.1', t.port)) for _ in range(5)]
    check('max_connections_per_portal (4): the 5th connection to one portal is closed at once',
          sum(closed_within(s, 0.05) for s in a) == 1)
    b = [socket.create_connection(('127.0.0.1', t.port + 1)) for _ in range(3)]
    check('max_connections (6) in all: the 7th connection (another portal) is closed at once',
          sum(closed_within(s, 0.05) for s in b) == 1)
    for s in a + b:
        s.close()
    time.sleep(0.3)
    got = []
    for ini in (RW, RO, RESET):
        c = ic.Conn(t.port if ini != RESET else t.port + 1)
        got.append((c, c.login(ini, TGT if ini != RESET else HIDDEN)))
    check('max_sessions (2): the 3rd login is refused with "out of resources" (0x0302)',
          [st for _, st in got] == [0, 0, 0x0302], str([hex(st) for _, st in got]))
    for c, _ in got:
        c.close()
    rc = t.stop()
    check('isertd (small caps) stops cleanly', rc == 0, f'exit {rc}')


def keepalive(t):
    """A logged-in connection has TCP keepalive armed (tcp_keepalive), so a vanished peer is found."""
    c, st = session(t.port)
    out = ''
    for _ in range(20):  # another timer (a retransmit) may be the one shown for a moment
        out = subprocess.run(['ss', '-tnoH', 'state', 'established', f'( sport = :{t.port} )'],
                             capture_output=True, text=True).stdout
        if 'keepalive' in out:
            break
        time.sleep(0.1)
    check('the target\'s socket has a keepalive timer', 'keepalive' in out, out.strip()[:200])
    c.close()


def emfile():
    """Out of descriptors: the listener rests instead of spinning, and logs a little."""
    t = Target(PORT + 10, prlimit=48)
    socks = []
    for _ in range(80):
        try:
            socks.append(socket.create_connection(('127.0.0.1', t.port), timeout=1))
        except OSError:
            break
    time.sleep(0.5)
    cpu0, lines0 = t.cpu_ticks(), t.logtext().count(b'\n')
    time.sleep(2)
    cpu1, lines1 = t.cpu_ticks(), t.logtext().count(b'\n')
    check('out of file descriptors: no busy loop (< 0.2 s of CPU in 2 s)', cpu1 - cpu0 < 20,
          f'{cpu1 - cpu0} ticks')
    check('out of file descriptors: a handful of log lines, not a flood', lines1 - lines0 <= 12,
          f'{lines1 - lines0} lines')
    for s in socks:
        s.close()
    t0, st = time.time(), None
    while time.time() - t0 < 3 and st != 0:
        try:
            c, st = session(t.port)
            c.close()
        except OSError:
            time.sleep(0.1)
    check('descriptors back: a login works again', st == 0, f'status {st}')
    rc = t.stop()
    check('isertd (fd limit 48) stops cleanly', rc == 0, f'exit {rc}')


def fd_starvation():
    """Idle connections past what the descriptors leave room for are closed at once, not left in the
    backlog: when some of the held ones go, a login that comes next is served, not queued behind them."""
    t = Target(PORT + 12, prlimit=48, max_connections_per_host=1000, login_timeout=15)
    socks = [socket.create_connection(('127.0.0.1', t.port), timeout=1) for _ in range(60)]
    time.sleep(0.5)
    held, closed_by_target = [], 0
    for s in socks:
        s.setblocking(False)
        try:
            if s.recv(1) == b'':
                closed_by_target += 1
                s.close()
                continue
        except BlockingIOError:
            pass
        except ConnectionError:
            closed_by_target += 1
            s.close()
            continue
        held.append(s)
    check('60 idle connections against 48 descriptors: those past the cap are closed at once',
          closed_by_target > 0 and len(held) + closed_by_target == 60, f'{len(held)} held, {closed_by_target} closed')
    for s in held[:8]:
        s.close()
    time.sleep(0.3)
    t0 = time.time()
    try:
        c, st = session(t.port)
        c.close()
    except OSError as e:
        st = repr(e)
    check('8 of the held ones closed: a login 0.3 s later is served at once', st == 0 and time.time() - t0 < 2,
          f'status {st} after {time.time() - t0:.1f} s')
    for s in held[8:]:
        s.close()
    rc = t.stop()
    check('isertd (fd limit 48) stops cleanly after it', rc == 0, f'exit {rc}')
    check('its warning at start says what happens past the cap', b'accepted and closed at once' in t.logtext(),
          t.logtext()[-600:])


# -- finding 5: receive stall ---------------------------------------------------------------------------------

def nop_burst(t):
    c, st = session(t.port)
    pings = b''
    for i in range(300):
        bhs = bytes([ic.OP_NOP_OUT | 0x40, 0x80, 0, 0, 0, 0, 0, 0]) + b'\0' * 8
        pings += bhs + struct.pack('>IIII', 1000 + i, 0xFFFFFFFF, c.cmdsn, c.statsn + 1) + b'\0' * 16
    c.send_raw(pings)
    pdus = collect(c, 3, lambda p: count(p, ic.OP_NOP_IN) >= 300)
    check('300 NOP-Outs in one burst: 300 NOP-Ins', count(pdus, ic.OP_NOP_IN) == 300,
          f'{count(pdus, ic.OP_NOP_IN)} answers')
    c.close()


def unread_replies(t):
    """NOP-Outs with 256 KiB of data each, never reading the echoes: the connection goes, memory stays bounded."""
    c, st = session(t.port)
    c.s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    rss0 = t.stat('VmRSS')
    data = os.urandom(256 * 1024)
    closed = False
    for i in range(600):
        bhs = bytes([ic.OP_NOP_OUT | 0x40, 0x80, 0, 0, 0]) + len(data).to_bytes(3, 'big') + b'\0' * 8
        bhs += struct.pack('>IIII', 2000 + i, 0xFFFFFFFF, c.cmdsn, c.statsn + 1) + b'\0' * 16
        try:
            c.send(bhs, data)
        except (ConnectionError, BrokenPipeError):
            closed = True
            break
        except OSError:
            break  # our send timed out: the target stopped reading, which is fine too
    rss1 = t.stat('VmRSS')
    # Closed: the echoes that made it end in EOF within a couple of seconds of reading.
    end = time.time() + 3
    c.s.settimeout(0.5)
    while not closed and time.time() < end:
        try:
            closed = c.s.recv(1 << 20) == b''
        except (ConnectionError, OSError) as e:
            closed = not isinstance(e, socket.timeout)
            if not closed:
                break
    check('150 MiB of NOP-Out pings whose echoes are never read: the connection is closed', closed)
    check('target memory stays bounded (RSS grew < 40 MiB)', rss1 - rss0 < 40 * 1024, f'RSS +{(rss1 - rss0) // 1024} MiB')
    c.close()
    serves(t, 'after a peer that does not read')


# -- finding 6: a write-protected mapping ----------------------------------------------------------------------

def ro_mapping(t):
    ro, st = session(t.port, RO)
    swp = bytes([0, 0, 0, 0, 0x0A, 0x0A, 0, 0, 0x08, 0, 0, 0, 0, 0, 0, 0])
    status, _, sense = ro.command(bytes([0x15, 0x10, 0, 0, len(swp), 0]), len(swp), write_data=swp)
    check('write-protected mapping: MODE SELECT setting SWP refused with DATA PROTECT',
          status == 2 and len(sense) > 2 and sense[2] & 0xF == 7, f'status {status} sense {sense[:14].hex()}')
    status, _, sense = ro.command(bytes([0x1B, 0, 0, 0, 0, 0]))
    check('write-protected mapping: START STOP UNIT (stop) refused with DATA PROTECT',
          status == 2 and len(sense) > 2 and sense[2] & 0xF == 7, f'status {status} sense {sense[:14].hex()}')
    ro.close()
    rw, st = session(t.port, RW)
    status, _, sense = rw.command(write10(5, 1), 512, write_data=b'w' * 512)
    check('the read-write initiator still writes (no SWP, LU not stopped)', status == 0,
          f'status {status} sense {sense[:14].hex()}')
    rw.close()


# -- a Data-Out shorter than one block ---------------------------------------------------------------------------

def short_data_out(t):
    """EDTL under the block size on commands that take whole blocks: ORWRITE(16)
    once crashed isertd here (no buffer for the 256 bytes it still receives)."""
    c, st = session(t.port, RW)
    lba1 = (7).to_bytes(8, 'big') + (1).to_bytes(4, 'big')
    for name, cdb in (('ORWRITE(16)', bytes([0x8B, 0]) + lba1 + b'\0\0'),
                      ('WRITE(16)', bytes([0x8A, 0]) + lba1 + b'\0\0'),
                      ('WRITE AND VERIFY(16)', bytes([0x8E, 0]) + lba1 + b'\0\0'),
                      ('VERIFY(16) BYTCHK', bytes([0x8F, 0x02]) + lba1 + b'\0\0')):
        status, _, sense = c.command(cdb, 256, write_data=b'o' * 256)
        check(f'{name} with 256 bytes of Data-Out for a 512-byte block: answered ({status:#x})',
              status in (0, 2), f'sense {sense[:14].hex()}')
    c.close()
    serves(t, 'short Data-Out')


# -- finding 7: target resets ----------------------------------------------------------------------------------

def target_reset(t):
    other, _ = session(t.port, RW, src='127.0.0.4')
    c, st = session(t.port, RW)
    check('TARGET WARM RESET from an initiator not allowed: "function authorization failed"', tmf(c, 6) == 6)
    check('TARGET COLD RESET from an initiator not allowed: "function authorization failed"', tmf(c, 7) == 6)
    try:
        alive = other.nop(b'still') == b'still'
    except (ConnectionError, OSError):
        alive = False
    check('other sessions of the target survive the refused cold reset', alive)
    c.close()
    r, st = session(t.port, RESET)
    check('TARGET WARM RESET from an initiator with allow_target_reset: done', tmf(r, 6) == 0)
    r.close()
    other.close()


# -- finding 9: close while sending -----------------------------------------------------------------------------

def close_during_send(t):
    """Connections that vanish with Data-In in flight must all be freed (the shutdown at the end checks)."""
    for i in range(150):
        try:
            c, st = session(t.port)
        except OSError:
            continue
        c.send_raw(b''.join(c.scsi_bhs(read10(2048 * j, 2048), 1 << 20, read=True, lun=1) for j in range(6)))
        c.s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack('ii', 1, 0))
        c.close()  # a reset, with reads of the file LUN still in the backstore
    time.sleep(1)
    cpu0 = t.cpu_ticks()
    time.sleep(2)
    check('150 connections reset with Data-In in flight: the target is idle afterwards (< 0.1 s CPU in 2 s)',
          t.cpu_ticks() - cpu0 < 10, f'{t.cpu_ticks() - cpu0} ticks')
    serves(t, 'after connections reset while sending')


# -- finding 10: the smaller ones ------------------------------------------------------------------------------

def dup_cmdsn(t):
    c, st = session(t.port)
    n = c.cmdsn
    tur = bytes(6)
    order = [(n + 1, 'a'), (n + 1, 'b'), (n + 3, 'c'), (n, 'd'), (n + 2, 'e')]
    itts = {}
    for sn, name in order:
        c.cmdsn = sn
        itts[c.itt + 1] = name
        c.send(c.scsi_bhs(tur, 0))
    c.cmdsn = n + 4
    pdus = collect(c, 1.5, lambda p: count(p, ic.OP_SCSI_RSP) >= 4)
    done = sorted(itts[struct.unpack('>I', b[16:20])[0]] for o, b, _ in pdus if o == ic.OP_SCSI_RSP)
    check('a duplicate early CmdSN is dropped and does not block the queue', done == ['a', 'c', 'd', 'e'],
          f'answered: {done}')
    c.close()


def discovery_portals(t):
    c = ic.Conn(t.port)
    st = c.login(RW, discovery=True)
    found = c.send_targets() if st == 0 else []
    c.close()
    check('discovery lists the target at the portal it was asked on', f'TargetAddress=127.0.0.1:{t.port},1' in found,
          str(found))
    check('discovery does not name the target\'s iSER portal to a TCP discovery',
          f'TargetAddress=127.0.0.1:{t.port + 2},1' not in found, str(found))
    check('discovery does not name a target served only on another portal', f'TargetName={HIDDEN}' not in found,
          str(found))
    c = ic.Conn(t.port + 1)
    st = c.login(RW, discovery=True)
    found = c.send_targets() if st == 0 else []
    c.close()
    check('discovery on that other portal lists it', f'TargetName={HIDDEN}' in found, str(found))


def chap_challenges(t):
    c, st = session(t.port, CHAP, chap=('carol', 'carol-secret-12'), mutual=('target', 'target-secret-34'), alg=7,
                    mutual_chal=os.urandom(8))
    check('mutual CHAP with an 8-byte challenge: authentication failure', st == 0x0201, f'status {st:#x}')
    c.close()
    c, st = session(t.port, CHAP, chap=('carol', 'carol-secret-12'), mutual=('target', 'target-secret-34'), alg=7,
                    mutual_chal='reflect')
    check('mutual CHAP reflecting the target\'s own challenge: authentication failure', st == 0x0201,
          f'status {st:#x}')
    c.close()
    c, st = session(t.port, CHAP, chap=('carol', 'carol-secret-12'), mutual=('target', 'target-secret-34'), alg=7)
    check('mutual CHAP with a 16-byte challenge still works', st == 0, f'status {st:#x}')
    c.close()


def log_escape(t):
    c = ic.Conn(t.port)
    c.login('iqn.2026-11.org.test:esc\x1b[31mred\x07', TGT)
    c.close()
    time.sleep(0.2)
    log = t.logtext()
    check('an initiator name with control characters is logged escaped', b'\x1b' not in log and b'\\x1b' in log,
          log[-300:])


def config_mode(t):
    check('a world-readable configuration holding CHAP secrets gets a warning', b'readable by' in t.logtext())


def sigterm_drain():
    t = Target(PORT + 20)
    c, st = session(t.port, op_keys=NO_IMMEDIATE)
    itt = c.next_itt()
    c.send(c.scsi_bhs(write10(100, 128), 65536, write=True, itt=itt))
    op, r2t, _ = c.recv()
    ttt = struct.unpack('>I', r2t[20:24])[0]
    t.proc.send_signal(signal.SIGTERM)
    time.sleep(0.5)
    try:
        late = ic.Conn(t.port, timeout=1)
        refused = late.closed()
        late.close()
    except OSError:
        refused = True
    check('SIGTERM: no new connections', refused)
    for sn, off in enumerate(range(0, 65536, 8192)):
        c.send(data_out(itt, ttt, sn, off, 8192, off + 8192 == 65536, c.statsn + 1), b'd' * 8192)
    pdus = collect(c, 3)
    rsp = [b for o, b, _ in pdus if o == ic.OP_SCSI_RSP]
    check('SIGTERM: a WRITE in flight finishes with GOOD before the connection closes',
          len(rsp) == 1 and rsp[0][3] == 0 and pdus[-1][0] == 'closed', str([p[0] for p in pdus]))
    try:
        rc = t.proc.wait(8)
    except subprocess.TimeoutExpired:
        rc = 'still running'
    check('SIGTERM: isertd exits 0 within shutdown_timeout', rc == 0, f'exit {rc}')
    t.stop()


def main():
    t = Target(PORT)
    try:
        config_mode(t)
        for f in (cmdsn_window, immediate_cap, stash_bound, login_timeout, conn_caps, nop_burst, unread_replies,
                  keepalive, ro_mapping, short_data_out,
                  target_reset, dup_cmdsn, discovery_portals, chap_challenges, log_escape, close_during_send):
            if ONLY and f.__name__ not in ONLY:
                continue
            print(f'== {f.__name__}')
            try:
                f(t)
            except Exception as e:  # noqa: BLE001 - a broken check is a failed check
                check(f'{f.__name__} ran', False, repr(e))
            if t.proc.poll() is not None:
                check(f'isertd alive after {f.__name__}', False, f'exit {t.proc.returncode}')
                t = Target(PORT)
        for f in (caps_global, emfile, fd_starvation, sigterm_drain):
            if ONLY and f.__name__ not in ONLY:
                continue
            print(f'== {f.__name__}')
            try:
                f()
            except Exception as e:  # noqa: BLE001
                check(f'{f.__name__} ran', False, repr(e))
    finally:
        rc = t.stop()
        check('isertd frees every connection and stops cleanly on SIGTERM', rc == 0, f'exit status {rc}')
        if checks.failed:
            print('--- isertd log (end) ---')
            print(t.logtext()[-3000:].decode(errors='replace'))
    checks.finish()


if __name__ == '__main__':
    main()
