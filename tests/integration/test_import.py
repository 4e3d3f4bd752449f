#!/usr/bin/env python3
"""iserctl import lio|tgt (docs/admin.md, "Migrating from LIO and tgt").

The fixtures of tests/import/ (LIO's saveconfig.json written by rtslib-fb in
the test guest, tgt's own example targets.conf and its two tape library examples, a small targets.conf of ours)
are imported and the written configurations compared with exact
expectations; isertd --check takes each; isertd serves the imported LIO and
tgt configurations (portals moved to this test's ports, devices to files)
and libiscsi's iscsi-ls/iscsi-inq log in: ACLs, mapped LUN numbers, one-way,
mutual, demo and discovery CHAP.  The items not carried are reported where
they were and the exit status says so (6); no message shows a secret.
--dry-run and --apply against a running isertd.  Hostile inputs (truncated
JSON, wrong types, huge strings, deep nesting, a 17 MiB file, include
loops, long lines) are refused with exit 1 and a message naming the field.

usage: test_import.py ISERTD ISERCTL FIXTURES [PORT]   (ports PORT..PORT+9)"""
import json
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import checks  # noqa: E402
from admin_rpc import start_isertd, stop_isertd  # noqa: E402
from checks import check  # noqa: E402

ISERTD, ISERCTL, FIX = sys.argv[1], sys.argv[2], sys.argv[3]
PORT = int(sys.argv[4]) if len(sys.argv) > 4 else 3570
VM = 'iqn.2026-11.org.isert.vm:'
T = 'iqn.2026-11.org.isert.test:'
INIT1, INIT2 = VM + 'init1', VM + 'init2'
# Every secret in the fixtures: none may appear in a message.
SECRETS = ['vm-init1-secret', 'vm-target-secret', 'demo-secret-0123', 'init-secret-0123', 'tgt-secret-4567',
           'disc-secret-0123', 'secretpass12', 'secretpass23', 'secretpassA']


def run(*args, timeout=60):
    p = subprocess.run(list(args), capture_output=True, text=True, timeout=timeout, errors='replace')
    return p.returncode, p.stdout, p.stderr


def imp(*args, sock=None):
    return run(ISERCTL, *(['-s', sock] if sock else []), 'import', *args)


def no_secret(name, text):
    leaked = [s for s in SECRETS if s in text]
    check(f'{name}: no CHAP secret in the messages', not leaked, str(leaked))


def tpg_of(cfg, iqn, tag=1):
    t = next(t for t in cfg['targets'] if t['iqn'] == iqn)
    return next(g for g in t['tpgs'] if g['tag'] == tag)


def luns(g):
    return {lu['lun']: lu['backstore'] for lu in g['luns']}


def valid(name, cfg, work):
    path = os.path.join(work, name + '.json')
    with open(path, 'w') as f:
        json.dump(cfg, f)
    rc, out, err = run(ISERTD, '--check', '--config', path)
    check(f'{name}: isertd --check takes it', rc == 0, out + err)
    return path


def inq(url, initiator, tries=1):
    rc = 1
    for _ in range(tries):
        rc, out, err = run('iscsi-inq', '-i', initiator, url, timeout=20)
        if rc == 0:
            break
        time.sleep(0.2)
    return rc


def serve(work, name, cfg, *args):
    proc, sock = start_isertd(ISERTD, work, valid(name, cfg, work), *args)
    return proc


def wait_port(port):
    for _ in range(100):
        if f':{port:04X} ' in open('/proc/net/tcp').read():
            return True
        time.sleep(0.05)
    return False


