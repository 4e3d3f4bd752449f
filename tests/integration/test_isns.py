#!/usr/bin/env python3
"""The iSNS client (docs/admin.md "iSNS", docs/config.md "isns") against
Debian's open-isns server (isnsd in the foreground, its own configuration,
an in-memory database, no authentication): isertd registers its entity,
every portal (with its ESI port), every target (node type target, alias)
and a portal group per target and portal with its TPG's tag, and nothing
links a target to a portal of another; a live change (a target added, a
portal removed) reaches the server; isnsd's ESI probes are answered, so the
portals outlive the ESI timeout; four idle connections held to the ESI
port from another address (127.0.0.2) keep neither isnsd's ESI nor one from
a third address unanswered; isnsd restarted without its database gets
everything again within the stated time; a discovery domain is joined and
left live; a server that answers garbage is logged and retried, and isertd
goes on; SIGTERM deregisters.  isnsadm reads what the server holds.
(open-iscsi discovering through isnsd: tests/vm/isns.sh in the guest.)

usage: test_isns.py ISERTD [PORT]   (ports PORT..PORT+7; isnsd on PORT)"""
import json
import os
import select
import shutil
import signal
import socket
import struct
import subprocess
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import checks  # noqa: E402
from admin_rpc import Rpc, start_isertd, end_isertd  # noqa: E402
from checks import check  # noqa: E402

ISERTD = sys.argv[1]
P = int(sys.argv[2]) if len(sys.argv) > 2 else 3620
ISNS, ESI, HOSTILE = P, P + 5, P + 7
T1 = 'iqn.2026-11.org.isert:isns1'
T2 = 'iqn.2026-11.org.isert:isns2'
T3 = 'iqn.2026-11.org.isert:isns3'
EID = 'isert-isns-test'
DD = 'isert-isns-dd'
L = '127.0.0.1'
# What docs/admin.md states: a server that comes back is registered with again within the backoff (at most 30 s);
# after a short restart that is the first or second retry (1 s, then 2 s).
BACK_WITHIN = 8


def isns_conf(work):
    return f"""SourceName = iqn.2026-11.org.isert.test:isnsd
BindAddress = {L}:{ISNS}
ControlSocket = {work}/isnsctl
PIDFile = {work}/isnsd.pid
Security = 0
SLPRegister = 0
DefaultDiscoveryDomain = 1
RegistrationPeriod = 20
ESIMinInterval = 1
ESIMaxInterval = 5
ESIRetries = 2
"""


def adm_conf(work, source):
    return f"""SourceName = {source}
ServerAddress = {L}:{ISNS}
ControlSocket = {work}/isnsctl
Security = 0
"""


class Isnsd:
    def __init__(self, work):
        self.work = work
        self.conf = os.path.join(work, 'isnsd.conf')
        with open(self.conf, 'w') as f:
            f.write(isns_conf(work))
        self.log = os.path.join(work, 'isnsd.log')
        self.proc = None

    def start(self):
        logf = open(self.log, 'a')
        self.proc = subprocess.Popen(['isnsd', '-f', '-c', self.conf, '-d', 'esi'], stdout=logf, stderr=subprocess.STDOUT)
        logf.close()
        for _ in range(100):
            try:
                socket.create_connection((L, ISNS), 0.2).close()
                return
            except OSError:
                time.sleep(0.05)

    def stop(self):
        if self.proc and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(5)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()

    def text(self):
        with open(self.log, errors='replace') as f:
            return f.read()


def isnsadm(work, what, source='iqn.2026-11.org.isert.test:adm'):
    """isnsadm --list WHAT as [{attribute name: value}], one per object."""
    conf = os.path.join(work, 'adm-' + source.split(':')[-1] + '.conf')
    with open(conf, 'w') as f:
        f.write(adm_conf(work, source))
    r = subprocess.run(['isnsadm', '-c', conf, '--list', what], capture_output=True, text=True, timeout=10)
    objs = []
    for line in r.stdout.splitlines():
        if line.startswith('Object'):
            objs.append({})
        elif ':' in line and '=' in line and objs:
            name, _, value = line.split(':', 1)[1].partition('=')
            key = name.strip()
            value = value.strip().strip('"')
            # repeated attributes (DD members) become lists
            if key in objs[-1]:
                prev = objs[-1][key]
                objs[-1][key] = (prev if isinstance(prev, list) else [prev]) + [value]
            else:
                objs[-1][key] = value
    return objs


