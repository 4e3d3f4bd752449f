#!/usr/bin/env python3
"""Persistent reservations that survive a restart of isertd (APTPL,
docs/reservations.md), over real TCP sessions.  Two initiators register with
APTPL=1 and one reserves WRITE EXCLUSIVE - REGISTRANTS ONLY; isertd is
stopped with SIGTERM and started again, then killed with SIGKILL after a
later change and started again: each time the keys (in order), the holder,
the type and the conflicts for an initiator that is not registered must be
what they were.  APTPL=0 in a later registration removes the state; a
damaged file is logged, moved aside and the LU starts without reservations;
a changed serial does not pick up the old state; state_dir "none" turns
APTPL off; a bad state_dir is refused with the field named.

usage: test_aptpl.py ISERTD [PORT]"""
import glob
import json
import os
import shutil
import struct
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import iscsi_client as ic  # noqa: E402
import checks  # noqa: E402
from admin_rpc import Rpc, port_open, start_isertd, stop_isertd  # noqa: E402
from checks import check  # noqa: E402
from pr_client import (CHECK, CONFLICT, EA, EA_RO, GOOD, PRE, REG, REG_IGN, REL, RES, WE, WE_RO,  # noqa: E402
                       caps, full_status, prout, read_keys, read_reservation, rw)

ISERTD = sys.argv[1]
PORT = int(sys.argv[2]) if len(sys.argv) > 2 else 3510
TGT = 'iqn.2026-11.org.isert:aptpl'
INI_A, INI_B, INI_C = ('iqn.2026-11.org.isert:node-a', 'iqn.2026-11.org.isert:node-b',
                       'iqn.2026-11.org.isert:outsider')
# Fixed ISIDs: an I_T nexus is initiator name + ISID, and it must be the same after the restart.
ISID = {INI_A: bytes.fromhex('400001370001'), INI_B: bytes.fromhex('400001370002'),
        INI_C: bytes.fromhex('400001370003')}
KEY_A, KEY_B = 0xA1A1A1A1A1A1A1A1, 0xB2


class Target:
    def __init__(self, work):
        self.work = work
        self.state = os.path.join(work, 'state')
        self.cfgfile = os.path.join(work, 'isertd.json')
        self.proc = None
        self.runs = 0
        self.write_config()

    def write_config(self, serial='APTPL-SERIAL-1', state_dir=None):
        g = {'state_dir': state_dir or self.state}
        cfg = {'backstores': [{'name': 'disk', 'type': 'file', 'path': os.path.join(self.work, 'disk.img'),
                               'size': '4M', 'serial': serial}],
               'targets': [{'iqn': TGT, 'tpgs': [{'tag': 1, 'demo_mode': True,
                                                  'portals': [{'ip': '127.0.0.1', 'port': PORT}],
                                                  'luns': [{'lun': 0, 'backstore': 'disk'}]}]}],
               'global': g}
        with open(self.cfgfile, 'w') as f:
            json.dump(cfg, f)

    def start(self):
        self.runs += 1
        log = 'isertd-%d.log' % self.runs
        self.logname = os.path.join(self.work, log)
        # The state folder is the configuration's (global.state_dir): a restart must find it there.
        self.proc, self.sock = start_isertd(ISERTD, self.work, self.cfgfile, '-r', '2', state=None, log=log,
                                            ready=PORT, seconds=10)
        if port_open(PORT):
            return
        if self.proc.poll() is not None:
            raise RuntimeError('isertd exited: ' + open(self.logname).read())
        raise RuntimeError('isertd did not listen')

    def stop(self, kill=False):
        if kill:
            self.proc.kill()
            rc = self.proc.wait()
        else:
            rc = stop_isertd(self.proc)
            check('run %d: isertd exits 0 on SIGTERM' % self.runs, rc == 0, rc)
        self.proc = None
        log = self.logtext()
        check('run %d: no sanitizer report in the log' % self.runs,
              'AddressSanitizer' not in log and 'runtime error' not in log, log[-2000:])
        return rc

    def logtext(self):
        with open(self.logname) as f:
            return f.read()


def clear_ua(c):
    for _ in range(10):  # POWER ON RESET, RESERVATIONS RELEASED, ...
        if c.command(b'\0' * 6)[0] == GOOD:
            break


def session(ini):
    c = ic.Conn(PORT, timeout=10)
    c.isid = ISID[ini]
    assert c.login(ini, TGT) == 0
    clear_ua(c)
    return c


def iport(ini):
    return '%s,i,0x%s' % (ini, ISID[ini].hex())


