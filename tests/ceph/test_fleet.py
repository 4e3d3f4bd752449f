#!/usr/bin/env python3
"""Three isertd gateways configured as one fleet (issue 47, docs/cluster.md):
their configuration is one document in the cluster (the RADOS object
isert_config.f1 in pool rbd), every change made through any gateway is
planned on all of them and committed once.  Against a real throw-away Ceph
cluster (run it under tests/ceph/cluster.sh run, which exports CEPH_CONF),
gateways gw-a, gw-b, gw-c with portals 127.0.0.1:PORT, PORT+1, PORT+2, in
this order:

a. iserctl cluster import of the three gateways' files: accepted where they
   agree, refused naming the difference where gw-c's LUN 0 is another image;
b. the document stored with rados put, the three gateways started with
   --cluster rbd/f1: each serves the target (INQUIRY, a READ);
c. a LUN added through each gateway in turn is served through all three
   portals (REPORT LUNS, written through one portal, read through another);
   the answer lists the three gateways, each "applied";
d. two edits racing through two gateways: at least one applied, the other
   (if refused) told the configuration moved; the document holds exactly
   what was applied, served by all three;
e. a change gw-c cannot apply (a portal on an address it does not have):
   refused naming gw-c, the generation unchanged on all three;
f. gw-b killed (-9): a change through gw-a is applied with gw-b "not
   running"; gw-b restarted serves the new generation;
g. gw-c stopped (SIGSTOP): a change at once is refused naming gw-c as not
   answering, and nothing is written; once its watch lapsed the change is
   applied with gw-c "not running"; after SIGCONT it runs the others'
   generation within 60 s;
k. the document written with rados put, no gateway told (as a gateway
   killed between its write and its notification leaves it): each gateway
   applies it by its periodic read, within 30 s (gw-c, fenced in g, cannot
   open the new image and says so in fleet.status);
h. gw-a restarted with a Ceph conf whose monitor cannot be reached: it
   serves the copy of the generation it cached (its LUNs readable), and
   fleet.status says cached;
i. gateway add gw-d (--dry-run: each gateway's plan; then made) and
   remove; gw-c's configuration exported (iserctl cluster export) through gw-a;
   gateway remove gw-c through gw-a: gw-c stops serving the target, saying
   so in its log;
j. gw-c leaves the fleet: restarted with the file it exported, it serves
   the target with the fleet's LUNs, out of the fleet.

usage: test_fleet.py ISERTD ISERCTL [PORT]"""
import json
import os
import re
import shutil
import signal
import struct
import subprocess
import sys
import threading
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), '..', 'integration'))
import iscsi_client as ic  # noqa: E402
import checks  # noqa: E402
from admin_rpc import Rpc, port_open, stop_isertd  # noqa: E402
from checks import check, wait_for  # noqa: E402

ISERTD, ISERCTL = sys.argv[1], sys.argv[2]
PORT = int(sys.argv[3]) if len(sys.argv) > 3 else 3556
CONF = os.environ['CEPH_CONF']
FLEET = 'rbd/f1'
OBJECT = 'isert_config.f1'
T = 'iqn.2026-11.org.isert:fleet'
INI = 'iqn.2026-11.org.isert:fleet-host'
GWS = ['gw-a', 'gw-b', 'gw-c']
TAG = {gw: i + 1 for i, gw in enumerate(GWS)}
PORTAL = {gw: PORT + i for i, gw in enumerate(GWS)}
GOOD = 0
EX_UNREACHABLE = 3  # iserctl's exit status when the socket does not answer
UNIT_ATTENTION = 6


def rbd(*args):
    return subprocess.run(['rbd', '--conf', CONF] + list(args), capture_output=True, text=True, timeout=120)


def gateway_file(work, gw, image='fleet-disk'):
    """Gateway gw's own configuration file, as before the fleet: target T with LUN 0 over rbd image
    'fleet-disk' (backstore 'disk'), its portal group TAG[gw] on its portal, and three ALUA groups, each
    one gateway's (its own portal group in "tpgs", the others' relative ports in "remote_ports")."""
    tag = TAG[gw]
    groups = [dict({'id': TAG[g], 'state': 'active_optimized'},
                   **({'tpgs': [TAG[g]]} if g == gw else {'remote_ports': [TAG[g]]})) for g in GWS]
    cfg = {'global': {'reactors': 2},
           'backstores': [{'name': 'disk', 'type': 'rbd', 'pool': 'rbd', 'image': image, 'conf': CONF}],
           'targets': [{'iqn': T, 'tpgs': [{'tag': tag, 'demo_mode': True,
                                            'portals': [{'ip': '127.0.0.1', 'port': PORTAL[gw]}],
                                            'luns': [{'lun': 0, 'backstore': 'disk'}]}],
                        'alua': {'mode': 'both', 'groups': groups}}]}
    path = os.path.join(work, '%s%s.json' % (gw, '' if image == 'fleet-disk' else '-' + image))
    with open(path, 'w') as f:
        json.dump(cfg, f, indent=1)
    return path


