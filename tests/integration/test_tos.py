#!/usr/bin/env python3
"""A portal's "tos" (docs/config.md) on the wire: packets isertd sends from
a TCP portal carry its IP ToS (IPv4) or traffic class (IPv6), seen by a
packet socket on the loopback interface; a portal without it sends 0.  A
change applied live reaches the connections accepted afterwards, and those
before keep theirs; portal.add takes it; a listener that two TPGs share
cannot have two; values out of range are refused naming the key.
(iSER: tests/vm/t-isertd-iser.sh reads the listener's ToS from
`rdma res show cm_id`.)

usage: test_tos.py ISERTD [PORT]   (ports PORT..PORT+3; root: a packet socket)"""
import ctypes
import json
import os
import socket
import struct
import subprocess
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import iscsi_client as ic  # noqa: E402
import checks  # noqa: E402
from admin_rpc import Rpc, start_isertd, end_isertd  # noqa: E402
from checks import check  # noqa: E402

ISERTD = sys.argv[1]
PORT = int(sys.argv[2]) if len(sys.argv) > 2 else 3580
T = 'iqn.2026-11.org.isert:tos'
INI = 'iqn.2026-11.org.test:tos'


def ports_filter(lo, hi):
    """A classic BPF program (SO_ATTACH_FILTER) that keeps the TCP packets of an Ethernet frame (lo's) whose
    source port is lo..hi, IPv4 or IPv6 (no extension headers), and drops the rest in the kernel."""
    ins = [(0x28, 0, 0, 12),             # A = ethertype
           (0x15, 0, 5, 0x0800),         # IPv4? else to the IPv6 test
           (0x30, 0, 0, 23),             # A = IPv4 protocol
           (0x15, 0, 10, 6),             # TCP? else drop
           (0xb1, 0, 0, 14),             # X = IPv4 header length
           (0x48, 0, 0, 14),             # A = TCP source port (at X + 14)
           (0x05, 0, 0, 4),              # to the port test
           (0x15, 0, 6, 0x86dd),         # IPv6? else drop
           (0x30, 0, 0, 20),             # A = next header
           (0x15, 0, 4, 6),              # TCP? else drop
           (0x28, 0, 0, 54),             # A = TCP source port
           (0x35, 0, 2, lo),             # port >= lo? else drop
           (0x25, 1, 0, hi),             # port > hi: drop
           (0x06, 0, 0, 0x40000),        # keep the packet
           (0x06, 0, 0, 0)]              # drop it
    return b''.join(struct.pack('HBBI', *i) for i in ins)


class Sniffer:
    """The ToS of TCP packets on lo from ports lo..hi, by source port (IPv4 and IPv6)."""

    def __init__(self, lo, hi):
        self.s = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(0x0003))
        # Every packet on lo comes to a packet socket, another test's too (a test beside this one may send
        # GB/s there): what this test does not look at is dropped in the kernel, or a burst of it would
        # fill the buffer and the packets looked for would be lost.
        prog = ctypes.create_string_buffer(ports_filter(lo, hi))
        fprog = struct.pack('HL', len(prog.raw) // 8, ctypes.addressof(prog))
        self.s.setsockopt(socket.SOL_SOCKET, 26, fprog)   # SO_ATTACH_FILTER
        self.prog = prog   # the kernel copied it; kept with the socket anyway
        # Room for a burst while this thread reads.
        try:   # past net.core.rmem_max: SO_RCVBUFFORCE (33) needs CAP_NET_ADMIN, which a packet socket has
            self.s.setsockopt(socket.SOL_SOCKET, getattr(socket, 'SO_RCVBUFFORCE', 33), 16 << 20)
        except OSError:
            self.s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 16 << 20)
        self.s.bind(('lo', 0))
        self.s.settimeout(0.2)
        self.seen = {}
        self.stop = threading.Event()
        self.t = threading.Thread(target=self.run, daemon=True)
        self.t.start()

    def run(self):
        while not self.stop.is_set():
            try:
                f = self.s.recv(65536)
            except socket.timeout:
                continue
            kind = struct.unpack('>H', f[12:14])[0]
            if kind == 0x0800 and f[23] == 6:
                tos, tcp = f[15], 14 + (f[14] & 0xf) * 4
            elif kind == 0x86dd and f[20] == 6:
                tos, tcp = ((f[14] & 0xf) << 4) | (f[15] >> 4), 54
            else:
                continue
            sport, dport = struct.unpack('>HH', f[tcp:tcp + 4])
            self.seen.setdefault((sport, dport), set()).add(tos)

    def tos_from(self, port, peer=None):
        """The ToS values of packets from port (to peer's port, if given): once some are seen (under
        other traffic on lo this thread may be seconds behind), and 0.3 s more for the rest."""
        def got():
            return set().union(*[v for (s, d), v in list(self.seen.items())
                                 if s == port and (peer is None or d == peer)])
        end = time.time() + 10
        while not got() and time.time() < end:
            time.sleep(0.05)
        time.sleep(0.3)
        return got()

    def close(self):
        self.stop.set()
        self.t.join(2)
        self.s.close()


