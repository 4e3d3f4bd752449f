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

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import iscsi_client as ic  # noqa: E402
import checks  # noqa: E402
from admin_rpc import Rpc, start_isertd, stop_isertd  # noqa: E402
from checks import check, wait_for  # noqa: E402

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


def tur_all(c, luns):
    """TEST UNIT READY to each LUN, 64 at a time (the CmdSN window)."""
    for first in range(0, len(luns), 64):
        batch = luns[first:first + 64]
        for lun in batch:  # LUNs past 255 in flat space addressing (SAM-5 4.7.7)
            c.send(c.scsi_bhs(b'\0' * 6, 0, lun=lun if lun < 256 else 0x4000 | lun))
        for lun in batch:
            op, _, _ = c.recv()
            assert op == ic.OP_SCSI_RSP, op


def caps(port):
    """The caps on rows (STATS_MAX_NAMED, STATS_MAX_REST: docs/security.md), one reactor so it keeps both
    whole, 4096 each: initiator A on 4200 LUNs fills the named rows, its last 104 LUNs count in their rest
    rows; B on the same LUNs fills the rest rows, and its 104 LUNs past that count in the overflow row.
    Every command is counted once, the luns section comes in pages that meet end to end; once A's sessions
    ended, a new initiator takes the place of A's longest idle row, whose counts go to its LUN's rest row."""
    named_max, rest_max, nluns = 4096, 4096, 4200
    work = checks.workdir('isert-stats-cap-')
    cfgfile = os.path.join(work, 'isertd.json')
    cfg = {'backstores': [{'name': 'b%d' % i, 'type': 'ram', 'size': '64K'} for i in range(64)],
           'targets': [{'iqn': T1, 'tpgs': [{'tag': 1, 'demo_mode': True,
                                             'portals': [{'ip': '127.0.0.1', 'port': port}],
                                             'luns': [{'lun': i, 'backstore': 'b%d' % (i % 64)}
                                                      for i in range(nluns)]}]}]}
    with open(cfgfile, 'w') as f:
        json.dump(cfg, f)
    proc, sock = start_isertd(ISERTD, work, cfgfile, '-r', '1', seconds=10)
    ini_a, ini_b, ini_c = ('iqn.2026-11.org.isert:cap-' + x for x in 'abc')
    try:
        rpc = Rpc(sock)
        conns = []
        for ini in (ini_a, ini_b):
            c = ic.Conn(port, timeout=30)
            assert c.login(ini, T1) == 0
            tur_all(c, list(range(nluns)))
            conns.append(c)
        rows, pages = rpc.stats_rows()
        kinds = {k: [r for r in rows if r.get('row', 'initiator') == k] for k in ('initiator', 'rest', 'overflow')}
        check('caps: %d named rows, all of A' % named_max, len(kinds['initiator']) == named_max and
              all(r['initiator'] == ini_a for r in kinds['initiator']), len(kinds['initiator']))
        check('caps: %d rest rows (initiator "*")' % rest_max, len(kinds['rest']) == rest_max and
              all(r['initiator'] == '*' for r in kinds['rest']), len(kinds['rest']))
        over = kinds['overflow']
        # The rest rows are per LUN: A's last 104 LUNs made theirs, B made the rest of them, up to the cap.
        check('caps: B\'s %d LUNs without a rest row count in the overflow row' % (nluns - rest_max),
              len(over) == 1 and over[0]['target'] == '*' and over[0]['commands']['other'] == nluns - rest_max,
              over[:1])
        check('caps: every command counted once', sum(r['commands']['other'] for r in rows) == 2 * nluns,
              sum(r['commands']['other'] for r in rows))
        keys = [(r['target'], r['tpg'], r['lun'], r['backstore'], r['initiator']) for r in rows]
        check('pages: %d rows in %d pages of at most 512, each once, in order' % (len(rows), pages),
              pages == -(-len(rows) // 512) and len(set(keys)) == len(keys) and keys == sorted(keys),
              (len(rows), pages))
        small, n = rpc.stats_rows(limit=1000 // 7)
        check('pages: limit 142 gives the same rows', small == rows and n == -(-len(rows) // 142), n)
        for params, word in (({'limit': 0}, 'limit'), ({'limit': 513}, 'limit'), ({'cursor': 'x'}, 'cursor'),
                             ({'cursor': '1.zz.1.1..'}, 'cursor'), ({'cursor': 7}, 'cursor')):
            r = rpc.call('stats', params)
            check('stats %s refused naming %s' % (params, word), 'error' in r and word in r['error']['message'], r)
        r = rpc.call('stats', {'sections': ['portals']})['result']
        check('no luns section asked: no more, no cursor', 'more' not in r and 'cursor' not in r, list(r))

        for c in conns:
            c.close()
        # A's rows fold only once the target has seen its sessions end.
        wait_for(lambda: not rpc.call('sessions')['result']['sessions'])
        c = ic.Conn(port)
        check('fold: a new initiator logs in', c.login(ini_c, T1) == 0)
        c.command(b'\0' * 6, lun=7)
        c.close()
        rows2, _ = rpc.stats_rows()
        mine = [r for r in rows2 if r['initiator'] == ini_c]
        check('fold: the new pair has a named row', len(mine) == 1 and mine[0]['lun'] == 7 and
              mine[0]['commands']['other'] == 1, mine)
        gone = [r for r in rows2 if r['initiator'] == ini_a and r['lun'] == 0]
        rest0 = [r for r in rows2 if r.get('row') == 'rest' and r['lun'] == 0]
        check('fold: A\'s longest idle row (LUN 0) went into LUN 0\'s rest row', not gone and len(rest0) == 1 and
              rest0[0]['commands']['other'] == 2, rest0)
        check('fold: named rows stay at the cap', sum(r.get('row') == 'initiator' for r in rows2) == named_max)
        check('fold: every command still counted once', sum(r['commands']['other'] for r in rows2) == 2 * nluns + 1)
        before = {(r['lun'], r['backstore']): 0 for r in rows}
        for r in rows:
            before[(r['lun'], r['backstore'])] += r['commands']['other']
        after = dict.fromkeys(before, 0)
        for r in rows2:
            after[(r['lun'], r['backstore'])] = after.get((r['lun'], r['backstore']), 0) + r['commands']['other']
        check('fold: each LUN\'s total the same, LUN 7 one more', all(after[k] == before[k] + (k[0] == 7)
                                                                       for k in before), '')
        check('caps: isertd still runs', proc.poll() is None)
    finally:
        stop_isertd(proc)
        shutil.rmtree(work, ignore_errors=True)


def main():
    work = checks.workdir('isert-stats-')
    cfgfile = os.path.join(work, 'isertd.json')
    with open(cfgfile, 'w') as f:
        json.dump(config(work), f)
    os.chmod(cfgfile, 0o600)
    proc, sock = start_isertd(ISERTD, work, cfgfile, '-r', '2')
    rpc = Rpc(sock)
    try:
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
        # The four ended connections count as closed once the target has seen them go.
        wait_for(lambda: rpc.call('stats', {'sections': ['portals']})['result']['portals'][0]['connections'] == 1)
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
        if checks.failed:
            print(open(os.path.join(work, 'isertd.log')).read()[-3000:])
        shutil.rmtree(work, ignore_errors=True)
    caps(PORT + 1)
    checks.finish()


if __name__ == '__main__':
    main()
