#!/usr/bin/env python3
"""Chaos soak on the host, over TCP (tests/chaos/README.md): verifying
clients run against isertd while a seeded driver breaks things at random,
logged moments, and at the end every verifying client's data must check, no
isertd may have died unasked (or left a sanitizer report), memory must stay
bounded, and a report lists every event with its time.

Clients: iserbench -v (data validation through the initiator library, which
reconnects) on two file LUNs of target :chaos (write cache on and off);
libiscsi's iscsi-perf (-n, reconnecting) on a RAM LUN of target :aux.
Events: SIGKILL and restart of isertd (the saved configuration and an APTPL
registration must come back); a session closed through the admin socket;
LUNs added to and removed from :aux, a backstore grown; an ACL added to and
removed from :chaos; :aux's ALUA group flipped between active/optimized and
active/non-optimized; hostile peers (garbage, an oversized login, a flood of
logins that never finish, a command PDU with impossible lengths).

In the test guest (--guest RXE_IP,SIW_IP; tests/vm/t-chaos.sh) also: the
kernel initiator with fio crc32c verify on its own LUN over TCP, over iSER
on Soft-RoCE and on Soft-iWARP, and on a dm-multipath map over a TCP and an
iSER path in two ALUA groups; `iseradm map` with fio verify; events add RDMA
link flaps (the netdev under rxe0 or siw0 down for 1-3 s), and the ALUA
flips also put the map's preferred group in standby and back (multipathd
must be running, with the ALUA handler: t-chaos.sh starts it).

usage: chaos.py --build DIR --seconds N --seed S [--port P] [--work DIR]
       [--guest RXE_IP,SIW_IP --initiator KERNEL-INITIATOR-IQN]
  N: at least 20, a multiple of 5.
  P, P+1: the two targets' portals (default 4300); P+2..P+7 the guest's.  A seed replays: the same
  events in the same order at the same offsets (the clients' timing differs).
exit 0: every check passed; 1: a check failed (the report says which).
"""
import json
import os
import random
import shutil
import signal
import socket
import struct
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, '..', 'integration'))
import iscsi_client as ic  # noqa: E402
import pr_client as pr  # noqa: E402
import checks  # noqa: E402
from checks import check  # noqa: E402


def arg(name, default=None):
    return sys.argv[sys.argv.index(name) + 1] if name in sys.argv else default


PFX = 'iqn.2026-11.org.isert.chaos'
T1, T2 = PFX + ':chaos', PFX + ':aux'
KMP = PFX + ':kmp'
VERIFY, PERF, PROBE, STRANGER = PFX + ':verify', PFX + ':perf', PFX + ':probe', PFX + ':stranger'
APTPL_KEY = 0xC4A05
HEAP_GROWTH_MIB = 64      # per isertd incarnation, after its first sample
WARMUP = 10               # seconds after a start before the first memory sample