class Gateways:
    """The fleet's isertd processes, by gateway name; each with its socket, state folder and log in work."""

    def __init__(self, work):
        self.work = work
        self.procs = {}
        self.old = []

    def sock(self, gw):
        return os.path.join(self.work, gw + '.sock')

    def log(self, gw):
        path = os.path.join(self.work, gw + '.log')
        return open(path, errors='replace').read() if os.path.exists(path) else ''

    def start(self, gw, conf=CONF, seconds=60, config=None):
        """isertd --cluster rbd/f1 --gateway gw (with config: isertd -c config, out of the fleet): once its portal
        answers (or it exited), the process."""
        state = os.path.join(self.work, gw)
        os.makedirs(state, exist_ok=True)
        if gw in self.procs:
            self.old.append(self.procs[gw])
        log = open(os.path.join(self.work, gw + '.log'), 'a')
        how = ['-c', config] if config else ['--cluster', FLEET, '--gateway', gw, '--ceph-conf', conf]
        p = subprocess.Popen([ISERTD] + how + ['--state-dir', state, '-a', self.sock(gw), '-r', '2'], stdout=log,
                             stderr=subprocess.STDOUT)
        log.close()
        self.procs[gw] = p
        wait_for(lambda: port_open(PORTAL[gw]) or p.poll() is not None, seconds)
        return p

    def running(self, gw):
        p = self.procs.get(gw)
        return p is not None and p.poll() is None

    def rpc(self, gw, method, params=None):
        """The method's result on gw, or {'error': ...} (also when the socket does not answer)."""
        try:
            r = Rpc(self.sock(gw)).call(method, params)
        except (OSError, ValueError) as e:
            return {'error': {'message': str(e)}}
        return r.get('result', r) if r else {'error': {'message': 'no answer'}}

    def generation(self, gw):
        return self.rpc(gw, 'fleet.status').get('generation')

    def iserctl(self, gw, *args, timeout=120):
        r = subprocess.run([ISERCTL, '-s', self.sock(gw)] + list(args), capture_output=True, text=True,
                           timeout=timeout)
        return r.returncode, r.stdout, r.stderr

    def stop_all(self):
        for p in list(self.procs.values()) + self.old:
            if p.poll() is None:
                p.send_signal(signal.SIGCONT)
                p.kill()
                p.wait()


def session(port, lun=0):
    c = ic.Conn(port, timeout=30)
    st = c.login(INI, T)
    if st != 0:
        c.close()
        raise RuntimeError('login to port %d: status 0x%04x' % (port, st))
    drain_ua(c, lun)
    return c


def drain_ua(c, lun=0):
    for _ in range(10):
        st, _, sense = c.command(b'\0' * 6, lun=lun)
        if not (st == 2 and len(sense) > 2 and sense[2] & 0x0F == UNIT_ATTENTION):
            return st
    return None


def report_luns(port):
    """The LUNs REPORT LUNS lists through port (a new session), or None when it cannot be asked."""
    try:
        c = session(port)
    except (OSError, RuntimeError, AssertionError):
        return None
    try:
        st, d, _ = c.command(bytes([0xA0, 0, 0, 0, 0, 0]) + struct.pack('>I', 4096) + b'\0\0', 4096, read=True)
        if st != GOOD:
            return None
        n = struct.unpack('>I', d[:4])[0] // 8
        return sorted(((d[8 + 8 * i] & 0x3F) << 8) | d[9 + 8 * i] for i in range(n))
    finally:
        c.close()


def inquiry_read(port, lun=0):
    """Standard INQUIRY and a READ(10) of block 0 through port: (INQUIRY's status, READ's status)."""
    c = session(port, lun)
    try:
        st_i, d, _ = c.command(bytes([0x12, 0, 0, 0, 96, 0]), 96, read=True, lun=lun)
        st_r, _, _ = c.command(bytes([0x28, 0, 0, 0, 0, 0, 0, 0, 1, 0]), 512, read=True, lun=lun)
        return st_i, st_r
    finally:
        c.close()


def read_sense(port, lun):
    """A READ(10) of block 0 through port: (status, (sense key, ASC, ASCQ) or None)."""
    try:
        c = session(port, lun)
    except (OSError, RuntimeError, AssertionError) as e:
        return repr(e), None
    try:
        st, _, sense = c.command(bytes([0x28, 0, 0, 0, 0, 0, 0, 0, 1, 0]), 512, read=True, lun=lun)
        return st, ((sense[2] & 0x0F, sense[12], sense[13]) if st != GOOD and len(sense) > 13 else None)
    finally:
        c.close()


