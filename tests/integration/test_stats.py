#!/usr/bin/env python3
"""Statistics match what was done (docs/stats.md).  A known workload through
our Python initiator (N reads, M writes, writes that need R2Ts, commands
that fail with known sense keys, a task management request), counted on
the client side byte by byte, must show up exactly in `stats`; libiscsi's
iscsi-perf then loads another LUN and its counters must be consistent
(every read in the histogram once, bytes = reads x block size, nothing left
in flight).  Logins refused for each reason count on the portal; filters,
sections and stats.reset do what they say; bad parameters are refused with
the field named.

usage: test_stats.py ISERTD [PORT]"""
import json
import os
import shutil
import struct
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import iscsi_client as ic  # noqa: E402
import checks  # noqa: E402
from admin_rpc import Rpc, stop_isertd  # noqa: E402
from checks import check  # noqa: E402

ISERTD = sys.argv[1]
PORT = int(sys.argv[2]) if len(sys.argv) > 2 else 3480
T1, T2 = 'iqn.2026-11.org.isert:stats1', 'iqn.2026-11.org.isert:stats2'
INI_A, INI_B = 'iqn.2026-11.org.isert:client-a', 'iqn.2026-11.org.isert:client-b'
INI_ACL = 'iqn.2026-11.org.isert:allowed'


def config(work):
    return {
        'backstores': [
            {'name': 'r0', 'type': 'ram', 'size': '16M'},
            {'name': 'f1', 'type': 'file', 'path': os.path.join(work, 'f1.img'), 'size': '32M'},
            {'name': 'r2', 'type': 'ram', 'size': '1M'},
        ],
        'targets': [
            {'iqn': T1, 'tpgs': [{'tag': 1, 'enable': True, 'demo_mode': True,
                                  'portals': [{'ip': '127.0.0.1', 'port': PORT}],
                                  'luns': [{'lun': 0, 'backstore': 'r0'}, {'lun': 1, 'backstore': 'f1'}]}]},
            {'iqn': T2, 'tpgs': [{'tag': 1, 'enable': True,
                                  'portals': [{'ip': '127.0.0.1', 'port': PORT}],
                                  'luns': [{'lun': 0, 'backstore': 'r2'}],
                                  'acls': [{'initiator': INI_ACL, 'mapped_luns': [{'mapped_lun': 0, 'tpg_lun': 0}],
                                            'chap': {'userid': 'u', 'password': 'secret-secret'}}]}]},
        ],
    }


class Counting:
    """A socket that counts what passes through it (the client's side of the byte counters)."""

    def __init__(self, s):
        self.s, self.sent, self.got = s, 0, 0

    def sendall(self, b):
        self.sent += len(b)
        self.s.sendall(b)

    def recv(self, n):
        b = self.s.recv(n)
        self.got += len(b)
        return b

    def __getattr__(self, k):
        return getattr(self.s, k)


class Client(ic.Conn):
    def __init__(self, port):
        super().__init__(port)
        self.s = Counting(self.s)
        self.pdus_sent = self.pdus_got = 0

    def send(self, bhs, data=b'', **kw):
        self.pdus_sent += 1
        super().send(bhs, data, **kw)

    def recv(self):
        r = super().recv()
        self.pdus_got += 1
        return r


def read10(lba, blocks):
    return struct.pack('>BBIBHB', 0x28, 0, lba, 0, blocks, 0)


def write10(lba, blocks):
    return struct.pack('>BBIBHB', 0x2A, 0, lba, 0, blocks, 0)


def sense_key(sense):
    return sense[2] & 0x0F if len(sense) > 2 else None


def one(stats, **match):
    rows = [r for r in stats['luns'] if all(r[k] == v for k, v in match.items())]
    return rows[0] if len(rows) == 1 else None


def hist_ok(h):
    return sum(h['buckets']) == h['count'] and len(h['buckets']) == 28