def lio(work):
    fixture = os.path.join(FIX, 'lio-saveconfig.json')
    src = json.load(open(fixture))
    ti = {t['wwn']: i for i, t in enumerate(src['targets'])}
    x = ti[VM + 'extra']
    tags = {g['tag']: k for k, g in enumerate(src['targets'][x]['tpgs'])}
    out_path = os.path.join(work, 'lio.json')
    rc, out, err = imp('lio', fixture, '-o', out_path)
    print(err, end='')
    check('lio: exit 6 (written, items not carried)', rc == 6, f'exit {rc}')
    check('lio: the file is mode 0600 (it holds CHAP secrets)', os.stat(out_path).st_mode & 0o777 == 0o600)
    cfg = json.load(open(out_path))
    rc2, out2, _ = imp('lio', fixture)
    check('lio: stdout has the same document', rc2 == 6 and json.loads(out2) == cfg)
    bs = {b['name']: b for b in cfg['backstores']}
    check('lio: backstores', sorted(bs) == ['file0', 'nvme0n1', 'ram0', 'ram1', 'ram2', 'ram3', 'ramx'], sorted(bs))
    check('lio: fileio -> file, size, write_back -> write_cache, emulate_tpu -> thin, wwn -> serial',
          {k: v for k, v in bs['file0'].items() if k != 'serial'} ==
          {'name': 'file0', 'type': 'file', 'path': '/tmp/lio-file0.img', 'size': 33554432, 'thin': True,
           'write_cache': True} and len(bs['file0'].get('serial', '')) == 36, bs['file0'])
    check('lio: block -> block on its device, thin (emulate_tpu)',
          bs['nvme0n1'] == {'name': 'nvme0n1', 'type': 'block', 'path': '/dev/nvme0n1', 'thin': True}, bs['nvme0n1'])
    check('lio: ramdisk -> ram with its size', bs['ram0'] == {'name': 'ram0', 'type': 'ram', 'size': 67108864}
          and bs['ramx']['size'] == 16777216, bs['ram0'])
    g = tpg_of(cfg, VM + 'open')
    check('lio: :open LUNs 0 and 1', luns(g) == {0: 'ram0', 1: 'ram1'}, g)
    check('lio: :open ACL, mapped LUNs kept, no CHAP', len(g['acls']) == 1 and g['acls'][0]['initiator'] == INIT1
          and 'chap' not in g['acls'][0]
          and sorted((m['mapped_lun'], m['tpg_lun']) for m in g['acls'][0]['mapped_luns']) == [(0, 0), (1, 1)])
    c = tpg_of(cfg, VM + 'chap')['acls'][0].get('chap', {})
    check('lio: :chap ACL CHAP user, no mutual', c.get('userid') == 'vm-init1' and 'mutual_userid' not in c)
    c = tpg_of(cfg, VM + 'mutual')['acls'][0].get('chap', {})
    check('lio: :mutual ACL CHAP and mutual user', c.get('userid') == 'vm-init1' and c.get('mutual_userid') == 'vm-target')
    check('lio: :nvme LUN 0 on the block backstore', luns(tpg_of(cfg, VM + 'nvme')) == {0: 'nvme0n1'})
    g1, g2 = tpg_of(cfg, VM + 'extra', 1), tpg_of(cfg, VM + 'extra', 2)
    check('lio: :extra tpg1 demo mode with demo CHAP, not write-protected',
          g1.get('demo_mode') is True and g1.get('demo_chap', {}).get('userid') == 'demo-user'
          and 'demo_write_protect' not in g1, g1)
    check('lio: :extra tpg1 iSER portal and TCP portal',
          sorted((p['ip'], p['port'], p.get('iser', False)) for p in g1['portals']) ==
          [('10.91.1.1', 3260, True), ('127.0.0.1', 3261, False)], g1['portals'])
    check('lio: :extra tpg1 LUNs', luns(g1) == {0: 'file0', 1: 'ramx'})
    check('lio: :extra tpg2 ACL mapped LUN 5 -> TPG LUN 0, write-protected',
          g2['acls'] == [{'initiator': INIT2, 'mapped_luns': [{'mapped_lun': 5, 'tpg_lun': 0, 'write_protect': True}]}],
          g2['acls'])
    check('lio: :extra tpg2 params: changed ones carried (default_cmdsn_depth -> QueueDepth)',
          g2.get('params') == {'ImmediateData': False, 'MaxRecvDataSegmentLength': 65536, 'QueueDepth': 32},
          g2.get('params'))
    check('lio: LIO defaults are not carried (isertd\'s params stay)', 'params' not in g1 and 'params' not in
          tpg_of(cfg, VM + 'open'))
    alua = next(t for t in cfg['targets'] if t['iqn'] == VM + 'extra').get('alua')
    check('lio: :extra ALUA: gw_a (id 7, active/non-optimized, preferred) holds tpg1, the default group tpg2',
          alua == {'mode': 'both', 'transition_time': 10, 'groups': [
              {'id': 1, 'state': 'active_optimized', 'tpgs': [2]},
              {'id': 7, 'state': 'active_nonoptimized', 'preferred': True, 'tpgs': [1]}]}, alua)
    check('lio: targets without ALUA groups get none', 'alua' not in next(
        t for t in cfg['targets'] if t['iqn'] == VM + 'open'))
    p2, p1 = f'targets[{x}].tpgs[{tags[2]}]', f'targets[{x}].tpgs[{tags[1]}]'
    for where in (f'{p2}.attributes.tpg_enabled_sendtargets: not carried: 0',
                  f'{p2}.parameters.DataPDUInOrder: not carried: No',
                  f'{p2}.node_acls[0].attributes.nopin_timeout: not carried: 10',
                  f'{p1}.luns[{[lu["index"] for lu in src["targets"][x]["tpgs"][tags[1]]["luns"]].index(1)}]'
                  '.alua_tg_pt_gp_name: not carried'):
        check(f'lio: reported: {where}', 'iserctl import: ' + where in err, err)
    check('lio: the count of items not carried', 'items not carried (listed above)' in err)
    no_secret('lio', err)

    # Served: devices become files, portals this test's ports (tpg1 of :extra PORT+1, tpg2 PORT+2), no iSER here.
    for b in cfg['backstores']:
        if b['type'] in ('file', 'block'):
            b['type'], b['path'], b['size'] = 'file', os.path.join(work, b['name'] + '.img'), 8 << 20
    for t in cfg['targets']:
        for g in t['tpgs']:
            g['portals'] = [{'ip': '127.0.0.1', 'port': PORT + (g['tag'] if t['iqn'] == VM + 'extra' else 0)}]
    proc = serve(work, 'lio-served', cfg)
    check('lio: isertd serves it', wait_port(PORT) and wait_port(PORT + 2))
    h = f'127.0.0.1:{PORT}'
    rc, out, err = run('iscsi-ls', '-i', INIT1, f'iscsi://{h}')
    check('lio: iscsi-ls lists :open, :chap, :mutual, :nvme',
          all(VM + n in out for n in ('open', 'chap', 'mutual', 'nvme')), out + err)
    rc, out, err = run('iscsi-ls', '-i', INIT1, '-s', f'iscsi://{h}')
    check('lio: iscsi-ls -s: :open has LUNs 0 and 1', 'Lun:0' in out and 'Lun:1' in out, out + err)
    check('lio: :open LUN 1 for init1', inq(f'iscsi://{h}/{VM}open/1', INIT1, 3) == 0)
    check('lio: :open refused to another initiator', inq(f'iscsi://{h}/{VM}open/0', VM + 'stranger') != 0)
    check('lio: :chap with CHAP', inq(f'iscsi://vm-init1%vm-init1-secret@{h}/{VM}chap/0', INIT1) == 0)
    check('lio: :chap without CHAP refused', inq(f'iscsi://{h}/{VM}chap/0', INIT1) != 0)
    check('lio: :mutual with mutual CHAP', inq(f'iscsi://vm-init1%vm-init1-secret@{h}/{VM}mutual/0'
                                              '?target_user=vm-target&target_password=vm-target-secret', INIT1) == 0)
    check('lio: :mutual with a wrong target secret refused',
          inq(f'iscsi://vm-init1%vm-init1-secret@{h}/{VM}mutual/0'
              '?target_user=vm-target&target_password=wrong-secret-0000', INIT1) != 0)
    check('lio: :extra demo mode with demo CHAP, any initiator',
          inq(f'iscsi://demo-user%demo-secret-0123@127.0.0.1:{PORT + 1}/{VM}extra/0', VM + 'anyone') == 0)
    check('lio: :extra tpg2 mapped LUN 5 for init2', inq(f'iscsi://127.0.0.1:{PORT + 2}/{VM}extra/5', INIT2) == 0)
    rc = stop_isertd(proc)
    check('lio: isertd exits 0', rc == 0, f'exit {rc}')