def write_block(port, lun, lba, data):
    c = session(port, lun)
    try:
        return c.command(bytes([0x2A, 0x08]) + struct.pack('>I', lba) + b'\0\0\1\0', 512, write_data=data,
                         lun=lun)[0]
    finally:
        c.close()


def read_block(port, lun, lba):
    c = session(port, lun)
    try:
        st, d, _ = c.command(bytes([0x28, 0x08]) + struct.pack('>I', lba) + b'\0\0\1\0', 512, read=True, lun=lun)
        return d if st == GOOD else None
    finally:
        c.close()


def fleet_answer(out):
    """The "fleet" member of an edit's --json answer: {gateway name: its entry}."""
    try:
        return {g['name']: g for g in json.loads(out)['fleet']['gateways']}
    except (ValueError, KeyError, TypeError):
        return {}


def doc_luns(g, gw='gw-a'):
    """The LUN numbers of T in the fleet's document (fleet.document through gw), or None."""
    d = g.rpc(gw, 'fleet.document')
    try:
        t = [t for t in d['document']['targets'] if t['iqn'] == T][0]
        return sorted(lun['lun'] for lun in t['tpg']['luns'])
    except (KeyError, IndexError, TypeError):
        return None


def add_lun(g, gw, lun, image):
    """Through gw: an rbd image, its backstore, then LUN lun of gw's portal group: (rc, out, err) of the LUN's
    edit (--json), or of the first step that failed."""
    r = rbd('create', '--size', '16M', 'rbd/' + image)
    if r.returncode:
        return r.returncode, r.stdout, r.stderr
    rc, out, err = g.iserctl(gw, 'create', '/backstores/' + image, 'type=rbd', 'pool=rbd', 'image=' + image,
                             'conf=' + CONF)
    if rc:
        return rc, out, err
    return g.iserctl(gw, '--json', 'create', '/iscsi/%s/tpg%d/luns/lun%d' % (T, TAG[gw], lun),
                     'backstore=' + image)


def scenario_import(work):
    """a: the document from three files that agree; refused, naming the difference, where gw-c differs."""
    files = [gateway_file(work, gw) for gw in GWS]
    doc = os.path.join(work, 'doc.json')
    args = [a for gw, f in zip(GWS, files) for a in ('--gateway', '%s=%s' % (gw, f))]
    r = subprocess.run([ISERCTL, 'cluster', 'import'] + args + ['-o', doc], capture_output=True, text=True,
                       timeout=60)
    try:
        d = json.load(open(doc))
        names = [x['name'] for x in d['gateways']]
        mode = os.stat(doc).st_mode & 0o777
    except (OSError, ValueError, KeyError, TypeError):
        d, names, mode = None, None, None
    check('a. iserctl cluster import of the three files that agree: a document with gw-a, gw-b, gw-c (0600)',
          r.returncode == 0 and names == GWS and mode == 0o600, (r.returncode, r.stderr, names, oct(mode or 0)))
    other = gateway_file(work, 'gw-c', image='fleet-other')
    r2 = subprocess.run([ISERCTL, 'cluster', 'import'] + args[:4] + ['--gateway', 'gw-c=' + other],
                        capture_output=True, text=True, timeout=60)
    check('a. ... and where gw-c\'s LUN 0 is another image: refused (exit 1), naming the image, both values and '
          'gw-c', r2.returncode == 1 and 'image' in r2.stderr and 'fleet-other' in r2.stderr and
          'gw-c' in r2.stderr and not r2.stdout, (r2.returncode, r2.stdout[:200], r2.stderr))
    print('     ' + r2.stderr.strip())
    return doc


def scenario_start(g, doc):
    """b: the document in the cluster; the three gateways join and each serves T."""
    r = subprocess.run(['rados', '--conf', CONF, '-p', 'rbd', 'put', OBJECT, doc], capture_output=True, text=True,
                       timeout=60)
    check('b. rados put of the document as %s' % OBJECT, r.returncode == 0, r.stderr)
    # What a gateway refuses to join: a name the document lacks; a document past FLEET_DOC_MAX (4 MiB).
    big = doc + '.big'
    with open(doc) as f, open(big, 'w') as o:
        d = json.load(f)
        d['global'] = dict(d.get('global') or {}, pad=' ' * (4 << 20))
        json.dump(d, o)
    subprocess.run(['rados', '--conf', CONF, '-p', 'rbd', 'put', 'isert_config.big', big], capture_output=True,
                   timeout=60)
    for name, cluster, want in (('gw-x', FLEET, "the fleet's document has no gateway 'gw-x'"),
                                ('gw-a', 'rbd/big', 'larger than the 4194304 bytes')):
        r = subprocess.run([ISERTD, '--cluster', cluster, '--gateway', name, '--ceph-conf', CONF, '--state-dir',
                            'none', '--admin-socket', 'none'], capture_output=True, text=True, timeout=60)
        check('b. a gateway does not join %s as %s: %s' % (cluster, name, want), r.returncode == 1 and want in r.stderr,
              (r.returncode, r.stderr[-600:]))
    for gw in GWS:
        g.start(gw)
    check('b. the three gateways start with --cluster %s' % FLEET, all(g.running(gw) for gw in GWS),
          {gw: g.procs[gw].poll() for gw in GWS})
    for gw in GWS:
        try:
            got = inquiry_read(PORTAL[gw])
        except (OSError, RuntimeError, AssertionError) as e:
            got = e
        check('b. %s serves %s: INQUIRY and a READ of LUN 0 through its portal %d' % (gw, T, PORTAL[gw]),
              got == (GOOD, GOOD), got)
    gens = {gw: g.generation(gw) for gw in GWS}
    check('b. fleet.status: the three at one generation', len(set(gens.values())) == 1 and None not in
          gens.values(), gens)