def expect_state(t, what, holder, rtype, keys=(KEY_A, KEY_B)):
    a, b, c = session(INI_A), session(INI_B), session(INI_C)
    # The outsider's first command after the restart meets the reservation.
    if rtype in (EA, EA_RO):
        check(what + ': outsider READ conflicts', rw(c, False) == CONFLICT)
    check(what + ': outsider WRITE conflicts', rw(c, True) == CONFLICT)
    if rtype in (WE, WE_RO):
        check(what + ': outsider READ passes', rw(c, False) == GOOD)
    gen, k = read_keys(a)
    check(what + ': READ KEYS lists both keys in order', k == list(keys), [hex(x) for x in k])
    check(what + ': generation restarts at 0 (SPC-4: power on)', gen == 0, gen)
    check(what + ': READ RESERVATION holder key and type', read_reservation(b) == (holder, rtype),
          read_reservation(b))
    fs = full_status(c)
    want = [(KEY_A, holder == KEY_A, rtype if holder == KEY_A else 0, 1, iport(INI_A)),
            (KEY_B, holder == KEY_B, rtype if holder == KEY_B else 0, 1, iport(INI_B))]
    check(what + ': READ FULL STATUS names the same I_T nexuses', fs == want, fs)
    check(what + ': PTPL_C and PTPL_A', caps(a) == (True, True), caps(a))
    # Registrants-only types let every registrant write.
    check(what + ': registrant B writes', rw(b, True) == GOOD)
    check(what + ': registrant A reads', rw(a, False) == GOOD)
    for x in (a, b, c):
        x.close()


