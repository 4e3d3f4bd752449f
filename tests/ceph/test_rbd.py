#!/usr/bin/env python3
"""The rbd backstore against a real throw-away Ceph cluster (run it under
tests/ceph/cluster.sh run, which exports CEPH_CONF), over real TCP sessions:

- data written through isertd is in the image byte for byte (rbd export),
  data put in with rbd import reads back through isertd, on 512- and
  4096-byte LUNs (the latter with librbd's cache on, written back by
  SYNCHRONIZE CACHE); UNMAP reads back as zeroes; COMPARE AND WRITE by librbd
  (miscompare offset in INFORMATION), and the multi-block fallback;
- reservations kept in the cluster (isert_state.<image id> beside the
  image; test_cluster.py checks them across gateways); an image resized with `rbd resize` gives CAPACITY DATA HAS
  CHANGED and the new size, and backstore.resize grows the image;
- two gateways (two isertd) on one image: the same VPD 80h/83h identity and
  the same REPORT TARGET PORT GROUPS from both; the standby one refuses
  writes; gateway A killed with -9 mid-stream, SET TARGET PORT GROUPS to B
  (what dm-multipath's scsi_dh_alua sends), writes go on through B and
  every acknowledged write is in the image (rbd export);
- an unknown pool or image, or a cluster that does not answer: isertd
  refuses to start with a message naming it.

usage: test_rbd.py ISERTD ISERCTL [PORT]"""
import json
import os
import shutil
import signal
import struct
import subprocess
import sys
import tempfile
import threading
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), '..', 'integration'))
import iscsi_client as ic  # noqa: E402
import checks  # noqa: E402
from admin_rpc import Rpc, stop_isertd  # noqa: E402
from checks import check  # noqa: E402

ISERTD, ISERCTL = sys.argv[1], sys.argv[2]
PORT = int(sys.argv[3]) if len(sys.argv) > 3 else 3540
CONF = os.environ['CEPH_CONF']
T = 'iqn.2026-11.org.isert:rbd'
INI = 'iqn.2026-11.org.isert:rbd-host'
GOOD, CHECK = 0, 2
NOT_READY, UNIT_ATTENTION, MISCOMPARE = 2, 6, 0xE
MB = 1 << 20


def rbd(*args, data=None):
    return subprocess.run(['rbd', '--conf', CONF] + list(args), input=data, capture_output=True, timeout=120)


def rados_objects():
    r = subprocess.run(['rados', '--conf', CONF, '-p', 'rbd', 'ls'], capture_output=True, text=True, timeout=60)
    return r.stdout.split()


def export(image):
    r = rbd('export', 'rbd/' + image, '-')
    return r.stdout if r.returncode == 0 else b''


def sense_of(sense):
    """(key, asc, ascq) from fixed-format sense."""
    return (sense[2] & 0x0F, sense[12], sense[13]) if len(sense) >= 14 else None


def run(c, cdb, edtl=0, read=False, data=None, lun=0):
    st, din, sense = c.command(cdb, edtl, read=read, write_data=data, lun=lun)
    return st, din, (sense_of(sense) if st == CHECK else None), sense


def read16(lba, blocks):
    return struct.pack('>BBQIBB', 0x88, 0, lba, blocks, 0, 0)


def write16(lba, blocks):
    return struct.pack('>BBQIBB', 0x8A, 0, lba, blocks, 0, 0)


def drain_ua(c, lun=0):
    """TEST UNIT READYs until one passes; the unit attentions seen."""
    seen = []
    for _ in range(8):
        st, _, s, _ = run(c, b'\0' * 6, lun=lun)
        if s and s[0] == UNIT_ATTENTION:
            seen.append((s[1], s[2]))
            continue
        break
    return seen


def login(port, timeout=10):
    c = ic.Conn(port, timeout=timeout)
    assert c.login(INI, T) == 0
    for lun in range(3):
        drain_ua(c, lun)
    return c