def overflow(port):
    """The per-reactor cap on LUN x initiator entries (STATS_MAX_LUNS, docs/security.md): one reactor,
    15 initiators x 1100 LUNs = 16500 pairs; the 116 past 16384 count in the overflow entry; once their
    sessions ended, a new initiator reuses an entry."""
    cap, nluns, nini = 16384, 1100, 15
    work = checks.workdir('isert-stats-cap-')
    sock = os.path.join(work, 'admin.sock')
    cfgfile = os.path.join(work, 'isertd.json')
    cfg = {'backstores': [{'name': 'b%d' % i, 'type': 'ram', 'size': '64K'} for i in range(nluns)],
           'targets': [{'iqn': T1, 'tpgs': [{'tag': 1, 'demo_mode': True,
                                             'portals': [{'ip': '127.0.0.1', 'port': port}],
                                             'luns': [{'lun': i, 'backstore': 'b%d' % i} for i in range(nluns)]}]}]}
    with open(cfgfile, 'w') as f:
        json.dump(cfg, f)
    log = open(os.path.join(work, 'isertd.log'), 'w')
    proc = subprocess.Popen([ISERTD, '-c', cfgfile, '--admin-socket', sock, '-r', '1'], stdout=log,
                            stderr=subprocess.STDOUT)
    try:
        for _ in range(200):
            if os.path.exists(sock):
                break
            time.sleep(0.05)
        rpc = Rpc(sock)
        conns = []
        for k in range(nini):
            c = ic.Conn(port, timeout=30)
            assert c.login('iqn.2026-11.org.isert:cap%02d' % k, T1) == 0
            for first in range(0, nluns, 64):  # TEST UNIT READY to each LUN, 64 at a time (the CmdSN window)
                batch = range(first, min(first + 64, nluns))
                for lun in batch:  # LUNs past 255 in flat space addressing (SAM-5 4.7.7)
                    c.send(c.scsi_bhs(b'\0' * 6, 0, lun=lun if lun < 256 else 0x4000 | lun))
                for lun in batch:
                    op, _, _ = c.recv()
                    assert op == ic.OP_SCSI_RSP, op
            conns.append(c)
        s = rpc.call('stats', {'sections': ['luns']})['result']['luns']
        named = [e for e in s if e['initiator'] != '*']
        over = [e for e in s if e['initiator'] == '*']
        total = sum(e['commands']['other'] for e in s)
        check('cap: %d entries made, no more' % cap, len(named) == cap, len(named))
        check('cap: the %d pairs past it count in the overflow entry' % (nluns * nini - cap),
              len(over) == 1 and over[0]['commands']['other'] == nluns * nini - cap, over[:1])
        check('cap: every command counted once', total == nluns * nini, total)
        for c in conns:
            c.close()
        time.sleep(0.5)
        c = ic.Conn(port)
        check('cap: a new initiator logs in', c.login('iqn.2026-11.org.isert:late', T1) == 0)
        c.command(b'\0' * 6, lun=7)
        s = rpc.call('stats', {'initiator': 'iqn.2026-11.org.isert:late', 'sections': ['luns']})['result']['luns']
        check('cap: once sessions ended, a new pair reuses an entry', len(s) == 1 and s[0]['lun'] == 7 and
              s[0]['commands']['other'] == 1, s)
        c.close()
        check('cap: isertd still runs', proc.poll() is None)
    finally:
        stop_isertd(proc)
        log.close()
        shutil.rmtree(work, ignore_errors=True)