def served_everywhere(g, lun, through):
    """LUN lun listed by REPORT LUNS through every running gateway's portal, and a block written through
    gateway `through` read back through the next one."""
    ports = [PORTAL[gw] for gw in GWS if g.running(gw)]
    listed = wait_for(lambda: all(lun in (report_luns(p) or []) for p in ports), 15)
    other = GWS[(GWS.index(through) + 1) % len(GWS)]
    data = os.urandom(512)
    try:
        wrote = write_block(PORTAL[through], lun, 5, data)
        back = read_block(PORTAL[other], lun, 5)
    except (OSError, RuntimeError, AssertionError) as e:
        wrote, back = e, None
    return listed, wrote == GOOD and back == data, (listed, {p: report_luns(p) for p in ports}, wrote,
                                                     back is not None and back == data)


def scenario_add(g):
    """c: a LUN added through each gateway in turn, served by all three."""
    for i, gw in enumerate(GWS):
        lun = i + 1
        rc, out, err = add_lun(g, gw, lun, 'fleet-c%d' % lun)
        ans = fleet_answer(out)
        check('c. LUN %d (a new rbd image) added through %s: its answer lists gw-a, gw-b, gw-c, each "applied"'
              % (lun, gw), rc == 0 and sorted(ans) == GWS and all(a.get('result') == 'applied'
                                                                  for a in ans.values()), (rc, out[-1500:], err))
        listed, data, detail = served_everywhere(g, lun, gw)
        check('c. LUN %d in REPORT LUNS through the three portals; written through %s\'s portal, the same data read '
              'through the next one\'s' % (lun, gw), listed and data, detail)


def scenario_race(g):
    """d: two edits through gw-a and gw-b at one moment."""
    images = {'gw-a': (4, 'fleet-d4'), 'gw-b': (5, 'fleet-d5')}
    for gw, (lun, image) in images.items():
        r = rbd('create', '--size', '16M', 'rbd/' + image)
        rc, out, err = g.iserctl(gw, 'create', '/backstores/' + image, 'type=rbd', 'pool=rbd', 'image=' + image,
                                 'conf=' + CONF)
        check('d. backstore %s made through %s' % (image, gw), r.returncode == 0 and rc == 0, (r.stderr, out, err))
    before = doc_luns(g)
    res = {}
    start = threading.Barrier(2)

    def edit(gw, lun, image):
        start.wait()
        res[gw] = g.iserctl(gw, '--json', 'create', '/iscsi/%s/tpg%d/luns/lun%d' % (T, TAG[gw], lun),
                            'backstore=' + image)
    ts = [threading.Thread(target=edit, args=(gw, lun, image)) for gw, (lun, image) in images.items()]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    won = sorted(images[gw][0] for gw, (rc, _, _) in res.items() if rc == 0)
    lost = {gw: err for gw, (rc, _, err) in res.items() if rc != 0}
    print('     applied: LUN %s; refused: %s' % (won, lost or 'none'))
    check('d. two LUNs added at once through gw-a and gw-b: at least one applied; one refused says the '
          'fleet\'s configuration moved', won and all('configuration moved' in e for e in lost.values()), res)
    luns = doc_luns(g)
    check('d. fleet.document holds exactly what was applied', before is not None and luns == sorted(before + won),
          (before, won, luns))
    ports = [PORTAL[gw] for gw in GWS]
    ok = wait_for(lambda: all(report_luns(p) == luns for p in ports), 15)
    check('d. and the three gateways serve exactly that (REPORT LUNS through each portal)', luns and ok,
          {p: report_luns(p) for p in ports})
    return luns