def write(c, lba, data, bs=512, lun=0):
    return run(c, write16(lba, len(data) // bs), len(data), data=data, lun=lun)[0] == GOOD


def read(c, lba, n, bs=512, lun=0):
    st, d, _, _ = run(c, read16(lba, n // bs), n, read=True, lun=lun)
    return d if st == GOOD else None


def inquiry(c, page):
    st, d, _, _ = run(c, bytes([0x12, 1, page, 1, 0, 0]), 256, read=True)
    return d


def naa(vpd83):
    off, end = 4, 4 + struct.unpack('>H', vpd83[2:4])[0]
    while off + 4 <= end:
        if vpd83[off + 1] & 0x3F == 0x03:   # association LU, type NAA
            return vpd83[off + 4:off + 4 + vpd83[off + 3]]
        off += 4 + vpd83[off + 3]
    return None


def rtpg(c):
    st, d, _, _ = run(c, bytes([0xA3, 0x0A, 0, 0, 0, 0]) + struct.pack('>I', 1024) + b'\0\0', 1024, read=True)
    return d


def capacity(c):
    st, d, _, _ = run(c, bytes([0x9E, 0x10]) + b'\0' * 8 + struct.pack('>I', 32) + b'\0\0', 32, read=True)
    return (struct.unpack('>Q', d[:8])[0] + 1) * struct.unpack('>I', d[8:12])[0] if st == GOOD else None


def wait_for(cond, seconds):
    end = time.time() + seconds
    while time.time() < end:
        if cond():
            return True
        time.sleep(0.1)
    return cond()


def gateway(work, name, port, tpg, own, other, extra_bs=(), bs_name='vol'):
    """Config of one gateway: target T with portal group tpg, ALUA group own (tpg) and other (remote port)."""
    bss = [{'name': bs_name, 'type': 'rbd', 'pool': 'rbd', 'image': 'vol', 'conf': CONF}] + list(extra_bs)
    luns = [{'lun': i, 'backstore': b['name']} for i, b in enumerate(bss)]
    groups = [{'id': own[0], 'state': own[1], 'tpgs': [tpg]},
              {'id': other[0], 'state': other[1], 'remote_ports': [other[2]]}]
    cfg = {'backstores': bss,
           'targets': [{'iqn': T, 'tpgs': [{'tag': tpg, 'demo_mode': True,
                                            'portals': [{'ip': '127.0.0.1', 'port': port}], 'luns': luns}],
                        'alua': {'mode': 'both', 'groups': sorted(groups, key=lambda g: g['id'])}}]}
    path = os.path.join(work, name + '.json')
    with open(path, 'w') as f:
        json.dump(cfg, f)
    return path


def start(work, name, cfgfile, wait_port=None):
    sock = os.path.join(work, name + '.sock')
    log = open(os.path.join(work, name + '.log'), 'w')
    p = subprocess.Popen([ISERTD, '-c', cfgfile, '--admin-socket', sock, '--state-dir', 'none', '-r', '2'],
                         stdout=log, stderr=subprocess.STDOUT)
    for _ in range(600):
        if os.path.exists(sock) or p.poll() is not None:
            break
        time.sleep(0.05)
    return p, sock


def refused_start(work, name, bs, want):
    """isertd with backstore bs (or a list of them) must exit non-zero, its message holding want."""
    bss = bs if isinstance(bs, list) else [bs]
    cfg = {'backstores': bss, 'targets': [{'iqn': T, 'tpgs': [{'tag': 1, 'demo_mode': True,
           'portals': [{'ip': '127.0.0.1', 'port': PORT + 5}],
           'luns': [{'lun': i, 'backstore': b['name']} for i, b in enumerate(bss)]}]}]}
    path = os.path.join(work, name + '.json')
    with open(path, 'w') as f:
        json.dump(cfg, f)
    t0 = time.time()
    try:
        r = subprocess.run([ISERTD, '-c', path, '--admin-socket', 'none', '--state-dir', 'none'],
                           capture_output=True, text=True, timeout=90)
    except subprocess.TimeoutExpired:
        return False, 'still running after 90 s'
    return r.returncode != 0 and want in r.stderr, '%.1f s, rc %d: %s' % (time.time() - t0, r.returncode,
                                                                        r.stderr.strip()[-300:])


def data_checks(c, rpc):
    blob = os.urandom(MB)
    check('1 MiB written through isertd (WRITE 16, R2T)', write(c, 2048, blob))
    check('SYNCHRONIZE CACHE', run(c, bytes([0x35]) + b'\0' * 9)[0] == GOOD)
    img = export('vol')
    check('rbd export has the written MiB byte for byte', img[2048 * 512:2048 * 512 + MB] == blob, len(img))
    check('and reads back through isertd', read(c, 2048, MB) == blob)

    got = b''.join(read(c, i * 2048, MB, lun=1) or b'' for i in range(4))
    check('an image put in with rbd import reads back through isertd byte for byte', got == imp_data, len(got))

    # 4096-byte LUN on its own image
    st, d, _, _ = run(c, bytes([0x9E, 0x10]) + b'\0' * 8 + struct.pack('>I', 32) + b'\0\0', 32, read=True, lun=2)
    check('4096-byte LUN: READ CAPACITY(16) says 4096-byte blocks',
          st == GOOD and struct.unpack('>I', d[8:12])[0] == 4096, d[:12].hex())
    b4 = os.urandom(256 * 1024)
    st, d, _, _ = run(c, bytes([0x1A, 0, 0x08, 0, 64, 0]), 64, read=True, lun=2)
    check('4096-byte LUN with write_cache (librbd cache on): MODE SENSE caching page says WCE',
          st == GOOD and len(d) > 6 and d[4 + d[3] + 2] & 0x04, d.hex())
    check('4096-byte LUN: 256 KiB written, then SYNCHRONIZE CACHE (rbd_aio_flush)',
          write(c, 10, b4, bs=4096, lun=2) and run(c, bytes([0x35]) + b'\0' * 9, lun=2)[0] == GOOD)
    check('4096-byte LUN: rbd export has them at byte 40960', export('vol4k')[40960:40960 + len(b4)] == b4)
    check('4096-byte LUN: read back', read(c, 10, len(b4), bs=4096, lun=2) == b4)

    # UNMAP: LBPRZ, the range reads back as zeroes (partial objects included)
    um = struct.pack('>HH4x', 22, 16) + struct.pack('>QI4x', 2048 + 3, 1000)
    st = run(c, bytes([0x42, 0, 0, 0, 0, 0, 0]) + struct.pack('>H', len(um)) + b'\0', len(um), data=um)[0]
    back = read(c, 2048, MB)
    check('UNMAP of 1000 blocks inside the written MiB: they read back as zeroes, the rest unchanged',
          st == GOOD and back == blob[:3 * 512] + bytes(1000 * 512) + blob[1003 * 512:])

    # COMPARE AND WRITE: librbd's own (one 512-byte block) and the fallback (several)
    old, new = os.urandom(512), os.urandom(512)
    write(c, 100, old)
    caw = lambda lba, n: bytes([0x89, 0]) + struct.pack('>Q', lba) + bytes([0, 0, 0, n, 0, 0])  # noqa: E731
    st, _, _, _ = run(c, caw(100, 1), 1024, data=old + new)
    check('COMPARE AND WRITE (1 block, by librbd): match, written', st == GOOD and read(c, 100, 512) == new)
    bad = bytearray(new)
    bad[100] ^= 0xFF
    st, _, s, raw = run(c, caw(100, 1), 1024, data=bytes(bad) + old)
    info = struct.unpack('>I', raw[3:7])[0] if len(raw) >= 7 else None
    check('COMPARE AND WRITE miscompare: MISCOMPARE 1Dh/00h, INFORMATION = offset 100 (VALID)',
          s == (MISCOMPARE, 0x1D, 0) and raw[0] & 0x80 and info == 100, (s, info))
    check('  and the block is unchanged', read(c, 100, 512) == new)
    two = os.urandom(1024)
    write(c, 200, two)
    nxt = os.urandom(1024)
    st, _, _, _ = run(c, caw(200, 2), 2048, data=two + nxt)
    check('COMPARE AND WRITE of 2 blocks (read, compare, write in isertd): written', st == GOOD and
          read(c, 200, 1024) == nxt)

    # Reservations: kept in the cluster beside the image (test_cluster.py: across gateways)
    st, d, s, _ = run(c, bytes([0x5E, 0]) + b'\0' * 5 + struct.pack('>H', 64) + b'\0', 64, read=True)
    check('PERSISTENT RESERVE IN READ KEYS: GOOD', st == GOOD, s)
    check('RESERVE(6), then RELEASE(6): GOOD', run(c, bytes([0x16, 0, 0, 0, 0, 0]))[0] == GOOD and
          run(c, bytes([0x17, 0, 0, 0, 0, 0]))[0] == GOOD)
    st = rados_objects()
    check('the LU\'s shared state is in the pool beside the image (isert_state.<image id>)',
          any(o.startswith('isert_state.') for o in st), st)

    # Resizes: by another client (rbd resize), and through the admin socket
    r = rbd('resize', '--size', '80M', 'rbd/vol')
    seen = []
    for _ in range(100):
        seen = drain_ua(c)
        if seen:
            break
        time.sleep(0.1)
    check('rbd resize by another client: CAPACITY DATA HAS CHANGED (2Ah/09h)', r.returncode == 0 and
          (0x2A, 0x09) in seen, (r.stderr, seen))
    check('  and READ CAPACITY says 80 MiB', capacity(c) == 80 * MB, capacity(c))
    res = rpc.call('backstore.resize', {'name': 'vol', 'size': '96M'})
    info = json.loads(rbd('info', '--format', 'json', 'rbd/vol').stdout or b'{}')
    check('backstore.resize grows the image to 96 MiB (rbd info)', 'result' in res and info.get('size') == 96 * MB,
          (res, info.get('size')))
    check('  and the session hears CAPACITY DATA HAS CHANGED', (0x2A, 0x09) in drain_ua(c))
    res = rpc.call('backstore.resize', {'name': 'vol', 'size': '32M'})
    check('backstore.resize refuses to shrink', 'error' in res, res)


def failover(work, a, a_sock, c):
    """Gateway B (standby) joins; A is killed mid-stream; writes go on through B."""
    # Another backstore name on B: the LU's identity comes from the image, not from the name.
    cfg_b = gateway(work, 'b', PORT + 1, 2, (2, 'standby'), (1, 'active_optimized', 1), bs_name='vol-on-b')
    b, b_sock = start(work, 'b', cfg_b)
    cb = login(PORT + 1, timeout=120)
    va, vb = inquiry(c, 0x83), inquiry(cb, 0x83)
    check('two gateways, one image: the same NAA designator (VPD 83h)', naa(va) and naa(va) == naa(vb),
          (naa(va), naa(vb)))
    check('and the same unit serial number (VPD 80h)', inquiry(c, 0x80) == inquiry(cb, 0x80))
    check('and the same REPORT TARGET PORT GROUPS from both', rtpg(c) == rtpg(cb) and len(rtpg(c)) > 8,
          (rtpg(c).hex(), rtpg(cb).hex()))
    st, _, s, _ = run(cb, write16(0, 1), 512, data=bytes(512))
    check('the standby gateway refuses a WRITE: NOT READY 04h/0Bh', s == (NOT_READY, 0x04, 0x0B), s)

    # Writers on 4 sessions to A, each on its own region, several writes in flight when A dies; each
    # then goes to B (as a multipath layer would) and re-issues what A never acknowledged.
    lba0, per, nw = 40960, 48, 4
    pat = lambda w, i: struct.pack('>HH', w, i) * 16384   # noqa: E731   64 KiB, 128 blocks
    lba = lambda w, i: lba0 + (w * per + i) * 128          # noqa: E731
    acked, failed_on_a, refused_on_b, t_kill = {}, [], [], []
    switched = threading.Event()

    def writer(w):
        conn = login(PORT, timeout=120)
        i = 0
        while i < per:
            try:
                ok = write(conn, lba(w, i), pat(w, i))
            except (OSError, RuntimeError, ConnectionError, struct.error):
                ok = False
            if not ok:
                failed_on_a.append((w, i))
                break
            acked[(w, i)] = 'A'
            i += 1
        if i == per:
            return
        switched.wait(180)
        conn = login(PORT + 1, timeout=120)
        for j in range(i, per):
            # A unit attention (B's ALUA state or reservations told later, as the shared state's
            # notify arrives) is retried, as the SCSI midlayer does; any other answer is a failure.
            for _ in range(5):
                st, _, s, _ = run(conn, write16(lba(w, j), len(pat(w, j)) // 512), len(pat(w, j)), data=pat(w, j))
                if not (s and s[0] == UNIT_ATTENTION):
                    break
            if st == GOOD:
                acked[(w, j)] = time.time() - t_kill[0]
            else:
                refused_on_b.append((w, j, s))
        conn.close()

    threads = [threading.Thread(target=writer, args=(w,)) for w in range(nw)]
    for t in threads:
        t.start()
    while len(acked) < nw * 6:
        time.sleep(0.05)
    a.send_signal(signal.SIGKILL)
    t_kill.append(time.time())
    a.wait()
    check('gateway A killed with -9 while %d sessions write: their commands fail' % nw,
          wait_for(lambda: len(failed_on_a) == nw, 60), failed_on_a)
    # What dm-multipath's ALUA handler does on a path failure: make the other group active.
    stpg = b'\0' * 4 + bytes([0, 0]) + struct.pack('>H', 2)
    st, _, s, _ = run(cb, bytes([0xA4, 0x0A, 0, 0, 0, 0]) + struct.pack('>I', 8) + b'\0\0', 8, data=stpg)
    check('SET TARGET PORT GROUPS to gateway B: group 2 active/optimized', st == GOOD, s)
    drain_ua(cb)
    switched.set()
    for t in threads:
        t.join(300)
    via_b = sorted(v for v in acked.values() if isinstance(v, float))
    print('     %d writes acknowledged by A, %d by B; the first through B %.1f s after A was killed '
          '(B fenced A, and librbd took the exclusive lock from it)' %
          (len(acked) - len(via_b), len(via_b), via_b[0] if via_b else -1))
    check('every write acknowledged, by A or then by B', len(acked) == nw * per,
          '%d acknowledged; refused by B (writer, write, sense): %s' % (len(acked), refused_on_b))
    img = export('vol')
    lost = [k for k in acked if img[lba(*k) * 512:(lba(*k) + 128) * 512] != pat(*k)]
    check('no acknowledged write lost: all %d in the image (rbd export)' % len(acked), not lost and img, lost)
    drain_ua(cb)  # B's fencing of A changed the ALUA states too (docs/cluster.md)
    check('and B reads them back', all(read(cb, lba(*k), 65536) == pat(*k) for k in acked))
    cb.close()
    check('gateway B stops cleanly', stop_isertd(b) == 0)


imp_data = b''


def main():
    global imp_data
    work = tempfile.mkdtemp(prefix='isert-rbd-')
    procs = []
    try:
        for name, size in (('vol', '64M'), ('vol4k', '16M')):
            r = rbd('create', '--size', size, 'rbd/' + name)
            check('rbd create %s' % name, r.returncode == 0, r.stderr)
        imp_data = os.urandom(4 * MB)
        r = rbd('import', '-', 'rbd/imp', data=imp_data)
        check('rbd import of 4 MiB', r.returncode == 0, r.stderr)

        cfg_a = gateway(work, 'a', PORT, 1, (1, 'active_optimized'), (2, 'standby', 2), extra_bs=(
            {'name': 'imp', 'type': 'rbd', 'pool': 'rbd', 'image': 'imp', 'conf': CONF, 'readonly': True},
            {'name': 'vol4k', 'type': 'rbd', 'pool': 'rbd', 'image': 'vol4k', 'conf': CONF, 'block_size': 4096,
             'write_cache': True}))
        a, a_sock = start(work, 'a', cfg_a)
        procs.append(a)
        check('gateway A starts with three rbd LUNs', a.poll() is None)
        c = login(PORT)
        data_checks(c, Rpc(a_sock))
        failover(work, a, a_sock, c)

        ok, why = refused_start(work, 'nopool', {'name': 'x', 'type': 'rbd', 'pool': 'nopool', 'image': 'vol',
                                                 'conf': CONF}, "pool 'nopool': no such pool")
        check('an unknown pool: isertd refuses to start, naming it', ok, why)
        ok, why = refused_start(work, 'noimg', {'name': 'x', 'type': 'rbd', 'pool': 'rbd', 'image': 'nothere',
                                                'conf': CONF}, "no such image")
        check('an unknown image: isertd refuses to start, naming it', ok, why)
        dead = os.path.join(work, 'dead.conf')
        with open(dead, 'w') as f:
            f.write('[global]\nmon_host = 127.0.0.1:1\nclient_mount_timeout = 3\nauth_client_required = none\n')
        ok, why = refused_start(work, 'dead', {'name': 'x', 'type': 'rbd', 'pool': 'rbd', 'image': 'vol',
                                               'conf': dead}, 'cannot connect to cluster')
        check('a cluster that does not answer: isertd gives up after client_mount_timeout, saying so', ok, why)
        ok, why = refused_start(work, 'twice', [{'name': n, 'type': 'rbd', 'pool': 'rbd', 'image': 'vol', 'conf': CONF}
                                                for n in ('x', 'y')], "is already that of backstore 'x'")
        check('one image as two backstores of one isertd: refused, naming both (one serial, one LU)', ok, why)
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait()
        for name in ('a', 'b'):
            path = os.path.join(work, name + '.log')
            if checks.failed and os.path.exists(path):
                print('---- %s.log' % name)
                print(open(path).read()[-3000:])
        shutil.rmtree(work, ignore_errors=True)
    checks.finish()


if __name__ == '__main__':
    main()
