#!/usr/bin/env python3
"""ALUA (SPC-4 5.16, docs/config.md "alua"): one target with two portal
groups on two loopback ports, each in its own target port group, and a
third port that another gateway would serve (remote_ports).  Over real TCP
sessions: REPORT TARGET PORT GROUPS byte for byte in both formats, the
TPGS bits of INQUIRY, the designators of VPD page 83h, a state change
through the admin socket (every nexus gets ASYMMETRIC ACCESS STATE
CHANGED, a READ in standby is refused with 04h/0Bh while INQUIRY and RTPG
are served, unavailable 04h/0Ch, transitioning 04h/0Ah), SET TARGET PORT
GROUPS from an initiator (the sender gets no unit attention, the others
do; refused when explicit mode is off; bad parameter lists named), the
state kept by `save`, iserctl alua, and refused admin requests.

usage: test_alua.py ISERTD ISERCTL [PORT]"""
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
from checks import check  # noqa: E402

ISERTD, ISERCTL = sys.argv[1], sys.argv[2]
PORT = int(sys.argv[3]) if len(sys.argv) > 3 else 3510
T = 'iqn.2026-11.org.isert:alua'
T_DEFAULT = 'iqn.2026-11.org.isert:alua-default'
INI = 'iqn.2026-11.org.isert:alua-host'

GOOD, CHECK = 0, 2
NOT_READY, ILLEGAL, UNIT_ATTENTION = 2, 5, 6


def config():
    tpg = lambda tag, port: {'tag': tag, 'demo_mode': True, 'portals': [{'ip': '127.0.0.1', 'port': port}],  # noqa
                             'luns': [{'lun': 0, 'backstore': 'r0'}]}
    return {
        'backstores': [{'name': 'r0', 'type': 'ram', 'size': '1M'}, {'name': 'r1', 'type': 'ram', 'size': '1M'}],
        'targets': [
            {'iqn': T, 'tpgs': [tpg(1, PORT), tpg(2, PORT + 1)],
             'alua': {'mode': 'both', 'transition_time': 7, 'groups': [
                 {'id': 10, 'state': 'active_optimized', 'preferred': True, 'tpgs': [1]},
                 {'id': 20, 'state': 'active_nonoptimized', 'tpgs': [2], 'remote_ports': [300]}]}},
            {'iqn': T_DEFAULT, 'tpgs': [{'tag': 1, 'demo_mode': True,
                                         'portals': [{'ip': '127.0.0.1', 'port': PORT}],
                                         'luns': [{'lun': 0, 'backstore': 'r1'}]}]},
        ],
    }


def inquiry(evpd=0, page=0, alloc=255):
    return bytes([0x12, evpd, page]) + struct.pack('>H', alloc) + b'\0'


def rtpg(fmt=0, alloc=1024):
    return bytes([0xA3, (fmt << 5) | 0x0A, 0, 0, 0, 0]) + struct.pack('>I', alloc) + b'\0\0'


def stpg_cdb(plen):
    return bytes([0xA4, 0x0A, 0, 0, 0, 0]) + struct.pack('>I', plen) + b'\0\0'


def stpg_list(*descs):
    return b'\0' * 4 + b''.join(bytes([state, 0]) + struct.pack('>H', gid) for state, gid in descs)


def read10(lba=0, blocks=1):
    return struct.pack('>BBIBHB', 0x28, 0, lba, 0, blocks, 0)


TUR = b'\0' * 6
MODE_SENSE6 = bytes([0x1A, 0, 0x3F, 0, 255, 0])
REQUEST_SENSE = bytes([0x03, 0, 0, 0, 252, 0])


def sense_of(sense):
    """(key, asc, ascq) from fixed-format sense (after the 2-byte length the client strips)."""
    if len(sense) < 14:
        return None
    return sense[2] & 0x0F, sense[12], sense[13]