def tgt_example(work):
    rc, out, err = imp('tgt', os.path.join(FIX, 'tgt-targets.conf.example'))
    check('tgt example: exit 6', rc == 6, f'exit {rc}')
    cfg = json.loads(out)
    valid('tgt-example', cfg, work)
    ex = 'iqn.2008-09.com.example:server.target'
    check('tgt example: 9 targets (target4\'s two blocks merged)', len(cfg['targets']) == 9, len(cfg['targets']))
    check('tgt example: target1 LUN 1 (tgt\'s LUN 0 is its controller), demo mode',
          luns(tpg_of(cfg, ex + '1')) == {1: 'somedevice'} and tpg_of(cfg, ex + '1').get('demo_mode') is True)
    g = tpg_of(cfg, ex + '2')
    check('tgt example: target2 incominguser -> demo CHAP', g.get('demo_chap', {}).get('userid') == 'someuser', g)
    check('tgt example: target3 LUNs 1-3 in order', luns(tpg_of(cfg, ex + '3')) ==
          {1: 'somedevice1', 2: 'somedevice2', 3: 'somedevice3'})
    bs = {b['name']: b for b in cfg['backstores']}
    check('tgt example: write-cache off carried, on by default',
          bs['somedevice1']['write_cache'] is False and bs['somedevice']['write_cache'] is True)
    check('tgt example: target5 LUNs as tgt-admin numbers them (explicit 2 and 15, the cd dropped, then 3)',
          luns(tpg_of(cfg, ex + '5')) == {2: 'sda', 3: 'sdb1', 15: 'sdd1'}, luns(tpg_of(cfg, ex + '5')))
    check('tgt example: scsi_sn -> serial', bs['sdb1'].get('serial') == 'SERIAL' and bs['sdd1'].get('serial') == 'multipath-10')
    g = tpg_of(cfg, ex + '5')
    check('tgt example: target5 (addresses only) admits no initiator', not g.get('demo_mode') and g['acls'] == [])
    check('tgt example: target6 lun 10', luns(tpg_of(cfg, ex + '6')) == {10: 'somedevice'})
    for where in ('targets.conf.example:103: not carried: device-type cd',
                  'targets.conf.example:153: not carried: initiator-address 192.168.100.1',
                  'targets.conf.example:179: not carried: incominguser user2',
                  'targets.conf.example:182: not carried: outgoinguser userA',
                  'targets.conf.example:57: not carried: vendor_id MyCompany Inc.'):
        check(f'tgt example: reported: {where}', where in err, err)
    no_secret('tgt example', err)


def tgt_vtl(work):
    """tgt's two virtual tape library examples: isertd serves disks only, so
    every tape drive and changer is reported with its line and none becomes
    a LUN; the target itself is carried, empty."""
    for name, drives, changer_line in (('L700', (29, 39, 49), 59), ('MSL2024', (26,), 40)):
        f = f'targets.conf.vtl.{name}'
        rc, out, err = imp('tgt', os.path.join(FIX, 'tgt-' + f))
        check(f'tgt {name}: exit 6', rc == 6, f'exit {rc}')
        cfg = json.loads(out)
        valid(f'tgt-{name}', cfg, work)
        check(f'tgt {name}: the target carried with no LUN and no backstore',
              [t['iqn'] for t in cfg['targets']] == ['iqn.2008-09.com.example:server.tape'] and
              luns(tpg_of(cfg, 'iqn.2008-09.com.example:server.tape')) == {} and cfg['backstores'] == [], cfg)
        for ln in drives:
            check(f'tgt {name}: the tape drive at line {ln} reported',
                  f'{f}:{ln}: not carried: device-type tape: isertd serves disks only' in err, err)
        check(f'tgt {name}: the changer reported',
              f'{f}:{changer_line}: not carried: device-type changer: isertd serves disks only' in err, err)