def main():
    work = checks.workdir('isert-stats-')
    sock = os.path.join(work, 'admin.sock')
    cfgfile = os.path.join(work, 'isertd.json')
    with open(cfgfile, 'w') as f:
        json.dump(config(work), f)
    os.chmod(cfgfile, 0o600)
    log = open(os.path.join(work, 'isertd.log'), 'w')
    proc = subprocess.Popen([ISERTD, '-c', cfgfile, '--admin-socket', sock, '-r', '2'], stdout=log,
                            stderr=subprocess.STDOUT)
    rpc = Rpc(sock)
    try:
        for _ in range(100):
            if os.path.exists(sock):
                break
            time.sleep(0.05)
        r = rpc.call('stats')
        check('stats answers on an idle target', 'result' in r, r)
        res = r['result']
        check('latency bounds are 1 us .. 2^26 us', res['latency_bounds_us'][0] == 1 and
              res['latency_bounds_us'][-1] == 1 << 26 and len(res['latency_bounds_us']) == 27, res)
        check('no LUN entry before any command', res['luns'] == [], res['luns'])
        check('the portal is listed, nothing counted', len(res['portals']) == 1 and
              res['portals'][0]['logins']['accepted'] == 0 and res['portals'][0]['portal'] ==
              '127.0.0.1:%d' % PORT, res['portals'])
        check('rdma_devices is a list (empty without RDMA devices)', isinstance(res['rdma_devices'], list))
        rs = res['reactors']
        check('reactors: one entry per reactor, none with a connection or a buffer in use',
              [r['reactor'] for r in rs] == list(range(len(rs))) and len(rs) >= 1 and
              all(r['connections'] == 0 and r['buffers_in_use'] == 0 for r in rs), rs)

        # -- a known workload from initiator A on LUN 0 ------------------------
        c = Client(PORT)
        check('client A logs in', c.login(INI_A, T1) == 0)
        N, M, K, BAD_READS, BAD_INQ = 37, 23, 5, 3, 2
        expect_other = 0
        ua = 0
        ill = 0
        for _ in range(2):
            st, _, sense = c.command(b'\x00' * 6)  # TEST UNIT READY
            expect_other += 1
            if st == 2 and sense_key(sense) == 6:
                ua += 1
        for i in range(N):
            st, data, _ = c.command(read10(i * 8, 8), edtl=4096, read=True)
            assert st == 0 and len(data) == 4096
        for i in range(M):
            st, _, _ = c.command(write10(i * 16, 16), edtl=8192, write_data=os.urandom(8192))
            assert st == 0
        for i in range(K):  # 8 KiB immediate, then one R2T for the other 24 KiB
            st, _, _ = c.command(write10(1024 + i * 64, 64), edtl=32768, write_data=os.urandom(32768))
            assert st == 0
        blocks = 16 * 1024 * 1024 // 512
        for i in range(BAD_READS):  # beyond the end: ILLEGAL REQUEST
            st, data, sense = c.command(read10(blocks + i, 8), edtl=4096, read=True)
            ill += st == 2 and sense_key(sense) == 5
        for i in range(BAD_INQ):  # EVPD page that does not exist: ILLEGAL REQUEST
            st, _, sense = c.command(bytes([0x12, 1, 0xEE, 0, 255, 0]), edtl=255, read=True)
            ill += st == 2 and sense_key(sense) == 5
            expect_other += 1
        # ABORT TASK for a task that does not exist: one task management request on LUN 0
        itt = c.next_itt()
        bhs = bytes([0x02 | 0x40, 0x80 | 1, 0, 0, 0, 0, 0, 0]) + struct.pack('>Q', 0)
        bhs += struct.pack('>IIIIII', itt, 0x7777, c.cmdsn, c.statsn + 1, 0, 0) + b'\0' * 8
        c.send(bhs)
        op, _, _ = c.recv()
        check('the TMF is answered', op == 0x22, op)
        check('every failing command failed with ILLEGAL REQUEST', ill == BAD_READS + BAD_INQ, ill)

        s = rpc.call('stats', {'initiator': INI_A})['result']
        e = one(s, target=T1, lun=0, initiator=INI_A)
        check('one entry for LUN 0 x initiator A', e is not None, s['luns'])
        if e:
            check('backstore named', e['backstore'] == 'r0', e)
            check('reads counted exactly', e['commands']['read'] == N + BAD_READS, e['commands'])
            check('writes counted exactly', e['commands']['write'] == M + K, e['commands'])
            check('other commands counted exactly', e['commands']['other'] == expect_other, e['commands'])
            check('bytes read = N x 4 KiB', e['bytes_read'] == N * 4096, e['bytes_read'])
            check('bytes written = M x 8 KiB + K x 32 KiB', e['bytes_written'] == M * 8192 + K * 32768,
                  e['bytes_written'])
            cc = e['check_conditions']
            check('ILLEGAL REQUEST by sense key', cc.get('illegal_request') == BAD_READS + BAD_INQ, cc)
            check('unit attentions as the client saw them', e['unit_attentions'] == ua and
                  cc.get('unit_attention', 0) == ua, (ua, cc))
            check('no other sense key', sum(cc.values()) == BAD_READS + BAD_INQ + ua, cc)
            check('task management counted', e['task_management'] == 1, e)
            check('nothing in flight', e['in_flight'] == 0, e)
            lat = e['latency']
            check('read histogram holds every read once', lat['read']['count'] == N + BAD_READS and
                  hist_ok(lat['read']), lat['read'])
            check('write histogram holds every write once', lat['write']['count'] == M + K and
                  hist_ok(lat['write']), lat['write'])
            check('backstore histograms too', lat['read_backstore']['count'] == N + BAD_READS and
                  lat['write_backstore']['count'] == M + K and hist_ok(lat['write_backstore']), lat)
            check('latency sums are positive, the backstore share within the whole',
                  0 < lat['write_backstore']['sum_ns'] <= lat['write']['sum_ns'] and lat['read']['sum_ns'] > 0,
                  lat)
        check('no entry for LUN 1 (no command went there)', one(s, lun=1, initiator=INI_A) is None, s['luns'])
        conns = [x for x in s['connections'] if x['initiator'] == INI_A]
        check('one connection of A', len(conns) == 1, s['connections'])
        if conns:
            x = conns[0]
            check('PDUs in = what the client sent', x['pdus_in'] == c.pdus_sent, (x['pdus_in'], c.pdus_sent))
            check('PDUs out = what the client received', x['pdus_out'] == c.pdus_got, (x['pdus_out'], c.pdus_got))
            check('bytes in = what the client sent', x['bytes_in'] == c.s.sent, (x['bytes_in'], c.s.sent))
            check('bytes out = what the client received', x['bytes_out'] == c.s.got, (x['bytes_out'], c.s.got))
            check('R2Ts: one per large write', x['r2ts'] == K, x)
            check('no digest errors, no NOP timeouts', x['digest_errors'] == 0 and x['nop_timeouts'] == 0, x)
            check('tcp connection has no rdma section', 'rdma' not in x and x['transport'] == 'tcp', x)
        rs = s['reactors']
        check('reactors: the connection of A counted on one reactor, nothing in use while A is idle, '
              'the pool holds what the writes took', sum(r['connections'] for r in rs) == 1 and
              all(r['buffers_in_use'] == 0 for r in rs) and sum(r['buffer_pool_bytes'] for r in rs) >= 32768, rs)

        # -- libiscsi on LUN 1 as initiator B -----------------------------------
        perf = subprocess.run(['iscsi-perf', '-i', INI_B, '-t', '3', '-b', '16', '-m', '8', '-r',
                               'iscsi://127.0.0.1:%d/%s/1' % (PORT, T1)], capture_output=True, text=True,
                              timeout=30)
        check('iscsi-perf ran', perf.returncode == 0, perf.stderr[-500:])
        s = rpc.call('stats', {'initiator': INI_B, 'lun': 1})['result']
        e = one(s, target=T1, lun=1, initiator=INI_B)
        check('one entry for LUN 1 x initiator B (filters by initiator and lun)', e is not None and
              len(s['luns']) == 1, s['luns'])
        if e:
            n = e['commands']['read']
            check('iscsi-perf reads counted', n > 100, e['commands'])
            # iscsi-perf shortens a random read that would cross the end of the LUN: whole blocks, at most 16.
            check('bytes read: whole blocks, at most reads x 16 blocks, nearly all full',
                  e['bytes_read'] % 512 == 0 and n * 16 * 512 * 0.98 <= e['bytes_read'] <= n * 16 * 512,
                  (n, e['bytes_read']))
            check('read histogram count = reads', e['latency']['read']['count'] == n and
                  hist_ok(e['latency']['read']), e['latency']['read'])
            check('no writes, nothing in flight after it logged out', e['commands']['write'] == 0 and
                  e['in_flight'] == 0, e)
            check('backstore is the file', e['backstore'] == 'f1', e)
        s = rpc.call('stats', {'target': T1})['result']
        check('after B logged out its entry stays (counters only grow)', one(s, lun=1, initiator=INI_B) is not None,
              s['luns'])
        check('connections filtered by initiator', all(x['initiator'] == INI_A for x in
                                                       rpc.call('stats', {'initiator': INI_A})['result']
                                                       ['connections']))

        # -- logins refused, by reason -------------------------------------------
        before = rpc.call('stats', {'sections': ['portals']})['result']['portals'][0]
        acc0 = before['logins']['accepted']
        for who, tgt, chap, expect in ((INI_B, 'iqn.2026-11.org.isert:nosuch', None, 0x0203),
                                       (INI_B, T2, None, 0x0202),
                                       (INI_ACL, T2, ('u', 'wrong-secret!'), 0x0201),
                                       (INI_ACL, T2, ('u', 'secret-secret'), 0)):
            k = ic.Conn(PORT)
            got = k.login(who, tgt, chap=chap)
            check('login of %s to %s: status %#06x' % (who, tgt, expect), got == expect, hex(got))
            k.close()
        time.sleep(0.2)
        s = rpc.call('stats', {'sections': ['portals']})['result']
        check('only the portals section when asked', set(s) == {'monotonic_ns', 'latency_bounds_us', 'portals'},
              list(s))
        p = s['portals'][0]
        ref = p['logins']['refused']
        check('refused: unknown target 1, ACL 1, CHAP 1', ref['unknown_target'] == before['logins']['refused']
              ['unknown_target'] + 1 and ref['acl'] == before['logins']['refused']['acl'] + 1 and
              ref['chap'] == before['logins']['refused']['chap'] + 1, (before['logins'], p['logins']))
        check('accepted: one more', p['logins']['accepted'] == acc0 + 1, p['logins'])
        check('portal totals include ended connections', p['connections_closed'] >= 5 and p['connections'] == 1,
              p)
        check('portal PDUs >= the live connection\'s', p['pdus_in'] >= c.pdus_sent, p)

        # -- reset ---------------------------------------------------------------
        r = rpc.call('stats.reset')
        check('stats.reset answers', r.get('result') == {}, r)
        s = rpc.call('stats')['result']
        e = one(s, lun=0, initiator=INI_A)
        check('after reset LUN counters are zero', e and e['commands'] == {'read': 0, 'write': 0, 'other': 0} and
              e['latency']['read']['count'] == 0 and e['bytes_written'] == 0, e)
        x = [x for x in s['connections'] if x['initiator'] == INI_A]
        check('after reset connection counters are zero', x and x[0]['pdus_in'] == 0 and x[0]['r2ts'] == 0, x)
        check('after reset portal counters are zero, the live connection stays',
              s['portals'][0]['logins']['accepted'] == 0 and s['portals'][0]['connections'] == 1, s['portals'])
        st, _, _ = c.command(read10(0, 8), edtl=4096, read=True)
        e = one(rpc.call('stats', {'initiator': INI_A, 'lun': 0})['result'], lun=0)
        check('counting goes on after reset', e and e['commands']['read'] == 1 and e['bytes_read'] == 4096, e)
        c.close()

        # -- bad parameters --------------------------------------------------------
        for params, word in (({'lun': -1}, 'lun'), ({'tsih': 'x'}, 'tsih'), ({'sections': 'luns'}, 'sections'),
                             ({'sections': ['lunz']}, 'sections[0]'), ({'bogus': 1}, 'bogus'),
                             ({'target': ''}, 'target')):
            r = rpc.call('stats', params)
            check('stats %s refused naming %s' % (params, word), 'error' in r and word in r['error']['message'], r)
        r = rpc.call('stats.reset', {'x': 1})
        check('stats.reset takes no parameters', 'error' in r, r)
        check('isertd still runs', proc.poll() is None)
    finally:
        stop_isertd(proc)
        log.close()
        if checks.failed:
            print(open(os.path.join(work, 'isertd.log')).read()[-3000:])
        shutil.rmtree(work, ignore_errors=True)
    overflow(PORT + 1)
    checks.finish()


if __name__ == '__main__':
    main()