def run(c, cdb, edtl=0, read=False, data=None):
    st, din, sense = c.command(cdb, edtl, read=read, write_data=data)
    return st, din, sense_of(sense) if st == CHECK else None


def descriptor(state, gid, ports, pref=False, status=0):
    d = bytes([(0x80 if pref else 0) | state, 0x8F]) + struct.pack('>H', gid) + bytes([0, status, 0, len(ports)])
    return d + b''.join(b'\0\0' + struct.pack('>H', p) for p in ports)


def expected_rtpg(descs, ext=False, ttime=7):
    body = b''.join(descs)
    if ext:
        return struct.pack('>I', len(body) + 4) + bytes([0x10, ttime, 0, 0]) + body
    return struct.pack('>I', len(body)) + body


def vpd83_ids(data):
    """{(association, type): designator} of VPD page 83h."""
    out, off = {}, 4
    end = 4 + struct.unpack('>H', data[2:4])[0]
    while off + 4 <= end:
        assoc, typ, ln = (data[off + 1] >> 4) & 3, data[off + 1] & 0x0F, data[off + 3]
        out[(assoc, typ)] = data[off + 4:off + 4 + ln]
        off += 4 + ln
    return out


def vpd83_heads(data):
    """{(association, type): (byte 0, byte 1)} of VPD page 83h's descriptors."""
    out, off = {}, 4
    end = 4 + struct.unpack('>H', data[2:4])[0]
    while off + 4 <= end:
        out[((data[off + 1] >> 4) & 3, data[off + 1] & 0x0F)] = (data[off], data[off + 1])
        off += 4 + data[off + 3]
    return out


def drain_ua(c, cdb=TUR):
    """Commands until one passes the unit attention; returns the unit attention ASCs seen."""
    seen = []
    for _ in range(8):
        st, _, s = run(c, cdb)
        if s and s[0] == UNIT_ATTENTION:
            seen.append((s[1], s[2]))
            continue
        break
    return seen


def login(port, target=T):
    c = ic.Conn(port)
    assert c.login(INI, target) == 0
    drain_ua(c)  # the power on reset of a new nexus
    return c