def tgt_own(work):
    text = open(os.path.join(FIX, 'tgt-own.conf')).read().replace('@DIR@', work)
    conf = os.path.join(work, 'targets.conf')
    open(conf, 'w').write(text)
    open(os.path.join(work, 'demo-luns.conf'), 'w').write(f'backing-store {work}/disk3.img\n')
    for i in range(4):
        with open(os.path.join(work, f'disk{i}.img'), 'wb') as f:
            f.truncate(8 << 20)
    rc, out, err = imp('tgt', conf)
    print(err, end='')
    check('tgt own: exit 6', rc == 6, f'exit {rc}')
    cfg = json.loads(out)
    bs = {b['name']: b for b in cfg['backstores']}
    check('tgt own: backstores are files, serial and write-cache carried',
          bs['disk0.img'] == {'name': 'disk0.img', 'type': 'file', 'path': f'{work}/disk0.img', 'write_cache': False,
                          'serial': 'ISER-DISK-0'} and bs['disk1.img']['write_cache'] is True, bs)
    g = tpg_of(cfg, T + 'iser')
    check('tgt own: driver iser -> an iSER portal', g['portals'] == [{'ip': '0.0.0.0', 'port': 3260, 'iser': True}])
    check('tgt own: LUN 3 explicit, then LUN 1', luns(g) == {1: 'disk1.img', 3: 'disk0.img'}, luns(g))
    a = g['acls'][0] if g['acls'] else {}
    check('tgt own: initiator-name -> ACL with CHAP and mutual CHAP, every LUN mapped at its number',
          a.get('initiator') == T + 'init1' and a.get('chap', {}).get('userid') == 'init-user'
          and a['chap'].get('mutual_userid') == 'tgt-user'
          and sorted((m['mapped_lun'], m['tpg_lun']) for m in a['mapped_luns']) == [(1, 1), (3, 3)], a)
    check('tgt own: MaxRecvDataSegmentLength carried', g.get('params') == {'MaxRecvDataSegmentLength': 65536})
    g = tpg_of(cfg, T + 'open')
    check('tgt own: a secret isertd refuses: the target admits no initiator', g['acls'] == [] and
          not g.get('demo_mode'), g)
    check('tgt own: readonly 1 -> read-only LUN', g['luns'] == [{'lun': 1, 'backstore': 'disk2.img', 'read_only': True}])
    check('tgt own: included LUN, demo mode', luns(tpg_of(cfg, T + 'demo')) == {1: 'disk3.img'}
          and tpg_of(cfg, T + 'demo').get('demo_mode') is True)
    check('tgt own: discovery CHAP', cfg.get('discovery', {}).get('auth_required') is True
          and cfg['discovery']['chap']['userid'] == 'disc-user')
    for where in ('targets.conf:19: not carried: vendor_id ACME', 'targets.conf:25: not carried: incominguser short-user',
                  'targets.conf:26: not carried: initiator-address 10.0.0.1'):
        check(f'tgt own: reported: {where}', where in err, err)
    no_secret('tgt own', err)

    p = PORT + 3
    proc = serve(work, 'tgt-served', cfg, '-p', f'127.0.0.1:{p}')
    check('tgt own: isertd serves it (portals moved to TCP 127.0.0.1 with -p)', wait_port(p))
    rc, out, e = run('iscsi-ls', '-i', T + 'init1', f'iscsi://disc-user%disc-secret-0123@127.0.0.1:{p}')
    check('tgt own: discovery with CHAP lists the targets', T + 'iser' in out and T + 'demo' in out, out + e)
    rc, out, e = run('iscsi-ls', '-i', T + 'init1', f'iscsi://127.0.0.1:{p}')
    check('tgt own: discovery without CHAP refused', T + 'iser' not in out)
    url = f'iscsi://init-user%init-secret-0123@127.0.0.1:{p}/{T}iser/3?target_user=tgt-user&target_password=tgt-secret-4567'
    check('tgt own: LUN 3 with CHAP and mutual CHAP', inq(url, T + 'init1', 3) == 0)
    check('tgt own: a wrong CHAP secret refused',
          inq(f'iscsi://init-user%wrong-secret-000@127.0.0.1:{p}/{T}iser/3', T + 'init1') != 0)
    check('tgt own: the demo target, any initiator', inq(f'iscsi://127.0.0.1:{p}/{T}demo/1', T + 'x') == 0)
    check('tgt own: the locked target refuses init2', inq(f'iscsi://127.0.0.1:{p}/{T}open/1', T + 'init2') != 0)
    rc = stop_isertd(proc)
    check('tgt own: isertd exits 0', rc == 0, f'exit {rc}')