def isnsadm_query(work, what):
    """isnsadm --query WHAT (e.g. eid=E: the entity and what it holds) as [(object type, {attribute: value})]."""
    conf = os.path.join(work, 'adm-adm.conf')
    with open(conf, 'w') as f:
        f.write(adm_conf(work, 'iqn.2026-11.org.isert.test:adm'))
    r = subprocess.run(['isnsadm', '-c', conf, '--query', what], capture_output=True, text=True, timeout=10)
    objs = []
    for line in r.stdout.splitlines():
        if line.startswith('object['):
            objs.append((line.split('<', 1)[-1].rstrip('>'), {}))
        elif ':' in line and '=' in line and objs:
            name, _, value = line.split(':', 1)[1].partition('=')
            objs[-1][1][name.strip()] = value.strip().strip('"')
    return objs


def wait_for(cond, secs):
    t0 = time.time()
    while time.time() - t0 < secs:
        v = cond()
        if v:
            return v, time.time() - t0
        time.sleep(0.1)
    return cond(), time.time() - t0


def config(targets, isns=None):
    g = {'isns': dict({'server': f'{L}:{ISNS}', 'entity': EID, 'esi_interval': 2, 'esi_port': ESI,
                       'registration_period': 6}, **(isns or {}))}
    return {'backstores': [{'name': 'r0', 'type': 'ram', 'size': '4M'}], 'targets': targets, 'global': g}


def target(iqn, tpgs, alias=None):
    t = {'iqn': iqn, 'tpgs': [{'tag': tag, 'portals': [{'ip': ip, 'port': port} for ip, port in portals],
                               'luns': [{'lun': 0, 'backstore': 'r0'}]} for tag, portals in tpgs]}
    if alias:
        t['alias'] = alias
    return t


def pgs(work, source=None):
    """{(target, port): tag} of the portal groups the server lists (a NULL tag: no path, not listed)."""
    out = {}
    for o in isnsadm(work, 'portal-groups', *([source] if source else [])):
        if 'Portal group tag' in o and o['Portal group tag'] not in ('<NIL>', '0'):
            out[(o.get('Portal group name'), o.get('Portal group port', '').split('/')[0],
                 o.get('Portal group address'))] = int(o['Portal group tag'])
    return out


def hostile_server(stop):
    """Answers every connection with a PDU whose attribute claims more bytes than it has, then closes."""
    s = socket.socket()
    s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    s.bind((L, HOSTILE))
    s.listen(4)
    s.settimeout(0.2)
    bad = bytes.fromhex('0001 8001 000c 4c00 0001 0000' + '00000000 00000020 00000010')
    while not stop.is_set():
        try:
            c, _ = s.accept()
        except socket.timeout:
            continue
        try:
            c.settimeout(1)
            c.recv(65536)
            c.sendall(bad)
        except OSError:
            pass
        c.close()
    s.close()


def esi_squatter(stop, held, src='127.0.0.2'):
    """Holds four idle connections to the ESI port from src; one isertd closes is opened again 0.5 s later."""
    conns, due = [], 0.0
    while not stop.is_set():
        while len(conns) < 4 and time.time() >= due:
            c = socket.socket()
            try:
                c.bind((src, 0))
                c.connect((L, ESI))
                conns.append(c)
                held['opened'] += 1
                held['now'] = len(conns)
            except OSError:
                c.close()
                break
        readable, _, _ = select.select(conns, [], [], 0.05)
        for c in readable:
            try:
                gone = not c.recv(1)
            except OSError:
                gone = True
            if gone:
                conns.remove(c)
                c.close()
                held['closed'] += 1
                held['now'] = len(conns)
                due = time.time() + 0.5
    for c in conns:
        c.close()


