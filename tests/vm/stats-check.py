#!/usr/bin/env python3
"""isertd's statistics over iSER against a known workload (t-isertd-iser.sh).

  stats-check.py SOCK snap FILE
      save `stats` (JSON) from isertd's admin socket SOCK
  stats-check.py SOCK check BEFORE TARGET INITIATOR LUN DEVICE MIN_READ WRITTEN
      compare the stats now with BEFORE, for the connection of INITIATOR to
      TARGET and its LUN: every byte the LUN's reads returned went by RDMA
      WRITE, one per read command (isertd sends a read's Data-In as one RDMA
      WRITE); at least MIN_READ bytes were read; exactly WRITTEN bytes were
      written, the part that did not come as unsolicited data in the command's
      Send by RDMA READ; Sends and receives cover the commands, and the
      statuses of reads and writes went inline; histograms hold
      every command; the kernel's counters of RDMA device DEVICE are reported
      exactly as sysfs has them (a counter sysfs lacks or cannot read is
      absent, never a zero), and its packet counters moved.
  stats-check.py SOCK devices BEFORE TARGET INITIATOR IP...
      compare the stats now with BEFORE: INITIATOR has one iSER connection to
      TARGET on a portal at each IP (one RDMA device each), the same before
      and after, all on one reactor (so one buffer pool served every device),
      and each moved data both ways by RDMA (RDMA WRITEs and READs, and their
      bytes, grew on every connection).
  stats-check.py SOCK receives TARGET DEPTH MIN_SHARED
      the sessions to TARGET as `sessions` shows them, on one reactor whose
      iSER connections share a receive queue of DEPTH (global.iser_srq): at
      least MIN_SHARED of them take their receives from it, negotiated
      InitialR2T=Yes (no unsolicited Data-Out Sends) and have windows
      (MaxCmdSN - ExpCmdSN + 1, as last sent) of at least 16 whose sum, with
      8 receives each for immediate PDUs, stays within DEPTH; any other has
      its own receives and the full window QueueDepth allows over iSER (120).
Prints one line per check ("ok"/"not ok") and exits 1 if one failed."""
import json
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), '..', 'integration'))
from admin_rpc import Rpc  # noqa: E402


def call(path, method, params=None):
    r = Rpc(path).call(method, params)
    if 'result' not in r:
        raise RuntimeError('%s: %s' % (method, r))
    return r['result']


failed = 0


def check(name, cond, detail=''):
    global failed
    print(('ok     ' if cond else 'not ok ') + name + ('' if cond else '  ' + str(detail)))
    failed += not cond


def sysfs_counters(path):
    """What isertd should report for one counter folder: readable integer files only."""
    out = {}
    if not os.path.isdir(path):
        return None
    for name in os.listdir(path):
        try:
            with open(os.path.join(path, name)) as f:
                out[name] = int(f.read().split()[0])
        except (OSError, ValueError, IndexError):
            pass
    return out


def devices(sock, before_file, target, ini, ips):
    with open(before_file) as f:
        a = json.load(f)
    b = call(sock, 'stats')

    def conn(s, ip):
        c = [x for x in s['connections'] if x['target'] == target and x['initiator'] == ini and
             x['portal'].startswith(ip + ':')]
        return c[0] if len(c) == 1 else None

    reactors = set()
    for ip in ips:
        ca, cb = conn(a, ip), conn(b, ip)
        check('one iSER connection of %s on portal %s, the same before and after' % (ini, ip),
              ca and cb and cb['transport'] == 'iser' and ca['tsih'] == cb['tsih'] and 'rdma' in cb, (ca, cb))
        if not (ca and cb and 'rdma' in cb):
            continue
        reactors.add(cb['reactor'])
        r = {k: cb['rdma'][k] - ca['rdma'][k] for k in cb['rdma']}
        print('# portal %s (reactor %d): %d RDMA WRITEs (%d bytes), %d RDMA READs (%d bytes), %d sends, %d recvs' %
              (ip, cb['reactor'], r['writes'], r['write_bytes'], r['reads'], r['read_bytes'], r['sends'], r['recvs']))
        check('portal %s: reads went by RDMA WRITE, writes by RDMA READ' % ip,
              r['writes'] > 0 and r['write_bytes'] > 0 and r['reads'] > 0 and r['read_bytes'] > 0, r)
    check('the connections of every device share one reactor (one buffer pool)', len(reactors) == 1, reactors)
    return 1 if failed else 0


def receives(sock, target, depth, min_shared):
    sess = [s for s in call(sock, 'sessions')['sessions'] if s.get('target') == target]
    shared = [s for s in sess if s.get('shared_receives')]
    own = [s for s in sess if not s.get('shared_receives')]

    def window(s):
        return (s['max_cmdsn'] - s['exp_cmdsn'] + 1) % (1 << 32)
    for s in sess:
        print('# TSIH %d: %s receives, window %d, InitialR2T %s' % (
            s['tsih'], 'shared' if s.get('shared_receives') else 'own', window(s), s['params'].get('InitialR2T')))
    check('%d sessions or more take their receives from the shared queue' % min_shared, len(shared) >= min_shared,
          len(shared))
    check('those negotiated InitialR2T=Yes', all(s['params'].get('InitialR2T') is True for s in shared))
    check('their windows are 16 or more', all(window(s) >= 16 for s in shared), [window(s) for s in shared])
    need = sum(window(s) + 8 for s in shared)
    check('their windows with 8 spare receives each fit the queue (%d of %d)' % (need, depth), need <= depth)
    check('a session with receives of its own has the full window (120)',
          all(window(s) + s['commands_active'] == 120 for s in own), [window(s) for s in own])
    return 1 if failed else 0