def main():
    work = checks.workdir('isert-aptpl-')
    t = Target(work)
    try:
        t.start()
        a, b, c = session(INI_A), session(INI_B), session(INI_C)
        check('PTPL_C=1, PTPL_A=0 before any APTPL', caps(a) == (True, False), caps(a))
        check('A registers with APTPL', prout(a, REG, sark=KEY_A, aptpl=True)[0] == GOOD)
        files = glob.glob(os.path.join(t.state, 'pr-*.json'))
        check('the state file appears when the command completes', len(files) == 1, files)
        check('B registers with APTPL', prout(b, REG, sark=KEY_B, aptpl=True)[0] == GOOD)
        check('A reserves WRITE EXCLUSIVE - REGISTRANTS ONLY', prout(a, RES, WE_RO, rk=KEY_A)[0] == GOOD)
        check('PTPL_A=1', caps(c) == (True, True))
        check('before restart: outsider WRITE conflicts', rw(c, True) == CONFLICT)
        with open(files[0]) as f:
            doc = json.load(f)
        check('the file is the documented format', doc.get('format') == 'isert-pr' and doc.get('version') == 1 and
              doc.get('serial') == 'APTPL-SERIAL-1' and doc.get('backstore') == 'disk' and
              len(doc.get('registrations', [])) == 2 and doc.get('reservation') == {'type': WE_RO, 'holder': 0},
              doc)
        # The name is the NAA designator of VPD 0x83.
        st, vpd, _ = a.command(bytes([0x12, 1, 0x83, 0, 255, 0]), edtl=255, read=True)
        naa = vpd[8:24].hex() if st == GOOD and vpd[5] & 0x0f == 3 else None
        check('the file is named by the VPD 0x83 NAA designator',
              os.path.basename(files[0]) == 'pr-%s.json' % naa, (files[0], naa))
        check('the file is 0600', os.stat(files[0]).st_mode & 0o777 == 0o600, oct(os.stat(files[0]).st_mode))
        check('no temp file is left', not glob.glob(os.path.join(t.state, '*.tmp')))
        for x in (a, b, c):
            x.close()

        check('SIGTERM stops isertd', t.stop() == 0)
        t.start()
        check('the start logs the restore', 'restored 2 registrations and the reservation' in t.logtext(),
              t.logtext())
        expect_state(t, 'after SIGTERM', KEY_A, WE_RO)

        # A later change is written too: A releases, B takes EXCLUSIVE ACCESS - REGISTRANTS ONLY.
        a, b = session(INI_A), session(INI_B)
        check('A releases', prout(a, REL, WE_RO, rk=KEY_A)[0] == GOOD)
        clear_ua(b)  # RESERVATIONS RELEASED
        check('B reserves EXCLUSIVE ACCESS - REGISTRANTS ONLY', prout(b, RES, EA_RO, rk=KEY_B)[0] == GOOD)
        a.close()
        b.close()
        check('SIGKILL', t.stop(kill=True) == -9)
        t.start()
        expect_state(t, 'after SIGKILL', KEY_B, EA_RO)

        # APTPL=0 in a later registration: the state goes.
        a = session(INI_A)
        check('A re-registers with APTPL=0', prout(a, REG, rk=KEY_A, sark=KEY_A)[0] == GOOD)
        check('PTPL_A=0', caps(a) == (True, False))
        check('the state file is removed', not glob.glob(os.path.join(t.state, 'pr-*.json')))
        a.close()
        t.stop()
        t.start()
        a, c = session(INI_A), session(INI_C)
        check('APTPL cleared: no keys after restart', read_keys(a)[1] == [])
        check('APTPL cleared: no reservation after restart', read_reservation(a) is None)
        check('APTPL cleared: outsider writes', rw(c, True) == GOOD)

        # apply of a document with another state_dir: reported as needing a restart, the state stays put.
        with open(t.cfgfile) as f:
            doc = json.load(f)
        doc['global']['state_dir'] = os.path.join(work, 'elsewhere')
        r = Rpc(t.sock).call('apply', {'config': doc})
        check('apply: state_dir needs a restart', 'state_dir' in r.get('result', {}).get('restart_needed', []), r)
        check('apply: APTPL still writes to the folder it started with',
              prout(a, REG_IGN, sark=KEY_A, aptpl=True)[0] == GOOD and
              len(glob.glob(os.path.join(t.state, 'pr-*.json'))) == 1 and
              not os.path.exists(os.path.join(work, 'elsewhere')))

        # A damaged file: logged by name, moved to .bad, the LU starts without reservations.
        check('A registers again (REGISTER AND IGNORE EXISTING KEY, APTPL)',
              prout(a, REG_IGN, sark=KEY_A, aptpl=True)[0] == GOOD)
        check('A reserves WRITE EXCLUSIVE', prout(a, RES, WE, rk=KEY_A)[0] == GOOD)
        a.close()
        c.close()
        t.stop()
        path = glob.glob(os.path.join(t.state, 'pr-*.json'))[0]
        with open(path, 'r+') as f:
            text = f.read()
            f.seek(0)
            f.write(text[:len(text) // 2])
            f.truncate()
        t.start()
        log = t.logtext()
        check('damaged: the log names the file', path in log and 'is damaged' in log, log)
        check('damaged: the file is moved to .bad', os.path.exists(path + '.bad') and not os.path.exists(path))
        a, c = session(INI_A), session(INI_C)
        check('damaged: no keys', read_keys(a)[1] == [])
        check('damaged: the outsider writes', rw(c, True) == GOOD)
        check('damaged: APTPL works again', prout(a, REG, sark=KEY_A, aptpl=True)[0] == GOOD and
              os.path.exists(path))
        a.close()
        c.close()
        t.stop()

        # The LU's serial changed: a new identity, the old state is not applied (and the log says why).
        t.write_config(serial='APTPL-SERIAL-2')
        t.start()
        log = t.logtext()
        check('new serial: the log names the old file and both serials',
              path in log and 'APTPL-SERIAL-1' in log and 'APTPL-SERIAL-2' in log, log)
        a = session(INI_A)
        check('new serial: no keys', read_keys(a)[1] == [])
        a.close()
        t.stop()

        # state_dir "none": APTPL is not offered.
        t.write_config(state_dir='none')
        t.start()
        a = session(INI_A)
        check('state_dir none: PTPL_C=0', caps(a) == (False, False))
        st, sense = prout(a, REG, sark=KEY_A, aptpl=True)
        check('state_dir none: APTPL=1 is refused (INVALID FIELD IN PARAMETER LIST)',
              st == CHECK and sense[12:14] == b'\x26\x00', (st, sense.hex()))
        a.close()
        t.stop()

        t.write_config(state_dir='relative/dir')
        r = subprocess.run([ISERTD, '-c', t.cfgfile, '--check'], capture_output=True, text=True)
        check('a relative state_dir is refused, the field named',
              r.returncode != 0 and 'global.state_dir' in r.stderr, r.stderr)
        t.write_config()
        r = subprocess.run([ISERTD, '-c', t.cfgfile, '--state-dir', work, '--print-config'], capture_output=True,
                           text=True)
        check('--state-dir overrides global.state_dir',
              r.returncode == 0 and json.loads(r.stdout)['global']['state_dir'] == work, r.stdout + r.stderr)
    finally:
        if t.proc:
            t.stop(kill=True)
        if checks.failed:
            print('logs kept in', work)
        else:
            shutil.rmtree(work, ignore_errors=True)
    checks.finish()


main()