def apply(work):
    base = os.path.join(work, 'base.json')
    json.dump({'backstores': [], 'targets': []}, open(base, 'w'))
    proc, sock = start_isertd(ISERTD, work, base, '-r', '1')
    # A saveconfig.json of two of the fixture's targets on this test's port (the fixture's own is 3260).
    src = json.load(open(os.path.join(FIX, 'lio-saveconfig.json')))
    src['targets'] = [t for t in src['targets'] if t['wwn'] in (VM + 'open', VM + 'chap')]
    for t in src['targets']:
        t['tpgs'][0]['portals'] = [{'ip_address': '127.0.0.1', 'port': PORT + 4, 'iser': False, 'offload': False}]
    src['storage_objects'] = [s for s in src['storage_objects'] if s['plugin'] == 'ramdisk']
    small = os.path.join(work, 'small.json')
    json.dump(src, open(small, 'w'))
    rc, out, err = imp('lio', small, '--dry-run', sock=sock)
    print(out, end='')
    check('apply: --dry-run prints the plan', rc == 0 and 'nothing done (dry run)' in out
          and f'/iscsi/{VM}open' in out.replace('targets', '/iscsi'), f'exit {rc} {out} {err}')
    rc, cur, _ = run(ISERCTL, '-s', sock, 'config')
    check('apply: --dry-run changed nothing', rc == 0 and json.loads(cur)['targets'] == [])
    rc, out, err = imp('lio', small, '--apply', sock=sock)
    print(out, end='')
    check('apply: --apply: the plan, then done', rc == 0 and 'planned, nothing done (dry run)' in out
          and 'import: done' in out, f'exit {rc} {out} {err}')
    no_secret('apply', out + err)
    rc, cur, _ = run(ISERCTL, '-s', sock, 'config')
    check('apply: the running configuration has both targets',
          sorted(t['iqn'] for t in json.loads(cur)['targets']) == [VM + 'chap', VM + 'open'])
    check('apply: :open serves', wait_port(PORT + 4) and inq(f'iscsi://127.0.0.1:{PORT + 4}/{VM}open/0', INIT1, 3) == 0)
    # The plan shows values from the file: a new alias with CSI (U+009B) is printed escaped.
    src['targets'][0]['tpgs'][0].setdefault('parameters', {})['TargetAlias'] = 'A\x9b2JB'
    hostile_alias = os.path.join(work, 'alias.json')
    json.dump(src, open(hostile_alias, 'w'))
    rc, out, err = imp('lio', hostile_alias, '--dry-run', sock=sock)
    check('apply: --dry-run of a C1 alias: the plan sets it, escaped', rc == 0 and 'alias = "A\\u009b2JB"' in out
          and not controls(out + err), f'exit {rc} {out!r} {err!r}')
    rc, out, err = imp('lio', small, '--apply', sock=os.path.join(work, 'nosuch.sock'))
    check('apply: isertd not reachable: exit 3', rc == 3, f'exit {rc}')
    rc = stop_isertd(proc)
    check('apply: isertd exits 0', rc == 0, f'exit {rc}')


def refused(name, kind, path, want):
    rc, out, err = imp(kind, path)
    check(f'hostile: {name}: exit 1, "{want}"', rc == 1 and want in err and not out, f'exit {rc} {err[:400]}')
    check(f'hostile: {name}: a short message', len(err) < 1000, len(err))