def scenario_refused(g):
    """e: a portal gw-c cannot open, through gw-c: refused naming gw-c, nothing changed."""
    gens = {gw: g.generation(gw) for gw in GWS}
    luns = doc_luns(g)
    rc, out, err = g.iserctl('gw-c', 'create', '/iscsi/%s/tpg%d/portals/192.0.2.1:3260' % (T, TAG['gw-c']))
    print('     ' + err.strip())
    check('e. a portal 192.0.2.1:3260 for gw-c (an address it does not have), through gw-c: refused, naming gw-c',
          rc not in (0, EX_UNREACHABLE) and 'gw-c' in err, (rc, out, err))
    after = {gw: g.generation(gw) for gw in GWS}
    check('e. nothing changed: the generation on all three as before, the document\'s LUNs too',
          after == gens and None not in after.values() and doc_luns(g) == luns, (gens, after))
    portals = g.rpc('gw-a', 'fleet.export', {'gateway': 'gw-c'})
    check('e. gw-c\'s configuration (fleet.export) has no such portal',
          'config' in portals and '192.0.2.1' not in json.dumps(portals),
          portals)


def scenario_killed(g):
    """f: gw-b killed; a change through gw-a; gw-b restarted catches up."""
    g.procs['gw-b'].kill()
    g.procs['gw-b'].wait()

    def b_gone():
        # Not running (it does not answer), and its watch lapsed (no client left that watches and does not
        # answer): until then a change is refused (docs/fleet.md, "A gateway that does not answer").
        st = g.rpc('gw-a', 'fleet.status')
        return 'not_answering' not in st and any(x.get('name') == 'gw-b' and x.get('running') is False
                                                 for x in st.get('gateways') or [])
    check('f. gw-b killed (-9): gw-a\'s fleet.status says gw-b is not running, its watch lapsed, within 60 s',
          wait_for(b_gone, 60), g.rpc('gw-a', 'fleet.status'))
    rc, out, err = add_lun(g, 'gw-a', 6, 'fleet-f6')
    ans = fleet_answer(out)
    check('f. LUN 6 added through gw-a: applied, gw-b "not running"', rc == 0 and
          ans.get('gw-b', {}).get('result') == 'not running' and ans.get('gw-a', {}).get('result') == 'applied',
          (rc, out[-1500:], err))
    g.start('gw-b')
    check('f. gw-b restarts', g.running('gw-b'), g.log('gw-b')[-800:])
    same = wait_for(lambda: g.generation('gw-b') is not None and g.generation('gw-b') == g.generation('gw-a'), 30)
    listed = report_luns(PORTAL['gw-b'])
    try:
        got = inquiry_read(PORTAL['gw-b'], 6)
    except (OSError, RuntimeError, AssertionError) as e:
        got = e
    check('f. restarted gw-b runs gw-a\'s generation and serves LUN 6 through its portal (REPORT LUNS, INQUIRY)',
          same and 6 in (listed or []) and isinstance(got, tuple) and got[0] == GOOD,
          (g.generation('gw-a'), g.generation('gw-b'), listed, got))
    # Killed, gw-b was fenced, and the gateway that fenced it made its ALUA group unavailable; a gateway that
    # starts takes the states there are (docs/cluster.md, "ALUA states"): its reads wait for an admin.
    sense = read_sense(PORTAL['gw-b'], 6)
    print('     a READ of LUN 6 through restarted gw-b: status %s, sense %s' % sense)
    rc, out, err = g.iserctl('gw-b', 'alua', 'set', T, str(TAG['gw-b']), 'active_optimized')
    check('f. iserctl alua set %s %d active_optimized through gw-b (its group, unavailable since it was fenced)'
          % (T, TAG['gw-b']), rc == 0, (rc, out, err))
    data = os.urandom(512)
    try:
        wrote = write_block(PORTAL['gw-a'], 6, 9, data)
        back = read_block(PORTAL['gw-b'], 6, 9)
    except (OSError, RuntimeError, AssertionError) as e:
        wrote, back = e, None
    check('f. then LUN 6 written through gw-a\'s portal reads back the same through gw-b\'s',
          wrote == GOOD and back == data, (wrote, back is not None, read_sense(PORTAL['gw-b'], 6)))