class Soak:
    def __init__(self):
        self.build = arg('--build')
        self.seconds, self.seed = int(arg('--seconds', '60')), int(arg('--seed', '1'))
        if self.seconds < 20 or self.seconds % 5:
            sys.exit(f'chaos.py: --seconds {self.seconds}: at least 20, a multiple of 5 (iserbench\'s interval)')
        self.port = int(arg('--port', '4300'))
        self.iorate = arg('--iorate', 'max')   # iserbench's I/O rate; a number leaves CPU to other work
        self.work = arg('--work') or checks.workdir('isertd-chaos-')
        os.makedirs(self.work, exist_ok=True)
        self.rng = random.Random(self.seed)
        self.sock = os.path.join(self.work, 'admin.sock')
        self.cfg = os.path.join(self.work, 'isertd.json')
        self.events, self.rss, self.t0 = [], [], time.time()
        self.proc, self.incarnation = None, 0
        self.extra, self.size = [], {}   # the LUN numbers added to :aux, their backstores' sizes (MiB)
        self.unasked = []
        self.guest = arg('--guest', '').split(',') if '--guest' in sys.argv else None
        self.gsi_dead = False   # rxe0's QP1 seen in error (watch_gsi)
        self.kinit = arg('--initiator', 'iqn.2026-11.org.isert.vm:init1')
        self.fios, self.disks = {}, {}

    def log(self, kind, detail, ok=True):
        e = {'t': round(time.time() - self.t0, 2), 'event': kind, 'detail': detail, 'ok': ok}
        self.events.append(e)
        print(f'[{e["t"]:8.2f}] {kind}: {detail}{"" if ok else "  (FAILED)"}', flush=True)

    # ---- isertd --------------------------------------------------------------------
    def write_config(self):
        acl = lambda ini, luns: {'initiator': ini, 'mapped_luns': [  # noqa: E731
            {'mapped_lun': n, 'tpg_lun': n} for n in luns]}
        cfg = {
            'backstores': [
                {'name': 'va', 'type': 'file', 'path': os.path.join(self.work, 'va.img'), 'size': '64M',
                 'write_cache': True},
                {'name': 'vb', 'type': 'file', 'path': os.path.join(self.work, 'vb.img'), 'size': '64M'},
                {'name': 'perf', 'type': 'ram', 'size': '64M'}],
            'targets': [
                {'iqn': T1, 'tpgs': [{'tag': 1, 'portals': [{'ip': '127.0.0.1', 'port': self.port}],
                                      'luns': [{'lun': 0, 'backstore': 'va'}, {'lun': 1, 'backstore': 'vb'}],
                                      'acls': [acl(VERIFY, [0, 1]), acl(PROBE, [0, 1])]}]},
                {'iqn': T2, 'tpgs': [{'tag': 1, 'portals': [{'ip': '127.0.0.1', 'port': self.port + 1}],
                                      'luns': [{'lun': 0, 'backstore': 'perf'}], 'demo_mode': True}],
                 'alua': {'groups': [{'id': 1, 'state': 'active_optimized', 'tpgs': [1]}]}}],
            'global': {'state_dir': os.path.join(self.work, 'state'), 'login_timeout': 3}}
        if self.guest:   # a dm-multipath map: TCP in ALUA group 1 (preferred), iSER on siw in group 2
            cfg['backstores'].append({'name': 'kmp', 'type': 'file', 'path': os.path.join(self.work, 'kmp.img'),
                                      'size': '64M'})
            cfg['targets'].append({'iqn': KMP, 'tpgs': [
                {'tag': 1, 'demo_mode': True, 'portals': [{'ip': '127.0.0.1', 'port': self.port + 6}],
                 'luns': [{'lun': 0, 'backstore': 'kmp'}]},
                {'tag': 2, 'demo_mode': True, 'portals': [{'ip': self.guest[1], 'port': self.port + 7, 'iser': True}],
                 'luns': [{'lun': 0, 'backstore': 'kmp'}]}],
                'alua': {'groups': [{'id': 1, 'state': 'active_optimized', 'preferred': True, 'tpgs': [1]},
                                    {'id': 2, 'state': 'active_nonoptimized', 'tpgs': [2]}]}})
        for i, (name, ip, iser) in enumerate(self.kernel_targets()):
            cfg['backstores'].append({'name': name, 'type': 'file', 'path': os.path.join(self.work, f'{name}.img'),
                                      'size': '64M', 'write_cache': i % 2 == 0})
            cfg['targets'].append({'iqn': f'{PFX}:{name}', 'tpgs': [{
                'tag': 1, 'demo_mode': True, 'portals': [{'ip': ip, 'port': self.port + 2 + i, 'iser': iser}],
                'luns': [{'lun': 0, 'backstore': name}]}]})
        with open(self.cfg, 'w') as f:
            json.dump(cfg, f, indent=1)

    def start(self):
        self.incarnation += 1
        self.started = time.time()
        logf = open(os.path.join(self.work, f'isertd-{self.incarnation}.log'), 'wb')
        # ASan keeps 256 MiB of freed memory in quarantine by default: that is not what the memory check
        # is after, so a smaller one (the same options do nothing in a build without ASan).
        env = dict(os.environ, ASAN_OPTIONS=':'.join(filter(None, [os.environ.get('ASAN_OPTIONS'),
                                                                    'quarantine_size_mb=8'])))
        self.proc = subprocess.Popen([os.path.join(self.build, 'target', 'isertd'), '--config', self.cfg,
                                      '--admin-socket', self.sock], stdout=logf, stderr=logf, env=env)
        logf.close()
        for _ in range(200):
            if self.listening(self.port + 1) and os.path.exists(self.sock):
                return True
            if self.proc.poll() is not None:
                break
            time.sleep(0.05)
        return False

    def log_tail(self):
        with open(os.path.join(self.work, f'isertd-{self.incarnation}.log'), errors='replace') as f:
            return f.read()[-800:]

    @staticmethod
    def listening(port):
        try:
            socket.create_connection(('127.0.0.1', port), timeout=1).close()
            return True
        except OSError:
            return False

    def iserctl(self, *a, check_rc=True):
        p = subprocess.run([os.path.join(self.build, 'tools', 'iserctl', 'iserctl'), '-s', self.sock, *a],
                           capture_output=True, text=True, timeout=30)
        if check_rc and p.returncode:
            raise RuntimeError(f'iserctl {" ".join(a)}: {p.stderr.strip()[-200:]}')
        return p.stdout

    def heap_kib(self):
        """isertd's RSS less its buffer pools' slabs (kB)."""
        with open(f'/proc/{self.proc.pid}/status') as f:
            rss = next(int(l.split()[1]) for l in f if l.startswith('VmRSS:'))
        pool = sum(r['buffer_pool_bytes'] for r in json.loads(self.iserctl('stats', '--json'))['reactors'])
        return rss - pool // 1024

    def kernel_targets(self):
        """(name, portal IP, iSER) of the guest's kernel clients: TCP, rxe, siw, and the iseradm map's."""
        if not self.guest:
            return []
        return [('ktcp', '127.0.0.1', False), ('krxe', self.guest[0], True), ('ksiw', self.guest[1], True),
                ('kmap', '127.0.0.1', False)]

    # ---- clients -------------------------------------------------------------------
    def start_clients(self):
        if self.guest:
            self.start_kernel_clients()
        parm = os.path.join(self.work, 'verify.parm')
        with open(parm, 'w') as f:
            deep = 2 if self.guest else 8   # in the guest, room for the kernel's clients
            f.write(f'sd=va,lun=iscsi://127.0.0.1:{self.port}/{T1}/0,threads={deep}\n'
                    f'sd=vb,lun=iscsi://127.0.0.1:{self.port}/{T1}/1,threads={deep // 2}\n'
                    'wd=mix,sd=*,xfersize=(4k,40,64k,40,256k,20),rdpct=50,seekpct=random\n'
                    f'rd=soak,wd=mix,iorate={self.iorate},elapsed={self.seconds},interval=5\n')
        self.bench_out = open(os.path.join(self.work, 'iserbench.out'), 'w')
        self.bench = subprocess.Popen([os.path.join(self.build, 'tools', 'iserbench', 'iserbench'), '-f', parm,
                                       '-v', '-i', VERIFY, '-o', os.path.join(self.work, 'iserbench')],
                                      stdout=self.bench_out, stderr=subprocess.STDOUT)
        self.perf_out = open(os.path.join(self.work, 'iscsi-perf.out'), 'w')
        self.perf = subprocess.Popen(['iscsi-perf', '-i', PERF, '-n', '-x', '100000', '-r', '-m', '1' if self.guest or self.iorate != 'max' else '8',
                                      f'iscsi://127.0.0.1:{self.port + 1}/{T2}/0'],
                                     stdout=self.perf_out, stderr=subprocess.STDOUT)
        self.perf_restarts = 0

    def fio(self, name, dev, engine):
        """fio randrw 4k-256k with crc32c verification of what it wrote, until the soak ends."""
        out = os.path.join(self.work, f'fio-{name}.txt')
        self.fios[name] = (subprocess.Popen(
            ['fio', f'--name={name}', f'--filename={dev}', '--direct=1', f'--ioengine={engine}', '--iodepth=4',
             '--rw=randrw', '--bsrange=4k-256k', '--verify=crc32c', '--verify_fatal=1', '--size=32m',
             '--time_based', f'--runtime={self.seconds - 5}', '--eta=never', f'--output={out}'],
            stdout=subprocess.DEVNULL, stderr=subprocess.STDOUT), out)

    def kernel_disks(self, iqn):
        """The disks of the kernel's sessions to IQN (one per session)."""
        found = []
        for sess in os.listdir('/sys/class/iscsi_session'):
            base = f'/sys/class/iscsi_session/{sess}'
            if open(f'{base}/targetname').read().strip() != iqn:
                continue
            for root, dirs, _ in os.walk(f'{base}/device'):
                if os.path.basename(root) == 'block' and dirs:
                    found.append(dirs[0])
        return sorted(found)

    def kernel_login(self, iqn, portal, iface, replacement=60):
        subprocess.run(['iscsiadm', '-m', 'node', '-o', 'new', '-T', iqn, '-p', portal, '-I', iface],
                       capture_output=True)
        # open-iscsi's default is 120 s; the suite's iscsid.conf says 15 to fail fast.  A link flap
        # over iSER takes longer than 15 s to recover from under TCG.  Under multipath, 15 s.
        subprocess.run(['iscsiadm', '-m', 'node', '-T', iqn, '-p', portal, '-I', iface, '-o', 'update',
                        '-n', 'node.session.timeo.replacement_timeout', '-v', str(replacement)],
                       capture_output=True)
        p = subprocess.run(['iscsiadm', '-m', 'node', '-T', iqn, '-p', portal, '-I', iface, '--login'],
                           capture_output=True, text=True)
        self.disks.setdefault(iqn, []).append((portal, iface))
        return p.returncode == 0, p.stderr.strip()[-200:]

    def wait(self, cond, seconds=20):
        for _ in range(int(seconds * 10)):
            v = cond()
            if v:
                return v
            time.sleep(0.1)
        return None

    def start_kernel_clients(self):
        todo = []
        for i, (name, ip, iser) in enumerate(self.kernel_targets()[:3]):
            iqn, portal, iface = f'{PFX}:{name}', f'{ip}:{self.port + 2 + i}', 'iser' if iser else 'default'
            ok, err = self.kernel_login(iqn, portal, iface)
            dev = self.wait(lambda: self.kernel_disks(iqn))
            check(f'kernel initiator: {name} ({iface} at {portal}) gives a disk', ok and dev, err)
            if dev:
                todo.append((name, '/dev/' + dev[0], 'libaio'))
        ok1, e1 = self.kernel_login(KMP, f'127.0.0.1:{self.port + 6}', 'default', 15)
        ok2, e2 = self.kernel_login(KMP, f'{self.guest[1]}:{self.port + 7}', 'iser', 15)

        def one_map():
            disks = self.kernel_disks(KMP)
            holders = {h for d in disks for h in os.listdir(f'/sys/block/{d}/holders')}
            return len(disks) == 2 and len(holders) == 1 and all(
                os.listdir(f'/sys/block/{d}/holders') for d in disks) and holders.pop()
        dm = self.wait(one_map, 40)
        check('dm-multipath: one map over the two paths of :kmp (TCP, iSER on siw)', ok1 and ok2 and dm,
              f'{e1} {e2} disks {self.kernel_disks(KMP)}')
        if dm:
            todo.append(('kmp', '/dev/' + dm, 'libaio'))
            self.mp_dev = dm
        url = f'iscsi://127.0.0.1:{self.port + 5}/{PFX}:kmap/0'
        p = subprocess.run([os.path.join(self.build, 'initiator', 'iseradm'), '--initiator-name', self.kinit, 'map', '--daemon', url],
                           capture_output=True, text=True, timeout=90)
        self.map_dev = p.stdout.strip() if p.returncode == 0 else None
        check('iseradm map gives a block device', self.map_dev and os.path.exists(self.map_dev),
              (p.stdout + p.stderr).strip()[-200:])
        if self.map_dev:
            todo.append(('kmap', self.map_dev, 'io_uring'))
        for name, dev, engine in todo:   # together, once every session is up: setup is slow under TCG
            self.fio(name, dev, engine)

    def stop_kernel_clients(self):
        for name, (proc, out) in self.fios.items():
            try:
                rc = proc.wait(self.seconds)
            except subprocess.TimeoutExpired:
                proc.kill()
                rc = 'hung'
            text = open(out, errors='replace').read() if os.path.exists(out) else ''
            io = [l.strip() for l in text.splitlines() if l.strip().startswith(('READ:', 'WRITE:'))]
            check(f'fio verify on {name}: exit 0, no verify failure', rc == 0 and 'verify failed' not in text
                  and 'bad magic' not in text, f'exit {rc}: {text[-800:]}')
            self.log('fio', f'{name}: exit {rc}; ' + '; '.join(io), rc == 0)
        if getattr(self, 'mp_dev', None):
            subprocess.run(['multipath', '-f', self.mp_dev], capture_output=True)
        for iqn, paths in self.disks.items():
            for portal, iface in paths:
                subprocess.run(['iscsiadm', '-m', 'node', '-T', iqn, '-p', portal, '-I', iface, '--logout'],
                               capture_output=True)
        if getattr(self, 'map_dev', None):
            p = subprocess.run([os.path.join(self.build, 'initiator', 'iseradm'), 'unmap', self.map_dev],
                               capture_output=True, text=True, timeout=200)
            check('iseradm unmap', p.returncode == 0, p.stderr.strip()[-200:])

    def watch_gsi(self, after):
        """Say once when Soft-RoCE's QP1 went to error (no connection on rxe0 from then on), and after what."""
        if self.gsi_dead:
            return
        p = subprocess.run(['rdma', 'res', 'show', 'qp', 'link', 'rxe0'], capture_output=True, text=True)
        if any('type GSI' in l and 'state ERR' in l for l in p.stdout.splitlines()):
            self.gsi_dead = True
            self.log('rxe0 QP1', f'in error since the last event ({after}): rxe0 takes no new connection', False)

    def ev_flap(self):
        """Soft-iWARP's link down for 1-3 s.  Not Soft-RoCE's: see tests/chaos/README.md."""
        if not self.guest:
            return self.ev_close()
        down = round(self.rng.uniform(1, 3), 1)
        subprocess.run(['ip', 'link', 'set', 'vmnet_siw', 'down'], check=True)
        time.sleep(down)
        subprocess.run(['ip', 'link', 'set', 'vmnet_siw', 'up'], check=True)
        self.log('link flap', f'vmnet_siw down for {down} s')

    def probe(self):
        c = ic.Conn(self.port)
        st = c.login(PROBE, T1)
        if st:
            c.close()
            raise RuntimeError(f'probe login status {st:#x}')
        return c

    def register_aptpl(self):
        c = self.probe()
        for _ in range(3):   # the first command may meet a unit attention
            st, _ = pr.prout(c, pr.REG_IGN, sark=APTPL_KEY, aptpl=True)
            if st == pr.GOOD:
                break
        c.close()
        return st == pr.GOOD

    def aptpl_key_back(self):
        c = self.probe()
        try:
            for _ in range(3):
                st, data, _ = c.command(bytes([0x5e, 0, 0, 0, 0, 0, 0, 0x20, 0, 0]), edtl=8192, read=True)
                if st == pr.GOOD:
                    n = struct.unpack('>I', data[4:8])[0]
                    keys = [struct.unpack('>Q', data[8 + i:16 + i])[0] for i in range(0, n, 8)]
                    return APTPL_KEY in keys
            return False
        finally:
            c.close()

    # ---- events --------------------------------------------------------------------
    def ev_kill(self):
        pid = self.proc.pid
        self.sample('before SIGKILL')
        self.proc.send_signal(signal.SIGKILL)
        rc = self.proc.wait(10)
        t = time.time()
        up = self.start()
        took = time.time() - t
        back = up and self.aptpl_key_back()
        cfg = json.loads(self.iserctl('config')) if up else {}
        luns = sorted(l['lun'] for t in cfg.get('targets', []) if t['iqn'] == T2 for l in t['tpgs'][0]['luns'])
        same = luns == sorted([0] + self.extra)
        self.log('kill -9', f'pid {pid} (exit {rc}), restarted as {self.proc.pid} (listening after {took:.1f} s): '
                 f'APTPL key {"back" if back else "LOST"}, :aux LUNs {luns}', up and rc == -9 and back and same)

    def ev_close(self):
        rows = [l.split() for l in self.iserctl('sessions').splitlines()[1:] if l.strip()]
        tsihs = [r[0] for r in rows if r and r[0].isdigit()]
        if not tsihs:
            self.log('close session', 'no session to close')
            return
        t = self.rng.choice(tsihs)
        self.iserctl('sessions', 'close', t)
        self.log('close session', f'TSIH {t} (one of {len(tsihs)})')

    def ev_lun(self):
        if self.extra and self.rng.random() < 0.5:
            n = self.extra.pop(self.rng.randrange(len(self.extra)))
            self.iserctl('delete', f'/iscsi/{T2}/tpg1/luns/lun{n}')
            self.iserctl('delete', f'/backstores/x{n}')
            self.log('remove LUN', f':aux LUN {n}')
        elif len(self.extra) < 4:
            n = next(i for i in range(1, 10) if i not in self.extra)
            self.iserctl('create', f'/backstores/x{n}', 'type=file', f'path={self.work}/x{n}.img', 'size=8M')
            self.iserctl('create', f'/iscsi/{T2}/tpg1/luns/lun{n}', f'backstore=x{n}')
            self.extra.append(n)
            self.size[n] = 8
            self.log('add LUN', f':aux LUN {n} (a file of 8 MiB)')
        else:
            return self.ev_resize()
        self.iserctl('save')

    def ev_resize(self):
        if not self.extra:
            return self.ev_lun()
        n = self.rng.choice(self.extra)
        self.size[n] += self.rng.choice([8, 16])   # LUNs only grow
        self.iserctl('set', f'/backstores/x{n}', f'size={self.size[n]}M')
        self.iserctl('save')
        self.log('resize', f'x{n} grown to {self.size[n]} MiB')

    def ev_acl(self):
        path = f'/iscsi/{T1}/tpg1/acls/{STRANGER}'
        if STRANGER in self.iserctl('paths'):
            self.iserctl('delete', path)
            self.log('ACL', f'{STRANGER} removed from :chaos')
        else:
            self.iserctl('create', path)
            self.log('ACL', f'{STRANGER} added to :chaos')
        self.iserctl('save')

    def ev_alua(self):
        state = self.rng.choice(['active_nonoptimized', 'active_optimized'])
        self.iserctl('alua', 'set', T2, '1', state)
        self.log('ALUA', f':aux group 1 {state}')
        if getattr(self, 'mp_dev', None):   # the map's preferred group: standby (I/O moves to path 2) or back
            self.mp_standby = not getattr(self, 'mp_standby', False)
            state = 'standby' if self.mp_standby else 'active_optimized'
            self.iserctl('alua', 'set', KMP, '1', state)
            self.log('ALUA', f':kmp group 1 (the map\'s TCP path) {state}')

    def ev_hostile(self):
        kind = self.rng.choice(['garbage', 'huge login', 'login flood', 'bad lengths'])
        try:
            if kind == 'garbage':
                s = socket.create_connection(('127.0.0.1', self.port), timeout=2)
                s.sendall(bytes(self.rng.getrandbits(8) for _ in range(512)))
                s.close()
            elif kind == 'huge login':
                c = ic.Conn(self.port)
                bhs = bytearray(48)
                bhs[0], bhs[1] = 0x43, 0x87
                bhs[5:8] = (0xFFFFFF).to_bytes(3, 'big')   # a 16 MiB data segment announced
                c.send_raw(bytes(bhs) + b'x' * 4096)
                c.close()
            elif kind == 'login flood':
                socks = [socket.create_connection(('127.0.0.1', self.port + 1), timeout=2) for _ in range(40)]
                for s in socks:
                    s.sendall(b'\x43')
                for s in socks:
                    s.close()
            else:
                c = ic.Conn(self.port + 1)
                if c.login(PROBE, T2) == 0:
                    # WRITE(10) of 8 blocks whose expected length says 1 byte, with 64 KiB of immediate data.
                    bhs = c.scsi_bhs(bytes([0x2a, 0, 0, 0, 0, 0, 0, 0, 8, 0]), 1, write=True, data_len=65536)
                    c.send(bhs, b'\0' * 65536)
                    c.recv()
                c.close()
            self.log('hostile', kind)
        except OSError as e:
            self.log('hostile', f'{kind}: the target closed on us ({e.__class__.__name__})')

    def sample(self, why=''):
        if time.time() - self.started < WARMUP:
            return   # the pools' pages become resident as they are first used: not a baseline yet
        try:
            self.rss.append({'t': round(time.time() - self.t0, 1), 'incarnation': self.incarnation,
                             'heap_kib': self.heap_kib(), 'why': why})
        except (OSError, RuntimeError, StopIteration, ValueError, subprocess.TimeoutExpired):
            pass

    # ---- the run -------------------------------------------------------------------
    def run(self):
        self.write_config()
        up = self.start()
        check('isertd starts', up, self.log_tail())
        if not up:
            return
        check('an APTPL registration is made', self.register_aptpl())
        self.start_clients()
        events = [(self.ev_kill, 1), (self.ev_close, 3), (self.ev_lun, 3), (self.ev_resize, 1),
                  (self.ev_acl, 2), (self.ev_alua, 2), (self.ev_hostile, 3)] + \
            ([(self.ev_flap, 2)] if self.guest else [])
        rest = [e for e, _ in events if e != self.ev_kill]
        first = self.rng.sample(rest, len(rest)) + [self.ev_kill]   # popped from the end: the kill first
        end = time.time() + self.seconds - 5
        next_sample = 0
        while time.time() < end and self.bench.poll() is None:
            time.sleep(self.rng.uniform(0.5, 2.0 if self.guest else 4.0))
            if self.proc.poll() is not None:
                self.unasked.append(self.proc.returncode)
                self.log('isertd died unasked', f'exit {self.proc.returncode}', False)
                self.start()
                continue
            if self.perf.poll() is not None:   # a load client; it does not verify
                self.perf_restarts += 1
                self.perf = subprocess.Popen(self.perf.args, stdout=self.perf_out, stderr=subprocess.STDOUT)
            # Each kind once first, in a seeded order, so that a short run has them all; then by weight.
            f = first.pop() if first else self.rng.choices([e for e, _ in events], [w for _, w in events])[0]
            try:
                f()
            except (RuntimeError, OSError, subprocess.TimeoutExpired, ValueError) as e:
                self.log(f.__name__[3:], f'error: {e}', False)
            if self.guest:
                self.watch_gsi(f.__name__[3:])
            if time.time() >= next_sample:
                self.sample()
                next_sample = time.time() + 2
        try:
            brc = self.bench.wait(self.seconds + 60)
        except subprocess.TimeoutExpired:
            self.bench.kill()
            brc = 'hung'
        if self.guest:
            self.stop_kernel_clients()
        self.perf.send_signal(signal.SIGINT)
        try:
            self.perf.wait(10)
        except subprocess.TimeoutExpired:
            self.perf.kill()
        self.sample('end')
        self.proc.send_signal(signal.SIGTERM)
        try:
            rc = self.proc.wait(30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            rc = 'hung'
        self.finish(brc, rc)

    def finish(self, brc, rc):
        out = open(os.path.join(self.work, 'iserbench.out')).read()
        avg = next((l.split() for l in out.splitlines() if ' avg_' in l), None)
        tail = (f'{float(avg[2]):.0f} I/O per second, {float(avg[3]):.0f} MiB/s, {float(avg[5]):.0f} % reads '
                f'(about {float(avg[3]) * float(avg[5]) / 100 * self.seconds / 1024:.1f} GiB read and checked)'
                if avg and len(avg) > 5 else 'no average line')
        check('iserbench -v: every read checked against what was written, no I/O error (exit 0)',
              brc == 0, f'exit {brc}\n{out[-1500:]}')
        check('isertd stops cleanly on SIGTERM at the end', rc == 0, f'exit {rc}')
        check('no isertd died unasked', not self.unasked, str(self.unasked))
        bad = []
        for i in range(1, self.incarnation + 1):
            text = open(os.path.join(self.work, f'isertd-{i}.log'), errors='replace').read()
            for pat in ('AddressSanitizer', 'LeakSanitizer', 'runtime error:', 'Segmentation', 'Assertion'):
                if pat in text:
                    bad.append(f'isertd-{i}.log: {pat}')
        check('no sanitizer report or crash in any isertd log', not bad, ', '.join(bad))
        check('isertd was killed and restarted at least once, among other events',
              self.incarnation > 1 and len(self.events) > self.incarnation, f'{len(self.events)} events')
        failed = [e for e in self.events if not e['ok']]
        check('every event went as expected (restarts brought back the config and the APTPL key)',
              not failed, json.dumps(failed[:5]))
        growth = {}
        for s in self.rss:
            g = growth.setdefault(s['incarnation'], [s['heap_kib'], s['heap_kib']])
            g[1] = max(g[1], s['heap_kib'])
        worst = max((b - a for a, b in growth.values()), default=0)
        check(f'memory bounded: RSS less pools grew < {HEAP_GROWTH_MIB} MiB within any incarnation '
              f'({len(self.rss)} samples)', len(self.rss) >= 2 and worst < HEAP_GROWTH_MIB * 1024, f'{worst} kB')
        kinds = {}
        for e in self.events:
            kinds[e['event']] = kinds.get(e['event'], 0) + 1
        report = {'seed': self.seed, 'seconds': self.seconds, 'events': self.events, 'rss': self.rss,
                  'restarts': self.incarnation - 1, 'iscsi_perf_restarts': self.perf_restarts,
                  'iserbench_tail': tail, 'isertd_exit': rc, 'iserbench_exit': brc}
        with open(os.path.join(self.work, 'chaos-report.json'), 'w') as f:
            json.dump(report, f, indent=1)
        print(f'chaos: seed {self.seed}, {self.seconds} s, {len(self.events)} events '
              f'({", ".join(f"{k} {v}" for k, v in sorted(kinds.items()))}), {self.incarnation - 1} restarts, '
              f'heap growth at most {worst} kB, iscsi-perf restarted {self.perf_restarts} times; '
              f'report {os.path.join(self.work, "chaos-report.json")}')
        print('iserbench -v: ' + tail)


def main():
    if '--build' not in sys.argv:
        sys.exit(__doc__.split('usage:')[1].split('exit 0')[0].strip().join(['usage: ', '']))
    s = Soak()
    try:
        s.run()
    finally:
        for p in (getattr(s, 'bench', None), getattr(s, 'perf', None), s.proc):
            if p and p.poll() is None:
                p.kill()
    # The work folder is in tmpfs, memory until removed (its RAM LUNs' files, about 130 MB a run):
    # kept when a check failed, for the report and the logs, or when --work named it.
    if checks.failed == 0 and not arg('--work'):
        shutil.rmtree(s.work, ignore_errors=True)
    checks.finish()


if __name__ == '__main__':
    main()