def hostile(work):
    fixture = open(os.path.join(FIX, 'lio-saveconfig.json')).read()
    src = json.loads(fixture)

    def lio_file(name, text):
        path = os.path.join(work, name)
        with open(path, 'w') as f:
            f.write(text)
        return path

    refused('truncated JSON', 'lio', lio_file('trunc.json', fixture[:len(fixture) // 2]), 'the document ends early')
    bad = json.loads(fixture)
    bad['targets'][0]['tpgs'][0]['tag'] = 'x'
    refused('tag a string', 'lio', lio_file('tag.json', json.dumps(bad)), 'targets[0].tpgs[0].tag: expected an integer, got a string')
    bad = json.loads(fixture)
    bad['targets'][1]['tpgs'][0]['node_acls'][0]['mapped_luns'][0]['index'] = [1]
    refused('index an array', 'lio', lio_file('idx.json', json.dumps(bad)),
            'targets[1].tpgs[0].node_acls[0].mapped_luns[0].index: expected an integer')
    refused('storage_objects an integer', 'lio', lio_file('so.json', '{"storage_objects": 5}'),
            'storage_objects: expected an array, got an integer')
    bad = json.loads(fixture)
    bad['targets'][0]['tpgs'][0]['portals'][0]['ip_address'] = None
    refused('ip_address null', 'lio', lio_file('ip.json', json.dumps(bad)), 'ip_address: expected a string, got null')
    bad = json.loads(fixture)
    del bad['storage_objects'][0]['plugin']
    refused('plugin missing', 'lio', lio_file('plugin.json', json.dumps(bad)), 'storage_objects[0].plugin: missing')
    bad = json.loads(fixture)
    bad['targets'][0]['wwn'] = 'iqn.2026-11.org.x:' + 'a' * (8 << 20)
    refused('an 8 MiB target name', 'lio', lio_file('huge.json', json.dumps(bad)), 'targets[0].wwn: longer than 223 bytes')
    refused('JSON nested 100000 deep', 'lio', lio_file('deep.json', '[' * 100000), 'not JSON')
    refused('a NUL byte', 'lio', lio_file('nul.json', '{"targets": []}\0'), 'NUL')
    refused('not an object', 'lio', lio_file('arr.json', '[]'), 'expected a JSON object')
    big = lio_file('big.json', '{"targets": []' + ' ' * (17 << 20) + '}')
    refused('a 17 MiB saveconfig.json', 'lio', big, 'larger than 16 MiB')
    # A huge storage object name is shortened, and the result still loads.
    bad = json.loads(fixture)
    so = next(s for s in bad['storage_objects'] if s['name'] == 'ram0')
    so['name'] = 'r' * (1 << 20)
    for t in bad['targets']:
        for g in t['tpgs']:
            for lu in g['luns']:
                if lu['storage_object'] == '/backstores/ramdisk/ram0':
                    lu['storage_object'] = '/backstores/ramdisk/' + so['name']
    rc, out, err = imp('lio', lio_file('longname.json', json.dumps(bad)))
    check('hostile: a 1 MiB storage object name: written, its name shortened, a short message',
          rc == 6 and len(err) < 5000 and any(len(b['name']) <= 64 and b['name'].startswith('rrr')
                                               for b in json.loads(out)['backstores']), f'exit {rc}')
    valid('longname', json.loads(out), work)
    # Names alike in their first 250 characters: each LUN keeps its own storage object (a cut key once made them one).
    long = 'n' * 250
    bad = {'storage_objects': [{'name': long + 'one', 'plugin': 'rd_mcp', 'size': 1 << 20},
                               {'name': long + 'two', 'plugin': 'rd_mcp', 'size': 2 << 20}],
           'targets': [{'wwn': T + 'long', 'fabric': 'iscsi', 'tpgs': [{'tag': 1, 'portals': [], 'node_acls': [],
                        'luns': [{'index': i, 'storage_object': '/backstores/rd_mcp/' + long + n}
                                 for i, n in enumerate(('one', 'two'))]}]}]}
    rc, out, err = imp('lio', lio_file('alike.json', json.dumps(bad)))
    cfg = json.loads(out) if rc in (0, 6) else {}
    sizes = {b['name']: b['size'] for b in cfg.get('backstores', [])}
    got = {lu['lun']: sizes.get(lu['backstore']) for lu in cfg['targets'][0]['tpgs'][0]['luns']} if cfg else {}
    check('hostile: two storage objects named alike for 250 characters: each LUN on its own', got == {0: 1 << 20, 1: 2 << 20},
          f'exit {rc} {got} {err[-300:]}')

    def tgt_file(name, text):
        return lio_file(name, text)

    tgt_file('loop.conf', 'include loop.conf\n')
    refused('tgt: a file including itself', 'tgt', os.path.join(work, 'loop.conf'), 'included more than 8 levels deep')
    tgt_file('a.conf', 'include b.conf\n')
    tgt_file('b.conf', 'include a.conf\n')
    refused('tgt: two files including each other', 'tgt', os.path.join(work, 'a.conf'), 'an include loop?')
    refused('tgt: a 5000-byte line', 'tgt', tgt_file('long.conf', '# ' + 'x' * 5000 + '\n'),
            'long.conf:1: line longer than 4096 bytes')
    refused('tgt: a 17 MiB file', 'tgt', tgt_file('big.conf', ('#' * 80 + '\n') * ((17 << 20) // 81 + 1)),
            'larger than 16 MiB')
    refused('tgt: <target> not closed', 'tgt', tgt_file('open.conf', '<target iqn.2026-11.org.x:a>\n'), 'not closed')
    refused('tgt: </target> closing nothing', 'tgt', tgt_file('close.conf', '</target>\n'), 'close.conf:1: </target> closes no open block')
    refused('tgt: a block tgt-admin does not read', 'tgt', tgt_file('blk.conf', '<frob x>\n</frob>\n'), 'blk.conf:1: <frob x>')
    refused('tgt: no such file', 'tgt', os.path.join(work, 'nosuch.conf'), 'cannot read')
    # A last line of just CR once made the reader loop for ever (found by fuzz_import).
    for name, text in (('cr.conf', '\r'), ('cr-end.conf', '<target iqn.2026-11.org.x:cr>\n</target>\n\r')):
        try:
            rc, out, err = imp('tgt', tgt_file(name, text))
            check(f'hostile: tgt: {name!r} ({text!r}) ends', rc in (0, 6), (rc, err))
        except subprocess.TimeoutExpired:
            check(f'hostile: tgt: {name!r} ({text!r}) ends', False, 'iserctl import hung')
    # More stores than LUN numbers: the one past 16383 once took LUN 16384, a write past the numbers' table.
    # Tapes (none a backstore: isertd takes at most 4096, see bounds()), each still taking its number.
    many = tgt_file('many.conf', '<target iqn.2026-11.org.x:many>\n' +
                    ''.join(f'backing-store /d/{i}\n' for i in range(16384)) + 'device-type tape\n</target>\n')
    try:
        rc, out, err = imp('tgt', many)
        check('hostile: tgt: 16384 LUNs in a target: the last in tgt-admin\'s order not carried',
              'many.conf:10001: not carried: /d/9999: no LUN number left (1-16383 are taken)' in err, err[-400:])
    except subprocess.TimeoutExpired:
        check('hostile: tgt: 16384 LUNs in a target: the last in tgt-admin\'s order not carried', False, 'over 60 s')
    rc, out, err = imp('tgt', tgt_file('esc.conf', '<target iqn.2026-11.org.x:a>\nvendor_id \x1b[31mred\n</target>\n'))
    check('hostile: tgt: an escape sequence is refused, naming the line, and not printed raw',
          rc == 1 and 'esc.conf:2: a control character (0x1b' in err and '\x1b' not in err, repr(err))
    rc, out, err = run(ISERCTL, 'import', 'nfs', 'x')
    check('usage: import nfs: exit 2', rc == 2)


def measured(*args, mem=1 << 30):
    """iserctl ARGS held to mem bytes (the plain build: of address space; ASan reserves terabytes of it, so there
    its own RSS watch aborts instead): (exit status, stderr, the child's own peak RSS in bytes, from wait4)."""
    env = dict(os.environ)
    asan = b'libasan' in open(ISERCTL, 'rb').read()
    if asan:
        env['ASAN_OPTIONS'] = env.get('ASAN_OPTIONS', '') + f':hard_rss_limit_mb={mem >> 20}'

    def limit():
        if not asan:
            resource.setrlimit(resource.RLIMIT_AS, (mem, mem))

    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        p = subprocess.Popen([ISERCTL, *args], stdout=out, stderr=err, env=env, preexec_fn=limit)
        _, status, ru = os.wait4(p.pid, 0)
        p.returncode = os.waitstatus_to_exitcode(status)
        err.seek(0)
        return p.returncode, err.read().decode(errors='replace'), ru.ru_maxrss << 10


def bounds(work):
    """What an import builds stays within what isertd's loader takes (target/config/config_int.h), and the import
    stops at the line that passes a bound, before building past it: tgt's rules multiply (each initiator-name
    maps every LUN of its target), so a small targets.conf once grew iserctl by gigabytes."""
    def conf(name, lines):
        path = os.path.join(work, name)
        open(path, 'w').write(''.join(x + '\n' for x in lines))
        return path

    def bounded(name, path, want, peak=200 << 20):
        rc, err, rss = measured('import', 'tgt', path)
        check(f'bounds: {name}: exit 1, "{want}"', rc == 1 and want in err, f'exit {rc} {err[-400:]!r}')
        check(f'bounds: {name}: peak RSS {rss >> 20} MiB, under {peak >> 20} MiB', rss < peak)

    # 4096 stores (as many backstores as isertd takes) and 4096 initiator-names (as many ACLs): 16.7 million mapped
    # LUNs in a 280 KB file.  The ACLs pass 16 MiB as written (-o, isertd's own save), the most isertd reads, at the
    # k-th name: json.dumps(indent=2) writes what json-c's pretty form does.
    def acls_text(name, n):
        return len(json.dumps({'targets': [{'iqn': '', 'tpgs': [{'tag': 1, 'acls': [
            {'initiator': name, 'mapped_luns': [{'mapped_lun': i, 'tpg_lun': i} for i in range(1, 4097)]}] * n}]}]},
            indent=2))
    acl = acls_text('', 2) - acls_text('', 1) - len(',\n') - 12  # one ACL, without the next one's indent
    names = [f'{T}i{i}' for i in range(1, 4097)]
    k = next(i for i in range(1, 4097) if sum(acl + len(x) for x in names[:i]) > 16 << 20)
    path = conf('wide.conf', [f'<target {T}wide>'] + [f'backing-store /wide/d{i:04}' for i in range(4096)] +
                [f'initiator-name {x}' for x in names] + ['</target>'])
    bounded('4096 LUNs x 4096 initiator-names', path,
            f'wide.conf:{4097 + k}: initiator-name {T}i{k}: with its ACL (mapping the 4096 LUNs of {T}wide, as each '
            'initiator-name does) the ACLs pass 16 MiB as written, the most isertd reads: refused')
    # Each bound of the loader, passed by one: refused at the line that passes it, not by the loader afterwards.
    names = [f'initiator-name {T}i{i}' for i in range(1, 4098)]
    rc, err, _ = measured('import', 'tgt', conf('acls-4096.conf', [f'<target {T}acl>', 'backing-store /d/0'] +
                                                 names[:4096] + ['</target>']))
    check('bounds: 4096 initiator-names of a target: carried', rc == 0, f'exit {rc} {err[-400:]!r}')
    bounded('4097 initiator-names of a target',
            conf('acls.conf', [f'<target {T}acl>', 'backing-store /d/0'] + names + ['</target>']),
            f'acls.conf:4099: initiator-name {T}i4097: the 4097th initiator of {T}acl: isertd takes at most 4096 ACLs '
            'in a portal group: refused')
    bounded('4097 backstores', conf('stores.conf', [f'<target {T}st>'] + [f'backing-store /d/{i:04}'
                                                                            for i in range(4097)] + ['</target>']),
            'stores.conf:4098: /d/4096: the 4097th backstore: isertd takes at most 4096: refused')
    bounded('1025 targets', conf('targets.conf', [x for i in range(1025) for x in (f'<target {T}t{i}>', '</target>')]),
            f'targets.conf:2049: {T}t1024: the 1025th target: isertd takes at most 1024: refused')
    # Every count within isertd's bounds, and the compact text the loader was given too (16.54 MB), but not the file
    # -o writes (17.05 MB, pretty-printed, as isertd saves its own): once written, and isertd could not read it.
    out = os.path.join(work, 'rbd.json')
    rc, err, _ = measured('import', 'tgt', conf('rbd.conf', [f'<target {T}rbd>', 'bs-type rbd',
                                                            f'bsopts conf=/{"c" * 3890};id=admin'] +
                                                 [f'backing-store img{i:04}' for i in range(4096)] + ['</target>']),
                          '-o', out)
    check('bounds: 4096 rbd backstores of 3.9 KB each: refused, as the file isertd would not read, and not written',
          rc == 1 and 'rbd.conf: the configuration made of it is 17046828 bytes as written, and isertd reads at most '
          '16 MiB: refused' in err and not os.path.exists(out), f'exit {rc} {err[-400:]!r}')


def controls(text):
    """The characters of text a terminal takes as controls, but the line ends: C0, DEL and C1."""
    return sorted({c for c in text if c != '\n' and (ord(c) < 0x20 or 0x7f <= ord(c) < 0xa0)})


def terminal(work):
    """Names and values from the file are shown escaped (\\xNN) in every message and on stdout: a saveconfig.json
    is ASCII, but json-c decodes its \\u001b to ESC, and UTF-8 may hold C1 controls (U+009B is CSI)."""
    esc, csi = '\x1b', '\x9b'
    src = {'storage_objects': [{'name': 'r0', 'plugin': 'rd_mcp', 'size': 1 << 20, esc + '[31mso-key': 1,
                                'attributes': {csi + '2Jattr': 5}}],
           'targets': [{'wwn': T + 'esc', 'fabric': 'iscsi', esc + ']0;title\x07': 1,
                        'tpgs': [{'tag': 1, 'parameters': {'TargetAlias': 'A' + csi + 'B', esc + 'P': 'x'},
                                  'portals': [], 'luns': [], 'node_acls': [], 'x\ny': 1}]}],
           'fabric_modules': [], esc + 'c': 1}
    path = os.path.join(work, 'esc-keys.json')
    json.dump(src, open(path, 'w'))
    rc, out, err = imp('lio', path)
    check('terminal: lio: exit 6', rc == 6, f'exit {rc} {err!r}')
    check('terminal: lio: no control character in the messages', not controls(err), repr(err))
    for shown in ('storage_objects[0].\\x1b[31mso-key: not carried: unknown key',
                  'storage_objects[0].attributes.\\xc2\\x9b2Jattr: not carried',
                  f'targets[0].\\x1b]0;title\\x07: not carried', 'targets[0].tpgs[0].x\\x0ay: not carried',
                  'iserctl import: \\x1bc: not carried: unknown key'):
        check(f'terminal: lio: shown escaped: {shown}', shown in err, repr(err))
    check('terminal: lio: no control character on stdout', not controls(out), repr(out))
    alias = next(t for t in json.loads(out)['targets'] if t['iqn'] == T + 'esc').get('alias')
    check('terminal: lio: stdout is the same document (the alias as \\u009b)', alias == 'A' + csi + 'B', repr(alias))
    rc, _, _ = imp('lio', path, '-o', os.path.join(work, 'esc.json'))
    check('terminal: lio: -o writes the alias as it is', rc == 6 and
          next(t for t in json.load(open(os.path.join(work, 'esc.json')))['targets'])['alias'] == 'A' + csi + 'B')
    # tgt: an included file's name (a glob finds any) is shown escaped too.
    inc = os.path.join(work, 'esc-' + esc + '[31m.conf')
    open(inc, 'w').write('frob x\n')
    conf = os.path.join(work, 'term-main.conf')
    open(conf, 'w').write('include esc-*.conf\n' + csi + 'key value\n')
    rc, out, err = imp('tgt', conf)
    check('terminal: tgt: exit 6', rc == 6, f'exit {rc} {err!r}')
    check('terminal: tgt: no control character in the messages', not controls(err), repr(err))
    check('terminal: tgt: an included file named with ESC shown escaped', 'esc-\\x1b[31m.conf:1: not carried' in err,
          repr(err))
    check('terminal: tgt: a C1 key shown escaped', 'term-main.conf:2: not carried: \\xc2\\x9bkey' in err, repr(err))


def includes(work):
    """tgt-admin's include reads any file, and iserctl import runs as root: the lines of an included file are
    named by file and line, never shown, even in a message about another line; the main file's are."""
    d = os.path.join(work, 'inc')
    os.makedirs(d)
    secret = 'NOT-A-REAL-HASH'
    open(os.path.join(d, 'shadow'), 'w').write(f'root:$6${secret}$x:19700:0:99999:7:::\n'
                                               f'default-driver {secret}-driver\n'
                                               f'backing-store /{secret}/disk\n'
                                               f'incominguser {secret}-user {secret}-pass\n')
    cases = (('top.conf', f'include shadow\n<target {T}inc>\nbacking-store {d}/disk\n</target>\n',
              ['shadow:1: not carried', 'shadow:4: not carried', 'top.conf:2: not carried: driver']),
             ('target.conf', f'<target {T}inc>\ninclude shadow\ndevice-type tape\nincominguser main-user main-secret-12\n'
              f'vendor_id ACME\n</target>\n',
              ['shadow:1: not carried', 'target.conf:3: not carried: device-type tape', 'target.conf:4: not carried: '
               'incominguser main-user', 'target.conf:5: not carried: vendor_id ACME']),
             ('store.conf', f'<target {T}inc>\n<backing-store {d}/disk>\ninclude shadow\n</backing-store>\n</target>\n',
              ['shadow:1: not carried', 'shadow:2: not carried']))
    for name, text, want in cases:
        conf = os.path.join(d, name)
        open(conf, 'w').write(text)
        rc, out, err = imp('tgt', conf)
        check(f'include: {name}: exit 6', rc == 6, f'exit {rc} {err!r}')
        check(f'include: {name}: no text of the included file in the messages', secret not in err, err)
        for w in want:
            check(f'include: {name}: reported: {w}', w in err, err)
    open(os.path.join(d, 'bad'), 'w').write(f'<frob {secret}>\n')
    conf = os.path.join(d, 'bad.conf')
    open(conf, 'w').write('include bad\n')
    rc, out, err = imp('tgt', conf)
    check('include: a line of an included file that stops the import: exit 1, named, not shown',
          rc == 1 and 'bad:1: ' in err and secret not in err, f'exit {rc} {err!r}')
    open(os.path.join(d, 'binary'), 'wb').write(b'ab\n\x01' + secret.encode())
    open(conf, 'w').write('include binary\n')
    rc, out, err = imp('tgt', conf)
    check('include: a control character in an included file: exit 1, its line named, the byte not shown',
          rc == 1 and 'binary:2: ' in err and '0x01' not in err, f'exit {rc} {err!r}')


def main():
    for tool in ('iscsi-ls', 'iscsi-inq'):
        if not shutil.which(tool):
            print(f'SKIP: {tool} not installed (libiscsi-bin)')
            sys.exit(77)
    work = checks.workdir('isert-import-')
    t0 = time.time()
    try:
        lio(work)
        tgt_example(work)
        tgt_vtl(work)
        tgt_own(work)
        apply(work)
        hostile(work)
        bounds(work)
        terminal(work)
        includes(work)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    print(f'# {time.time() - t0:.1f} s')
    checks.finish()


main()