def main():
    sock, verb = sys.argv[1], sys.argv[2]
    if verb == 'snap':
        with open(sys.argv[3], 'w') as f:
            json.dump(call(sock, 'stats'), f)
        return 0
    if verb == 'receives':
        return receives(sock, sys.argv[3], int(sys.argv[4]), int(sys.argv[5]))
    if verb == 'devices':
        return devices(sock, sys.argv[3], sys.argv[4], sys.argv[5], sys.argv[6:])
    before_file, target, ini, lun, device, min_read, written = sys.argv[3:10]
    lun, min_read, written = int(lun), int(min_read), int(written)
    with open(before_file) as f:
        a = json.load(f)
    b = call(sock, 'stats')

    def conn(s):
        c = [x for x in s['connections'] if x['target'] == target and x['initiator'] == ini]
        return c[0] if len(c) == 1 else None

    def entry(s):
        e = [x for x in s['luns'] if x['target'] == target and x['initiator'] == ini and x['lun'] == lun]
        return e[0] if len(e) == 1 else None

    ca, cb, ea, eb = conn(a), conn(b), entry(a), entry(b)
    check('one iSER connection of %s, the same before and after' % ini, ca and cb and ca['transport'] == 'iser'
          and ca['tsih'] == cb['tsih'] and 'rdma' in cb, (ca, cb))
    check('one entry for LUN %d before and after' % lun, ea is not None and eb is not None)
    if not (ca and cb and ea and eb):
        return 1
    r = {k: cb['rdma'][k] - ca['rdma'][k] for k in cb['rdma']}
    reads = eb['commands']['read'] - ea['commands']['read']
    writes = eb['commands']['write'] - ea['commands']['write']
    other = eb['commands']['other'] - ea['commands']['other']
    rbytes = eb['bytes_read'] - ea['bytes_read']
    wbytes = eb['bytes_written'] - ea['bytes_written']
    print('# workload seen by isertd: %d reads (%d bytes), %d writes (%d bytes), %d other; RDMA: %s' %
          (reads, rbytes, writes, wbytes, other, r))
    check('at least %d bytes read' % min_read, rbytes >= min_read, rbytes)
    check('exactly %d bytes written' % written, wbytes == written, wbytes)
    check('RDMA WRITE bytes = bytes the reads returned', r['write_bytes'] == rbytes, (r['write_bytes'], rbytes))
    check('one RDMA WRITE per read command', r['writes'] == reads, (r['writes'], reads))
    # The kernel initiator sends up to FirstBurstLength of each write in its Send (unsolicited data).
    check('RDMA READ brought the writes\' data that was not sent unsolicited', 0 < r['read_bytes'] <= wbytes and
          r['reads'] >= 1, (r['read_bytes'], wbytes))
    cmds = reads + writes + other
    check('a Send per status at least, a receive per command at least', r['sends'] >= cmds and r['recvs'] >= cmds,
          (r['sends'], r['recvs'], cmds))
    # A GOOD SCSI Response is the iSER header and the BHS, 76 bytes: inline on rxe and on siw (80 at most).
    check('a Send inline per read and write status at least', reads + writes <= r.get('inline_sends', 0) <= r['sends'],
          (r.get('inline_sends'), reads + writes, r['sends']))
    # Every WR queued in one reactor iteration goes in one ibv_post_send: a
    # read's RDMA WRITE and its status Send at least share one.
    wrs = r['reads'] + r['writes'] + r['sends']
    check('fewer ibv_post_send calls than WRs (doorbells batched)', 0 < r.get('send_posts', 0) < wrs,
          (r.get('send_posts'), wrs))
    check('completions were polled (polls, completions counted)', r['cq_polls'] > 0 and r['completions'] >= r['recvs'],
          r)
    check('PDUs in/out cover the commands', cb['pdus_in'] - ca['pdus_in'] >= cmds and
          cb['pdus_out'] - ca['pdus_out'] >= cmds)
    for k, n in (('read', reads), ('write', writes)):
        h = eb['latency'][k]['count'] - ea['latency'][k]['count']
        check('%s histogram holds every %s' % (k, k), h == n, (h, n))
    dev = [d for d in b['rdma_devices'] if d['device'] == device]
    check('RDMA device %s reported' % device, len(dev) >= 1, [d['device'] for d in b['rdma_devices']])
    for d in dev:
        base = '/sys/class/infiniband/%s/ports/%d' % (device, d['port'])
        for folder in ('counters', 'hw_counters'):
            want = sysfs_counters(os.path.join(base, folder))
            if want is None:
                check('%s port %d: no %s folder, none reported' % (device, d['port'], folder), folder not in d)
                continue
            got = d.get(folder, {})
            check('%s port %d %s: the same counters as sysfs (%d)' % (device, d['port'], folder, len(want)),
                  set(got) == set(want), sorted(set(got) ^ set(want)))
        old = [x for x in a['rdma_devices'] if x['device'] == device and x['port'] == d['port']]
        moved = [k for k, v in d.get('hw_counters', {}).items() if old and v > old[0].get('hw_counters', {}).get(k, v)]
        moved += [k for k, v in d.get('counters', {}).items() if old and v > old[0].get('counters', {}).get(k, v)]
        print('# %s port %d: %s' % (device, d['port'], ', '.join('%s %s' % (k, v) for k, v in
                                                              sorted(d.get('hw_counters', {}).items())[:12])))
        if d.get('hw_counters') or d.get('counters'):
            check('%s port %d: its counters moved with the workload' % (device, d['port']), moved, moved)
    return 1 if failed else 0


if __name__ == '__main__':
    sys.exit(main())