def scenario_stopped(g):
    """g: gw-c stopped through a change, then continued: it catches up within 60 s."""
    r = rbd('create', '--size', '16M', 'rbd/fleet-g7')
    rc, out, err = g.iserctl('gw-a', 'create', '/backstores/fleet-g7', 'type=rbd', 'pool=rbd', 'image=fleet-g7',
                             'conf=' + CONF)
    check('g. backstore fleet-g7 made through gw-a', r.returncode == 0 and rc == 0, (r.stderr, out, err))
    g.procs['gw-c'].send_signal(signal.SIGSTOP)
    # At once: gw-c's watch lives (the OSD drops it after osd_client_watch_timeout, 10 s in cluster.sh's
    # cluster), so the plan waits FLEET_ANSWER_S (5 s) for gw-c's answer and the change is refused, naming it.
    t0 = time.time()
    rc, out, err = g.iserctl('gw-a', '--json', 'create', '/iscsi/%s/tpg%d/luns/lun7' % (T, TAG['gw-a']),
                             'backstore=fleet-g7')
    print('     gw-c stopped, the change through gw-a at once: %s after %.1f s: %s' %
          ('applied' if rc == 0 else 'refused', time.time() - t0, err.strip()))
    check('g. a change through gw-a right after gw-c stopped: refused, naming gw-c as not answering; nothing written',
          rc not in (0, EX_UNREACHABLE) and 'gw-c (client.' in err and 'did not answer' in err and
          7 not in doc_luns(g), (rc, out[-1500:], err))
    # Once the watch lapsed the fleet goes on without it.
    t0 = time.time()
    ans, rc = {}, None
    while time.time() - t0 < 40:
        rc, out, err = g.iserctl('gw-a', '--json', 'create', '/iscsi/%s/tpg%d/luns/lun7' % (T, TAG['gw-a']),
                                 'backstore=fleet-g7')
        ans = fleet_answer(out)
        if rc == 0:
            break
        time.sleep(1)
    print('     the same change applied %.1f s later: gw-c %s' % (time.time() - t0, ans.get('gw-c', {}).get('result')))
    check('g. once gw-c\'s watch lapsed, the change is applied with gw-c "not running"',
          rc == 0 and ans.get('gw-a', {}).get('result') == 'applied' and
          ans.get('gw-c', {}).get('result') == 'not running', (rc, out[-1500:], err))
    g.procs['gw-c'].send_signal(signal.SIGCONT)
    caught = wait_for(lambda: g.generation('gw-c') is not None and g.generation('gw-c') == g.generation('gw-a'), 60,
                      step=0.5)
    st = g.rpc('gw-c', 'fleet.status')
    seen = [x for x in g.rpc('gw-a', 'fleet.status').get('gateways') or [] if x.get('name') == 'gw-c']
    print('     gw-c after SIGCONT: %s; fenced (as gw-a sees it): %s' %
          (json.dumps({k: st.get(k) for k in ('generation', 'reachable', 'last_error')}),
           seen[0].get('fenced') if seen else '?'))
    check('g. after SIGCONT, within 60 s gw-c runs the others\' generation', caught,
          (g.generation('gw-a'), st))


def scenario_unannounced(g, work):
    """k: the document written with no notification (as by a gateway killed between its write and its
    notification, or by rados put): every gateway applies it by its periodic read (FLEET_RECHECK_S, 30 s)."""
    d = g.rpc('gw-a', 'fleet.document')['document']
    r = rbd('create', '--size', '16M', 'rbd/fleet-k8')
    d['backstores'].append({'name': 'fleet-k8', 'type': 'rbd', 'pool': 'rbd', 'image': 'fleet-k8', 'conf': CONF})
    [t for t in d['targets'] if t['iqn'] == T][0]['tpg']['luns'].append({'lun': 8, 'backstore': 'fleet-k8'})
    path = os.path.join(work, 'doc-k.json')
    with open(path, 'w') as f:
        json.dump(d, f)
    put = subprocess.run(['rados', '--conf', CONF, '-p', 'rbd', 'put', 'isert_config.f1', path],
                         capture_output=True, text=True, timeout=60)
    check('k. a document with LUN 8 written with rados put (no gateway told)', r.returncode == 0 and
          put.returncode == 0, (r.stderr, put.stderr))
    t0 = time.time()
    # gw-c was fenced in g (its Ceph client for the images is blocklisted): it cannot open the new image, and
    # says so where the fleet asks it, instead of serving.
    def applied():
        c = [x for x in g.rpc('gw-a', 'fleet.status').get('gateways') or [] if x.get('name') == 'gw-c']
        c_said = bool(c) and c[0].get('ok') is False and 'fleet-k8' in (c[0].get('error') or '')
        return all(8 in (report_luns(PORTAL[gw]) or []) for gw in ('gw-a', 'gw-b')) and \
            (c_said or 8 in (report_luns(PORTAL['gw-c']) or []))
    done = wait_for(applied, 45, step=1)
    c = [x for x in g.rpc('gw-a', 'fleet.status').get('gateways') or [] if x.get('name') == 'gw-c']
    print('     after %.1f s: LUN 8 through %s; gw-c (fenced in g): %s' %
          (time.time() - t0, [gw for gw in ('gw-a', 'gw-b', 'gw-c') if 8 in (report_luns(PORTAL[gw]) or [])],
           c[0].get('error') if c else '?'))
    check('k. each gateway read it by its periodic read (30 s): gw-a and gw-b serve LUN 8, the fenced gw-c says '
          'why it cannot', done, {gw: report_luns(PORTAL[gw]) for gw in ('gw-a', 'gw-b', 'gw-c')})