def esi_ask(src, eid, xid=0x77):
    """An ESI naming eid from src: (function, xid, status) of the answer, or None (closed, no answer in 2 s)."""
    v = eid.encode() + b'\0'
    v += b'\0' * (-len(v) % 4)
    pl = struct.pack('>II', 1, len(v)) + v
    c = socket.socket()
    try:
        c.bind((src, 0))
        c.settimeout(2)
        c.connect((L, ESI))
        c.sendall(struct.pack('>HHHHHH', 1, 0x000d, len(pl), 0x4c00, xid, 0) + pl)
        got = b''
        while len(got) < 16:
            b = c.recv(16 - len(got))
            if not b:
                return None
            got += b
        _, func, _, _, rxid, _, status = struct.unpack('>HHHHHHI', got)
        return func, rxid, status
    except OSError:
        return None
    finally:
        c.close()


def main():
    if not shutil.which('isnsd') or not shutil.which('isnsadm'):
        print('SKIP: isnsd and isnsadm (open-isns-server, open-isns-utils) are not installed')
        sys.exit(77)
    work = checks.workdir('isert-isns-')
    t_start = time.time()
    srv = Isnsd(work)
    srv.start()
    cfgfile = os.path.join(work, 'isertd.json')
    first = [target(T1, [(1, [(L, P + 1), (L, P + 2)])], alias='one'),
             target(T2, [(1, [(L, P + 3)]), (2, [('0.0.0.0', P + 4)])])]
    with open(cfgfile, 'w') as f:
        json.dump(config(first), f)
    proc, sock = start_isertd(ISERTD, work, cfgfile)
    rpc = Rpc(sock)
    stop_hostile = threading.Event()
    try:
        ents, took = wait_for(lambda: [e for e in isnsadm(work, 'entities') if e.get('Entity identifier') == EID], 5)
        check(f'the entity registered ({took:.1f} s)', ents, isnsadm(work, 'entities'))
        nodes = {n['iSCSI name']: n for n in isnsadm(work, 'nodes') if 'iSCSI name' in n}
        check('both targets as nodes of type Target',
              all(nodes.get(t, {}).get('iSCSI node type') == 'Target' for t in (T1, T2)), nodes)
        check('the alias', nodes.get(T1, {}).get('iSCSI alias') == 'one', nodes.get(T1))
        portals = {(p.get('Portal IP address'), p.get('Portal TCP/UDP port')): p for p in isnsadm(work, 'portals')}
        want = {(L, f'{port}/tcp') for port in (P + 1, P + 2, P + 3, P + 4)}
        check('every portal, the wildcard one as the address isertd reaches the server from',
              set(portals) == want, sorted(portals))
        check('each with the ESI port and interval',
              all(p.get('ESI port') == f'{ESI}/tcp' and p.get('ESI interval') == '2' for p in portals.values()),
              list(portals.values()))
        expect = {(T1, str(P + 1), L): 1, (T1, str(P + 2), L): 1, (T2, str(P + 3), L): 1, (T2, str(P + 4), L): 2}
        got = pgs(work)
        check('a portal group per target and portal with its TPG tag, none across targets', got == expect, got)
        q = isnsadm_query(work, f'eid={EID}')
        kinds = [k for k, _ in q]
        check('isnsadm --query eid=: the entity, 2 targets, 4 portals, 4 portal groups',
              kinds.count('Network Entity') == 1 and kinds.count('iSCSI Storage Node') == 2 and
              kinds.count('Portal') == 4 and kinds.count('iSCSI Portal Group') == 4, kinds)
        check('isnsadm --query eid=: its portal groups and tags',
              {(o.get('Portal group name'), o.get('Portal group port', '').split('/')[0], o.get('Portal group address')):
               int(o.get('Portal group tag', 0)) for k, o in q if k == 'iSCSI Portal Group'} == expect, q)
        st = rpc.call('isns.status').get('result', {})
        check('isns.status: configured, registered, the server, 2 targets, no failure',
              st.get('configured') and st.get('registered') and st.get('server') == f'{L}:{ISNS}' and
              st.get('targets') == 2 and st.get('failures') == 0 and st.get('last_error') is None and
              st.get('esi_port') == ESI and st.get('registered_age_s') is not None, st)
        cfg = rpc.call('config.get')['result']['config']['global'].get('isns')
        check('config.get shows global.isns', cfg and cfg['server'] == f'{L}:{ISNS}' and cfg['esi_port'] == ESI, cfg)

        # Live: a target added, a portal removed.
        second = [target(T1, [(1, [(L, P + 1)])], alias='one'), first[1], target(T3, [(3, [(L, P + 6)])])]
        ans = rpc.call('apply', {'config': config(second)})
        check('apply: a target added, a portal removed', 'result' in ans, ans)
        exp2 = {(T1, str(P + 1), L): 1, (T2, str(P + 3), L): 1, (T2, str(P + 4), L): 2, (T3, str(P + 6), L): 3}
        got, took = wait_for(lambda: pgs(work) == exp2 and pgs(work), 5)
        check(f'the server has the new target and not the removed portal ({took:.1f} s)', got == exp2, pgs(work))
        check('the removed portal is gone', (L, f'{P + 2}/tcp') not in
              {(p.get('Portal IP address'), p.get('Portal TCP/UDP port')) for p in isnsadm(work, 'portals')})

        # A server that answers garbage: logged with the reason, retried; isertd goes on.
        th = threading.Thread(target=hostile_server, args=(stop_hostile,), daemon=True)
        th.start()
        ans = rpc.call('global.set', {'isns': {'server': f'{L}:{HOSTILE}'}})
        check('global.set isns.server to another server', 'result' in ans, ans)
        log = os.path.join(work, 'isertd.log')
        text, took = wait_for(lambda: 'trying again' in open(log).read().split(f'{L}:{HOSTILE}', 1)[-1]
                              and open(log).read(), 6)
        tail = text.split(f'{L}:{HOSTILE}', 1)[-1] if text else ''
        check(f'the hostile answer is logged with its reason and retried ({took:.1f} s)',
              'only' in tail and 'trying again' in tail, tail[-600:])
        check('the entity left the first server when the configuration moved it',
              not [e for e in isnsadm(work, 'entities') if e.get('Entity identifier') == EID])
        check('isertd still answers', 'result' in rpc.call('config.get'))
        st = rpc.call('isns.status').get('result', {})
        check('isns.status: not registered, failures counted, the last error says why',
              st.get('configured') and not st.get('registered') and st.get('server') == f'{L}:{HOSTILE}' and
              st.get('failures', 0) >= 1 and 'only' in (st.get('last_error') or '') and
              st.get('last_error_age_s') is not None, st)
        ans = rpc.call('global.set', {'isns': {'server': f'{L}:{ISNS}'}})
        stop_hostile.set()
        got, took = wait_for(lambda: pgs(work) == exp2 and pgs(work), 5)
        check(f'back on isnsd: registered again ({took:.1f} s)', got == exp2, pgs(work))
        # The failures are forgotten when a check finds everything there: a third of the period (2 s here) at most.
        st, _ = wait_for(lambda: (lambda s: s.get('registered') and s.get('failures') == 0 and s)(
            rpc.call('isns.status').get('result', {})), 5)
        check('isns.status: registered again, failures back to 0 after a check, the last error kept with its age',
              st and st.get('failures') == 0 and st.get('last_error') and st.get('last_error_age_s') >= 0, st)

        # ESI: isnsd probes every 2 s and drops a portal after 2 unanswered tries; answered, they stay, with four
        # idle connections held to the ESI port from another address all the while (isertd has 4 slots).
        squat = {'opened': 0, 'closed': 0, 'now': 0}
        stop_squat = threading.Event()
        sq = threading.Thread(target=esi_squatter, args=(stop_squat, squat), daemon=True)
        sq.start()
        _, took = wait_for(lambda: squat['opened'] >= 4, 3)
        mark, log_mark = len(srv.text()), len(open(log).read())
        # Asked while 127.0.0.2 holds four, and again (as a server would) in case isnsd's own inquiries held
        # every slot at that moment.
        for _ in range(3):
            wait_for(lambda: squat['now'] == 4, 2)
            asked = esi_ask('127.0.0.3', EID)
            if asked:
                break
            time.sleep(0.3)
        time.sleep(6)
        stop_squat.set()
        sq.join(5)
        esi_log = srv.text()[mark:]
        check(f'four idle connections to the ESI port from 127.0.0.2 ({took:.1f} s), opened again as isertd closes them',
              squat['opened'] >= 4, squat)
        check('isnsd probed with ESI and got answers', esi_log.count('Good ESI response') >= 2, esi_log[-800:])
        check('no portal dropped for lack of an ESI answer', 'No ESI response' not in esi_log, esi_log[-800:])
        check('the portals outlived the ESI timeout', pgs(work) == exp2, pgs(work))
        check('an ESI from a third address (127.0.0.3) answered meanwhile, naming the entity',
              asked == (0x800d, 0x77, 0), asked)
        tail = open(log).read()[log_mark:]
        check("isertd closed 127.0.0.2's oldest for the server's and logged it",
              squat['closed'] >= 1 and 'closed for one from 127.0.0.1 (the server)' in tail, (squat, tail[-600:]))

        # isnsd restarted without its database: everything again, within the stated time.
        srv.stop()
        t_back = time.time()
        srv.start()
        got, took = wait_for(lambda: pgs(work) == exp2 and pgs(work), BACK_WITHIN)
        took = time.time() - t_back
        check(f'registered again within {BACK_WITHIN} s of the restart ({took:.1f} s)', got == exp2, pgs(work))

        # A discovery domain, joined and left live (its members see it: isnsadm as T1).
        ans = rpc.call('global.set', {'isns': {'discovery_domain': DD}})
        check('global.set isns.discovery_domain', 'result' in ans, ans)

        def dd_members():
            for d in isnsadm(work, 'dds', T1):
                if d.get('DD name') == DD:
                    m = d.get('DD member iSCSI name', [])
                    return sorted(m if isinstance(m, list) else [m])
            return None
        got, took = wait_for(lambda: dd_members() == sorted([T1, T2, T3]) and dd_members(), 5)
        check(f'the domain holds every target ({took:.1f} s)', got == sorted([T1, T2, T3]), dd_members())
        check('outside it, the targets are hidden from a node of the default domain', not pgs(work), pgs(work))
        ans = rpc.call('global.set', {'isns': {'discovery_domain': None}})
        # (open-isns keeps a node that was ever in a domain out of its default domain: not checked.)
        got, took = wait_for(lambda: dd_members() is None, 5)
        check(f'discovery_domain null: the targets left it ({took:.1f} s)', dd_members() is None, dd_members())
        ans = rpc.call('global.set', {'isns': None})
        st, _ = wait_for(lambda: (lambda s: s.get('configured') is False and s)(
            rpc.call('isns.status').get('result', {})), 5)
        check('global.set isns null: isns.status says not configured', st == {'configured': False}, st)
    finally:
        stop_hostile.set()
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            pass
        left = [e for e in isnsadm(work, 'entities') if e.get('Entity identifier') == EID]
        check('SIGTERM: the entity deregistered', not left, left)
        log = open(os.path.join(work, 'isertd.log')).read()
        check('isertd logged the deregistration', 'deregistered' in log, log[-1500:])
        srv.stop()
        if checks.failed:
            print(srv.text()[-2000:])
        end_isertd(proc, work)
        print(f'# {time.time() - t_start:.1f} s')
    checks.finish()


if __name__ == '__main__':
    main()