def main():
    work = checks.workdir('isert-alua-')
    cfgfile = os.path.join(work, 'isertd.json')
    with open(cfgfile, 'w') as f:
        json.dump(config(), f)
    os.chmod(cfgfile, 0o600)
    proc, sock = start_isertd(ISERTD, work, cfgfile, '-r', '2')
    rpc = Rpc(sock)

    def iserctl(*args):
        return subprocess.run([ISERCTL, '-s', sock] + list(args), capture_output=True, text=True, timeout=30)

    try:
        c1, c2 = login(PORT), login(PORT + 1)

        # -- what an initiator reads -------------------------------------------
        st, d, _ = run(c1, inquiry(), 255, read=True)
        check('INQUIRY: TPGS 11b (implicit and explicit)', st == GOOD and d[5] & 0x30 == 0x30, d[:8].hex())
        for c, port, grp in ((c1, 1, 10), (c2, 2, 20)):
            st, d, _ = run(c, inquiry(1, 0x83), 255, read=True)
            ids = vpd83_ids(d)
            check('VPD 83: relative target port %d (type 4h, target port)' % port,
                  ids.get((1, 4)) == struct.pack('>HH', 0, port), ids.get((1, 4)))
            check('VPD 83: target port group %d (type 5h, target port)' % grp,
                  ids.get((1, 5)) == struct.pack('>HH', 0, grp), ids.get((1, 5)))
            check('VPD 83: both with PIV set, protocol iSCSI, binary code set',
                  st == GOOD and vpd83_heads(d).get((1, 4)) == (0x51, 0x94) and
                  vpd83_heads(d).get((1, 5)) == (0x51, 0x95), vpd83_heads(d))
        g10 = descriptor(0, 10, [1], pref=True)
        g20 = descriptor(1, 20, [2, 300])
        st, d, _ = run(c1, rtpg(0), 1024, read=True)
        check('RTPG length-only format, byte for byte', st == GOOD and d == expected_rtpg([g10, g20]), d.hex())
        st, d, _ = run(c2, rtpg(1), 1024, read=True)
        check('RTPG extended header (format 1, transition time 7), byte for byte',
              st == GOOD and d == expected_rtpg([g10, g20], ext=True), d.hex())
        st, d, _ = run(c1, rtpg(0, alloc=6), 6, read=True)
        check('RTPG cut to the allocation length, the length field whole',
              st == GOOD and d == expected_rtpg([g10, g20])[:6], d.hex())
        st, _, s = run(c1, rtpg(2), 1024, read=True)
        check('RTPG format 2: INVALID FIELD IN CDB', s == (ILLEGAL, 0x24, 0), s)
        cd = login(PORT, T_DEFAULT)
        st, d, _ = run(cd, inquiry(), 255, read=True)
        check('a target without alua: TPGS 01b (implicit)', d[5] & 0x30 == 0x10, d[:8].hex())
        st, d, _ = run(cd, rtpg(0), 1024, read=True)
        check('a target without alua: one group 1, active/optimized, its port',
              d == expected_rtpg([descriptor(0, 1, [1])]), d.hex())
        st, _, s = run(cd, stpg_cdb(8), 8, data=stpg_list((0, 1)))
        check('a target without alua (implicit): SET TARGET PORT GROUPS is not supported',
              s == (ILLEGAL, 0x20, 0), s)

        # -- the admin puts group 10 in standby ---------------------------------
        r = rpc.call('alua.set', {'target': T, 'group': 10, 'state': 'standby'})
        check('alua.set standby: done', 'result' in r and r['result']['plan'], r)
        check('the other group\'s nexus gets ASYMMETRIC ACCESS STATE CHANGED', drain_ua(c2) == [(0x2A, 6)])
        st, _, s = run(c1, inquiry(), 255, read=True)
        check('INQUIRY in standby: served (the unit attention stays)', st == GOOD)
        st, _, s = run(c1, read10(), 512, read=True)
        check('the standby nexus: its READ reports the unit attention first', s == (UNIT_ATTENTION, 0x2A, 6), s)
        st, _, s = run(c1, read10(), 512, read=True)
        check('READ in standby: NOT READY, 04h/0Bh', s == (NOT_READY, 0x04, 0x0B), s)
        st, _, s = run(c1, TUR)
        check('TEST UNIT READY in standby: NOT READY, 04h/0Bh', s == (NOT_READY, 0x04, 0x0B), s)
        st, d, _ = run(c1, MODE_SENSE6, 255, read=True)
        check('MODE SENSE in standby: served', st == GOOD and len(d) > 4)
        st, d, _ = run(c1, REQUEST_SENSE, 252, read=True)
        check('REQUEST SENSE in standby: NOT READY, 04h/0Bh', st == GOOD and sense_of(d[:18]) == (NOT_READY, 4, 0xB),
              d[:18].hex())
        st, d, _ = run(c1, rtpg(0), 1024, read=True)
        check('RTPG in standby: served, group 10 standby (status: implicit)',
              st == GOOD and d == expected_rtpg([descriptor(2, 10, [1], pref=True, status=2), g20]), d.hex())
        st, d, _ = run(c2, read10(), 512, read=True)
        check('READ through the other group still runs', st == GOOD and len(d) == 512)

        r = rpc.call('alua.set', {'target': T, 'group': 10, 'state': 'unavailable'})
        check('alua.set unavailable: done', 'result' in r, r)
        drain_ua(c1, inquiry())
        run(c1, TUR)  # the unit attention
        st, _, s = run(c1, MODE_SENSE6, 255, read=True)
        check('MODE SENSE in unavailable: NOT READY, 04h/0Ch', s == (NOT_READY, 4, 0x0C), s)
        st, _, _ = run(c1, rtpg(0), 1024, read=True)
        check('RTPG in unavailable: served', st == GOOD)
        r = rpc.call('alua.set', {'target': T, 'group': 10, 'state': 'transitioning'})
        run(c1, TUR)
        st, _, s = run(c1, read10(), 512, read=True)
        check('READ in transitioning: NOT READY, 04h/0Ah', s == (NOT_READY, 4, 0x0A), s)
        st, _, s = run(c1, stpg_cdb(8), 8, data=stpg_list((0, 10)))
        check('SET TARGET PORT GROUPS in transitioning: NOT READY, 04h/0Ah', s == (NOT_READY, 4, 0x0A), s)
        st, _, _ = run(c1, rtpg(1), 1024, read=True)
        check('RTPG in transitioning: served', st == GOOD)
        drain_ua(c2)

        # -- SET TARGET PORT GROUPS from the initiator ------------------------
        st, _, s = run(c2, stpg_cdb(12), 12, data=stpg_list((0, 10), (2, 20)))
        check('STPG: group 10 active/optimized, group 20 standby', st == GOOD, s)
        st, _, s = run(c2, TUR)
        check('the sender gets no unit attention; its group is in standby now', s == (NOT_READY, 4, 0x0B), s)
        check('the other nexus gets ASYMMETRIC ACCESS STATE CHANGED', drain_ua(c1) == [(0x2A, 6)])
        st, d, _ = run(c1, read10(), 512, read=True)
        check('READ through group 10 runs again', st == GOOD and len(d) == 512)
        st, d, _ = run(c1, rtpg(0), 1024, read=True)
        check('RTPG: the new states, status "altered by SET TARGET PORT GROUPS"',
              d == expected_rtpg([descriptor(0, 10, [1], pref=True, status=1),
                                  descriptor(2, 20, [2, 300], status=1)]), d.hex())
        r = rpc.call('alua.show', {'target': T})['result']['targets'][0]
        g = {x['id']: x for x in r['groups']}
        check('alua.show: what the initiator set, with its status',
              g[20]['state'] == 'standby' and g[20]['status'] == 'set_by_initiator' and
              g[10]['state'] == 'active_optimized', r)
        saved = os.path.join(work, 'saved.json')
        r = rpc.call('save', {'path': saved})
        with open(saved) as f:
            doc = json.load(f)
        sg = {x['id']: x for x in doc['targets'][0]['alua']['groups']}
        check('save keeps the state an initiator set', sg[20]['state'] == 'standby' and
              sg[10]['state'] == 'active_optimized', sg)
        check('save leaves a target without alua without it', 'alua' not in doc['targets'][1], doc['targets'][1])

        # -- bad parameter lists -------------------------------------------------
        bad = [
            ('a list of 5 bytes', stpg_cdb(5), stpg_list((0, 10))[:5], (ILLEGAL, 0x1A, 0)),
            ('a list cut inside a descriptor (10 bytes)', stpg_cdb(10), stpg_list((0, 10), (0, 20))[:10],
             (ILLEGAL, 0x1A, 0)),
            ('a list longer than a descriptor per group could be (2000 bytes)', stpg_cdb(2000), b'\0' * 2000,
             (ILLEGAL, 0x1A, 0)),
            ('state offline (Eh)', stpg_cdb(8), stpg_list((0xE, 10)), (ILLEGAL, 0x26, 0)),
            ('state transitioning (Fh)', stpg_cdb(8), stpg_list((0xF, 10)), (ILLEGAL, 0x26, 0)),
            ('an unknown group 99', stpg_cdb(8), stpg_list((0, 99)), (ILLEGAL, 0x26, 0)),
            ('group 10 twice', stpg_cdb(12), stpg_list((0, 10), (2, 10)), (ILLEGAL, 0x26, 0)),
        ]
        for name, cdb, data, want in bad:
            st, _, s = c1.command(cdb, len(data), write_data=data)
            check('STPG %s: %s' % (name, want), sense_of(s) == want, sense_of(s))
        st, d, _ = run(c1, rtpg(0), 1024, read=True)
        check('refused lists changed nothing', d == expected_rtpg([descriptor(0, 10, [1], pref=True, status=1),
                                                                     descriptor(2, 20, [2, 300], status=1)]))
        st, _, s = c1.command(stpg_cdb(8), 8, write_data=stpg_list((0xE, 10)))
        check('the sense key specific field points at the state (byte 4, bit 3)',
              len(s) >= 18 and s[15] == 0x8B and s[16:18] == b'\0\x04', s.hex())
        st, _, s = run(c1, stpg_cdb(0))
        check('STPG with no list: GOOD, nothing changes', st == GOOD)
        check('... and no unit attention for the other nexus', run(c2, inquiry(), 255, read=True)[0] == GOOD and
              drain_ua(c2) == [])

        # -- explicit mode off -----------------------------------------------------
        r = iserctl('alua', 'set', T, 'mode=implicit')
        check('iserctl alua set IQN mode=implicit', r.returncode == 0, r.stderr)
        st, d, _ = run(c1, inquiry(), 255, read=True)
        check('INQUIRY TPGS 01b once explicit is off', d[5] & 0x30 == 0x10, d[:8].hex())
        st, _, s = run(c1, stpg_cdb(8), 8, data=stpg_list((0, 20)))
        check('STPG refused when explicit mode is off: INVALID COMMAND OPERATION CODE', s == (ILLEGAL, 0x20, 0), s)

        # -- iserctl --------------------------------------------------------------
        r = iserctl('alua', T)
        check('iserctl alua IQN lists the groups', r.returncode == 0 and 'standby' in r.stdout and
              '300' in r.stdout and 'set_by_initiator' in r.stdout, r.stdout + r.stderr)
        r = iserctl('alua', 'set', T, '20', 'active_optimized')
        check('iserctl alua set IQN 20 active_optimized', r.returncode == 0, r.stderr)
        check('... the initiator of group 20 hears of it', drain_ua(c2) == [(0x2A, 6)])
        st, d, _ = run(c2, read10(), 512, read=True)
        check('... and reads again', st == GOOD)
        r = iserctl('alua', 'set', T, '20', 'sleepy')
        check('iserctl alua set: a bad state is refused (exit 1), the field named',
              r.returncode == 1 and 'alua.groups[1].state' in r.stderr and 'sleepy' in r.stderr, r.stderr)
        r = iserctl('alua', 'set', T, '77', 'standby')
        check('iserctl alua set: an unknown group is "no such object" (exit 4)', r.returncode == 4, r.stderr)
        r = iserctl('alua', 'set', T)
        check('iserctl alua set IQN alone: usage (exit 2)', r.returncode == 2, r.stderr)

        # -- bad admin requests -----------------------------------------------------
        gen = rpc.call('config.get')['result']['generation']
        bad_rpc = [
            ('no target', {'group': 10, 'state': 'standby'}, -32602, 'target'),
            ('unknown target', {'target': 'iqn.2026-11.org.isert:none', 'group': 1, 'state': 'standby'}, -32003,
             'no target'),
            ('nothing to set', {'target': T}, -32602, 'nothing to set'),
            ('state without group', {'target': T, 'state': 'standby'}, -32602, 'group'),
            ('group 0', {'target': T, 'group': 0, 'state': 'standby'}, -32602, 'group'),
            ('a state that is no string', {'target': T, 'group': 10, 'state': 3}, -32000,
             'targets[0].alua.groups[0].state'),
            ('an unknown mode', {'target': T, 'mode': 'sometimes'}, -32000, 'targets[0].alua.mode'),
            ('transition_time 256', {'target': T, 'transition_time': 256}, -32000, 'targets[0].alua.transition_time'),
            ('an unknown parameter', {'target': T, 'group': 10, 'state': 'standby', 'colour': 1}, -32602, 'colour'),
        ]
        for name, params, code, words in bad_rpc:
            r = rpc.call('alua.set', params)
            e = r.get('error', {})
            check('alua.set %s: refused (%d), naming %s' % (name, code, words),
                  e.get('code') == code and words in e.get('message', ''), r)
        check('refusals changed nothing', rpc.call('config.get')['result']['generation'] == gen)
        r = rpc.call('alua.show', {'target': 'iqn.2026-11.org.isert:none'})
        check('alua.show of an unknown target: -32003', r.get('error', {}).get('code') == -32003, r)
        # A whole configuration with a portal group in no target port group is refused, naming the field.
        doc = rpc.call('config.get')['result']['config']
        doc['targets'][0]['alua']['groups'][1]['tpgs'] = []
        r = rpc.call('apply', {'config': doc})
        check('apply: a portal group in no target port group is refused',
              r.get('error', {}).get('code') == -32000 and 'targets[0].alua.groups' in r['error']['message'] and
              'tag 2' in r['error']['message'], r)

        # -- tpg.create / tpg.delete keep the groups whole ------------------------------
        r = rpc.call('tpg.create', {'target': T, 'tag': 3, 'alua_group': 20})
        check('tpg.create with alua_group: the new port joins group 20', 'result' in r, r)
        r = rpc.call('alua.show', {'target': T})['result']['targets'][0]
        check('... alua.show lists it', [2, 3] == {x['id']: x for x in r['groups']}[20]['tpgs'], r)
        r = rpc.call('tpg.create', {'target': T, 'tag': 4})
        check('tpg.create without alua_group on a target with groups: refused, naming alua.groups',
              'targets[0].alua.groups' in r.get('error', {}).get('message', ''), r)
        r = rpc.call('tpg.delete', {'target': T, 'tag': 3})
        check('tpg.delete takes its port out of its group', 'result' in r, r)

        # -- one limit on portal groups: 255, whatever alua says (a group reports at most 255 ports) --
        TB, TC = 'iqn.2026-11.org.isert:alua-many', 'iqn.2026-11.org.isert:alua-after'
        doc = rpc.call('config.get')['result']['config']
        doc['targets'].append({'iqn': TB, 'tpgs': [{'tag': i} for i in range(1, 256)]})
        doc['targets'].append({'iqn': TC, 'tpgs': [{'tag': 1, 'demo_mode': True,
                                                    'portals': [{'ip': '127.0.0.1', 'port': PORT}],
                                                    'luns': [{'lun': 0, 'backstore': 'r1'}]}],
                               'alua': {'groups': [{'id': 5, 'tpgs': [1]}]}})
        r = rpc.call('apply', {'config': doc})
        check('a target of 255 portal groups (one default group of 255 ports) is taken', 'result' in r, r)
        r = rpc.call('tpg.create', {'target': TB, 'tag': 256})
        check('tpg.create of the 256th portal group is refused, naming the one limit',
              'at most 255 portal groups' in r.get('error', {}).get('message', ''), r)
        r = rpc.call('alua.set', {'target': TC, 'group': 5, 'state': 'standby'})
        check('alua.set on a target after it says done', 'result' in r, r)
        ct = login(PORT, TC)
        st, d, _ = run(ct, rtpg(0), 1024, read=True)
        check('... and it was done: RTPG reports the group standby',
              st == GOOD and d == expected_rtpg([descriptor(2, 5, [1], status=2)]), d.hex())
        ct.close()

        for c in (c1, c2, cd):
            c.close()
        check('isertd still runs', proc.poll() is None)
    finally:
        rc = stop_isertd(proc)
        check('isertd exits cleanly', rc == 0, rc)
        if checks.failed:
            print(open(os.path.join(work, 'isertd.log')).read()[-3000:])
        shutil.rmtree(work, ignore_errors=True)
    checks.finish()


if __name__ == '__main__':
    main()