def scenario_cached(g, work):
    """h: gw-a restarted with the cluster unreachable serves its cached copy."""
    gen = g.generation('gw-a')
    luns = report_luns(PORTAL['gw-a'])
    rc = stop_isertd(g.procs['gw-a'])
    check('h. gw-a stops cleanly', rc == 0, (rc, g.log('gw-a')[-1500:]))
    cached = os.path.join(work, 'gw-a', 'fleet-f1.json')
    mode = os.stat(cached).st_mode & 0o777 if os.path.exists(cached) else None
    check('h. gw-a kept the applied document in its state folder, 0600 (fleet-f1.json)', mode == 0o600,
          (mode, os.listdir(os.path.join(work, 'gw-a'))))
    down = os.path.join(work, 'ceph-down.conf')
    with open(CONF) as f, open(down, 'w') as o:
        o.write(re.sub(r'(?m)^mon_host = .*$', 'mon_host = 127.0.0.1:1', f.read()))
    t0 = time.time()
    g.start('gw-a', conf=down, seconds=120)
    print('     gw-a with an unreachable monitor served after %.1f s' % (time.time() - t0))
    st = g.rpc('gw-a', 'fleet.status')
    check('h. restarted with a monitor that does not answer (mon_host 127.0.0.1:1), gw-a serves: fleet.status '
          'cached, the generation it had', g.running('gw-a') and st.get('cached') is True and
          st.get('generation') == gen, (st, g.log('gw-a')[-800:]))
    listed = report_luns(PORTAL['gw-a'])
    got = {}
    for lun in luns or []:
        try:
            got[lun] = inquiry_read(PORTAL['gw-a'], lun)
        except (OSError, RuntimeError, AssertionError) as e:
            got[lun] = e
    check('h. its LUNs (%s) listed and readable through its portal' % luns,
          luns and listed == luns and all(v == (GOOD, GOOD) for v in got.values()),
          (listed, got, read_sense(PORTAL['gw-a'], 0)))
    rc, out, err = g.iserctl('gw-a', 'cluster', 'status')
    print('\n'.join('     ' + line for line in out.splitlines()))
    check('h. iserctl cluster status says it serves the cached copy', rc == 0 and 'SERVING THE CACHED COPY' in out,
          (rc, out, err))
    # Back with the real monitor for the last scenario's edit.
    stop_isertd(g.procs['gw-a'])
    g.start('gw-a')
    check('h. gw-a restarted with the cluster reachable: not cached',
          wait_for(lambda: g.rpc('gw-a', 'fleet.status').get('cached') is False, 30), g.rpc('gw-a', 'fleet.status'))


def t_served(port):
    """Whether T is served through port: listed by SendTargets and a login succeeds."""
    try:
        c = ic.Conn(port, timeout=10)
        try:
            if c.login(INI, discovery=True) != 0 or not any(T in x for x in c.send_targets()):
                return False
        finally:
            c.close()
        c = ic.Conn(port, timeout=10)
        try:
            return c.login(INI, T) == 0
        finally:
            c.close()
    except (OSError, RuntimeError, AssertionError, ConnectionError):
        return False


def doc_names(g, gw):
    d = g.rpc(gw, 'fleet.document')
    return [x.get('name') for x in (d.get('document') or {}).get('gateways', [])]


def scenario_members(g):
    """i: gateway add (planned, then made) and remove of a gateway that never runs."""
    gen = g.generation('gw-a')
    rc, out, err = g.iserctl('gw-a', '--dry-run', 'gateway', 'add', 'gw-d')
    print('\n'.join('     ' + line for line in (out + err).splitlines()))
    check('i. iserctl --dry-run gateway add gw-d through gw-a: each running gateway\'s plan, nothing done',
          rc == 0 and 'fleet plan' in out and 'nothing done' in out and 'gw-d' not in doc_names(g, 'gw-b') and
          g.generation('gw-a') == gen, (rc, out, err))
    rc, out, err = g.iserctl('gw-a', 'gateway', 'add', 'gw-d')
    check('i. iserctl gateway add gw-d through gw-a: the document names it', rc == 0 and
          doc_names(g, 'gw-b') == GWS + ['gw-d'], (rc, out, err, doc_names(g, 'gw-b')))
    rc, out, err = g.iserctl('gw-b', 'gateway', 'list')
    row = [line.split() for line in out.splitlines() if line.startswith('gw-d ')]
    check('i. iserctl gateway list through gw-b: gw-d, not running', rc == 0 and row and row[0][1] == 'no',
          (rc, out, err))
    rc, out, err = g.iserctl('gw-b', 'gateway', 'remove', 'gw-d')
    check('i. iserctl gateway remove gw-d through gw-b: gone from the document', rc == 0 and
          doc_names(g, 'gw-a') == GWS, (rc, out, err, doc_names(g, 'gw-a')))