def config(tos_a, extra_tpg=None):
    tpgs = [{'tag': 1, 'portals': [{'ip': '127.0.0.1', 'port': PORT, 'tos': tos_a},
                                   {'ip': '127.0.0.1', 'port': PORT + 1}],
             'luns': [{'lun': 0, 'backstore': 'r0'}], 'acls': [{'initiator': INI, 'mapped_luns': [
                 {'mapped_lun': 0, 'tpg_lun': 0}]}]}]
    if has_ipv6():
        tpgs[0]['portals'].append({'ip': '::1', 'port': PORT + 2, 'tos': 0xb8})
    if extra_tpg:
        tpgs.append(extra_tpg)
    return {'backstores': [{'name': 'r0', 'type': 'ram', 'size': '4M'}], 'targets': [{'iqn': T, 'tpgs': tpgs}]}


def has_ipv6():
    try:
        s = socket.socket(socket.AF_INET6, socket.SOCK_STREAM)
        s.bind(('::1', 0))
        s.close()
        return True
    except OSError:
        return False


def session(port, host='127.0.0.1'):
    """A logged-in connection that has read a block: (conn, its local port)."""
    c = ic.Conn(port, host=host)
    st = c.login(INI, T)
    check(f'login through {host}:{port}', st == 0, hex(st))
    c.command(bytes([0x28, 0, 0, 0, 0, 0, 0, 0, 8, 0]), 4096, read=True)
    return c, c.s.getsockname()[1]


def main():
    if os.geteuid() != 0:
        print('SKIP: a packet socket needs root')
        sys.exit(77)
    work = checks.workdir('isert-tos-')
    cfgfile = os.path.join(work, 'isertd.json')

    # Refusals at load: a value out of range, two ToS for one listener.
    for bad, why in ((config(256), 'tos'), (config(-1), 'tos'), (config('x'), 'tos'),
                     (config(104, {'tag': 2, 'portals': [{'ip': '127.0.0.1', 'port': PORT, 'tos': 72}]}),
                      'one listener')):
        with open(cfgfile, 'w') as f:
            json.dump(bad, f)
        r = subprocess.run([ISERTD, '--check', '-c', cfgfile], capture_output=True, text=True)
        check(f'--check refuses {why!r} ({r.stderr.strip()[:120]})', r.returncode != 0 and why in r.stderr,
              r.stderr)
    with open(cfgfile, 'w') as f:
        json.dump(config(104, {'tag': 2, 'portals': [{'ip': '127.0.0.1', 'port': PORT, 'tos': 104}]}), f)
    r = subprocess.run([ISERTD, '--check', '-c', cfgfile], capture_output=True, text=True)
    check('two TPGs sharing a listener with one ToS are fine', r.returncode == 0, r.stderr)

    with open(cfgfile, 'w') as f:
        json.dump(config(104), f)
    proc, sock = start_isertd(ISERTD, work, cfgfile)
    rpc = Rpc(sock)
    sn = Sniffer(PORT, PORT + 4)
    try:
        a, a_port = session(PORT)
        b, _ = session(PORT + 1)
        check('portal with tos 104: every packet isertd sends carries ToS 104', sn.tos_from(PORT) == {104},
              sn.tos_from(PORT))
        check('portal without tos: ToS 0', sn.tos_from(PORT + 1) == {0}, sn.tos_from(PORT + 1))
        if has_ipv6():
            v6, _ = session(PORT + 2, '::1')
            check('IPv6 portal with tos 184: traffic class 184', sn.tos_from(PORT + 2) == {0xb8},
                  sn.tos_from(PORT + 2))
            v6.close()
        saved = rpc.call('config.get')['result']['config']
        check('config.get shows tos where set, nowhere else',
              [p.get('tos') for p in saved['targets'][0]['tpgs'][0]['portals']][:2] == [104, None],
              saved['targets'][0]['tpgs'][0]['portals'])

        # Live: the new ToS for new connections; the session before keeps its own.
        new = config(72)
        ans = rpc.call('apply', {'config': new})
        check('apply with the portal at tos 72', 'result' in ans, ans)
        c, c_port = session(PORT)
        check('a connection accepted after the change: ToS 72', sn.tos_from(PORT, c_port) == {72},
              sn.tos_from(PORT, c_port))
        a.command(bytes([0x28, 0, 0, 0, 0, 8, 0, 0, 8, 0]), 4096, read=True)
        check('the session from before keeps ToS 104', sn.tos_from(PORT, a_port) == {104},
              sn.tos_from(PORT, a_port))
        c.close()

        ans = rpc.call('portal.add', {'target': T, 'tag': 1, 'ip': '127.0.0.1', 'port': PORT + 3, 'tos': 40})
        check('portal.add with tos 40', 'result' in ans, ans)
        d, _ = session(PORT + 3)
        check('the added portal: ToS 40', sn.tos_from(PORT + 3) == {40}, sn.tos_from(PORT + 3))
        d.close()
        ans = rpc.call('portal.add', {'target': T, 'tag': 1, 'ip': '127.0.0.1', 'port': PORT + 4, 'tos': 256})
        check('portal.add with tos 256 is refused naming tos',
              'error' in ans and 'tos' in ans['error'].get('message', ''), ans)
        a.close()
        b.close()
    finally:
        sn.close()
        end_isertd(proc, work)
    checks.finish()


if __name__ == '__main__':
    main()