def scenario_remove(g, work):
    """i: gateway remove gw-c through gw-a, its configuration exported first to leave with."""
    scenario_members(g)
    left = os.path.join(work, 'gw-c-left.json')
    rc, out, err = g.iserctl('gw-a', 'cluster', 'export', '--gateway', 'gw-c', '-o', left)
    try:
        cfg = json.load(open(left))
        tpgs = [(tg['tag'], [p['port'] for p in tg['portals']]) for t in cfg['targets'] if t['iqn'] == T
                for tg in t['tpgs']]
        mode = os.stat(left).st_mode & 0o777
    except (OSError, ValueError, KeyError, TypeError) as e:
        tpgs, mode = e, None
    check('i. iserctl cluster export --gateway gw-c through gw-a: a file (0600) with gw-c\'s portal group %d on '
          'port %d' % (TAG['gw-c'], PORTAL['gw-c']), rc == 0 and mode == 0o600 and
          tpgs == [(TAG['gw-c'], [PORTAL['gw-c']])], (rc, err, tpgs, oct(mode or 0)))
    before = t_served(PORTAL['gw-c'])
    rc, out, err = g.iserctl('gw-a', 'gateway', 'remove', 'gw-c')
    print('\n'.join('     ' + line for line in (out + err).splitlines()))
    check('i. iserctl gateway remove gw-c through gw-a: done', rc == 0, (rc, out, err))
    gone = wait_for(lambda: not t_served(PORTAL['gw-c']), 30)
    check('i. gw-c served %s before, and no longer does (SendTargets or login through its portal)' % T,
          before and gone, (before, gone))
    check('i. gw-c\'s log says it was removed from the fleet', wait_for(lambda: 'removed' in g.log('gw-c'), 10),
          g.log('gw-c')[-800:])
    check('i. gw-a and gw-b still serve it', t_served(PORTAL['gw-a']) and t_served(PORTAL['gw-b']))
    names = doc_names(g, 'gw-b')
    check('i. the document names gw-a and gw-b only', names == ['gw-a', 'gw-b'], names)
    rc, out, err = g.iserctl('gw-b', 'gateway', 'list')
    print('\n'.join('     ' + line for line in out.splitlines()))
    check('i. iserctl gateway list through gw-b: gw-a and gw-b', rc == 0 and 'gw-a' in out and 'gw-b' in out and
          'gw-c' not in out, (rc, out, err))
    return left


def scenario_left(g, left):
    """j: gw-c, out of the fleet, started with the file it exported (docs/fleet.md: leaving the fleet)."""
    luns = doc_luns(g, 'gw-b')
    rc = stop_isertd(g.procs['gw-c'])
    check('j. removed gw-c stops cleanly', rc == 0, (rc, g.log('gw-c')[-800:]))
    g.start('gw-c', config=left)
    check('j. gw-c starts with isertd -c and the exported file', g.running('gw-c'), g.log('gw-c')[-800:])
    listed = report_luns(PORTAL['gw-c'])
    check('j. it serves %s through its portal again, with the fleet\'s LUNs (%s)' % (T, luns),
          t_served(PORTAL['gw-c']) and luns and listed == luns, (listed, luns))
    rc, out, err = g.iserctl('gw-c', 'cluster', 'status')
    check('j. iserctl cluster status on it: exit 4, not in a fleet', rc == 4 and 'not in a fleet' in err,
          (rc, out, err))


def main():
    work = checks.workdir('isert-fleet-')
    g = Gateways(work)
    doc = {}
    steps = [
        ('a', lambda: doc.update(path=scenario_import(work))), ('b', lambda: scenario_start(g, doc.get('path'))),
        ('c', lambda: scenario_add(g)), ('d', lambda: scenario_race(g)), ('e', lambda: scenario_refused(g)),
        ('f', lambda: scenario_killed(g)), ('g', lambda: scenario_stopped(g)), ('k', lambda: scenario_unannounced(g, work)),
        ('h', lambda: scenario_cached(g, work)),
        ('i', lambda: doc.update(left=scenario_remove(g, work))), ('j', lambda: scenario_left(g, doc.get('left'))),
    ]
    try:
        r = rbd('create', '--size', '16M', 'rbd/fleet-disk')
        check('rbd create fleet-disk (LUN 0)', r.returncode == 0, r.stderr)
        for name, step in steps:
            if name == 'c' and not any(g.running(gw) for gw in GWS):
                check('c-i. not run: no gateway of the fleet started', False)
                break
            # A scenario that breaks (an exception) is one failed check; the next ones still run.
            try:
                step()
            except Exception as e:  # noqa: BLE001
                check('%s. ran to its end' % name, False, repr(e))
    finally:
        g.stop_all()
        if checks.failed:
            for gw in GWS:
                print('---- %s.log' % gw)
                print(g.log(gw)[-4000:])
        else:
            shutil.rmtree(work, ignore_errors=True)
    checks.finish()


if __name__ == '__main__':
    main()
