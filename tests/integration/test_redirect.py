#!/usr/bin/env python3
"""Login redirection (RFC 7143 sec. 11.13.5; docs/config.md, "redirect"):
a TPG's `redirect` answers a normal login with status 0101 (or 0102 when
permanent) and TargetAddress, and the connection closes; a login arriving at
the redirect address itself is taken; an initiator the ACLs refuse learns
nothing; discovery is never redirected and lists the TPG's own portals, or
the new address once the move is permanent.  Where the ACL requires CHAP
the redirection waits for it: no secret or a wrong one gets 0201 and no
address, the right one is redirected as the security stage ends (libiscsi
and iseradm follow it with CHAP).  libiscsi (iscsi-inq), our
initiator library (iseradm) and iserctl set/null live; libiscsi 1.19
follows a temporary redirection (0101) but not a permanent one (0102),
which iseradm follows; redirect_balance
spreads new sessions over the TPG's portals by their session counts; a
redirection loop ends in our initiator with a clear error; bad values are
refused naming the key.  (open-iscsi follows redirects in the guest:
tests/vm/t-isertd-tcp.sh.)

usage: test_redirect.py ISERTD ISERCTL ISERADM [PORT]   (ports PORT..PORT+4)"""
import json
import os
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import iscsi_client as ic  # noqa: E402
import checks  # noqa: E402
from admin_rpc import Rpc, start_isertd, end_isertd  # noqa: E402
from checks import check  # noqa: E402

ISERTD, ISERCTL, ISERADM = sys.argv[1], sys.argv[2], sys.argv[3]
P = int(sys.argv[4]) if len(sys.argv) > 4 else 3590
T1 = 'iqn.2026-11.org.isert:redirect'
T2 = 'iqn.2026-11.org.isert:balance'
T3 = 'iqn.2026-11.org.isert:loop'
T4 = 'iqn.2026-11.org.isert:chap-redirect'
T5 = 'iqn.2026-11.org.isert:chap-balance'
INI = 'iqn.2026-11.org.test:redirect'
CHAP_USER, CHAP_SECRET = 'redir-user', 'Redirect-secret-0123'
L = '127.0.0.1'


def portal(port):
    return {'ip': L, 'port': port}


def tpg(tag, ports, **extra):
    g = {'tag': tag, 'portals': [portal(p) for p in ports], 'luns': [{'lun': 0, 'backstore': 'r0'}],
         'acls': [{'initiator': INI, 'mapped_luns': [{'mapped_lun': 0, 'tpg_lun': 0}]}]}
    g.update(extra)
    return g


def chap_acls():
    return [{'initiator': INI, 'mapped_luns': [{'mapped_lun': 0, 'tpg_lun': 0}],
             'chap': {'userid': CHAP_USER, 'password': CHAP_SECRET}}]


def config(t1_extra=None):
    return {'backstores': [{'name': 'r0', 'type': 'ram', 'size': '4M'}],
            'targets': [
                # P: the "front door" sent to P+1 (a gateway being drained, in one process)
                {'iqn': T1, 'tpgs': [tpg(1, [P, P + 1], **(t1_extra or {'redirect': f'{L}:{P + 1}'}))]},
                {'iqn': T2, 'tpgs': [tpg(1, [P + 2, P + 3], redirect_balance=[f'{L}:{P + 2}', f'{L}:{P + 3}'])]},
                # two TPGs of one target sending logins to each other
                {'iqn': T3, 'tpgs': [tpg(1, [P + 4], redirect=f'{L}:{P + 3}'),
                                     tpg(2, [P + 3], redirect=f'{L}:{P + 4}')]},
                # the same two kinds of redirection behind an ACL that requires CHAP
                {'iqn': T4, 'tpgs': [tpg(1, [P + 4, P + 1], redirect=f'{L}:{P + 1}', acls=chap_acls())]},
                {'iqn': T5, 'tpgs': [tpg(1, [P + 2, P + 3], redirect_balance=[f'{L}:{P + 2}', f'{L}:{P + 3}'],
                                         acls=chap_acls())]}]}


def first_login(port, target, ini=INI):
    """The answer to a first Login Request: (status, keys, closed afterwards)."""
    c = ic.Conn(port)
    keys = {'InitiatorName': ini, 'SessionType': 'Normal', 'AuthMethod': 'None', 'TargetName': target}
    st, _, rk = c.login_pdu(0, 1, True, ic.kv(keys))
    closed = c.closed() if st else None
    c.close()
    return st, rk, closed


def chap_login(port, target, secret):
    """A login offering CHAP only, as far as the target lets it go: (status, keys of the last answer,
    closed afterwards).  secret None: the initiator has none and offers AuthMethod=None."""
    c = ic.Conn(port)
    base = {'InitiatorName': INI, 'SessionType': 'Normal', 'TargetName': target,
            'AuthMethod': 'CHAP' if secret else 'None'}
    st, _, rk = c.login_pdu(0, 1, True, ic.kv(base))
    if not st and secret:
        st, _, rk = c.login_pdu(0, 1, False, ic.kv({'CHAP_A': '7'}))
    if not st and secret:
        resp = ic.HASHES[int(rk['CHAP_A'])](bytes([int(rk['CHAP_I'])]) + secret.encode() +
                                            bytes.fromhex(rk['CHAP_C'][2:])).hexdigest()
        st, _, rk = c.login_pdu(0, 1, True, ic.kv({'CHAP_N': CHAP_USER, 'CHAP_R': '0x' + resp}))
    closed = c.closed() if st else None
    c.close()
    return st, rk, closed


def chap_checks(rpc, wrong):
    """Finding 5: the redirection is told only to an initiator that passed CHAP."""
    st, rk, closed = chap_login(P + 4, T4, None)
    check('CHAP required, redirecting TPG: no secret gets 0201 and no TargetAddress',
          st == 0x0201 and 'TargetAddress' not in rk and closed, (hex(st), rk, closed))
    st, rk, closed = chap_login(P + 4, T4, wrong)
    check('... a wrong secret gets 0201 and no TargetAddress',
          st == 0x0201 and 'TargetAddress' not in rk and closed, (hex(st), rk, closed))
    st, rk, closed = chap_login(P + 4, T4, CHAP_SECRET)
    check('... the right secret is redirected as the security stage ends (0101, TargetAddress)',
          st == 0x0101 and rk.get('TargetAddress') == f'{L}:{P + 1}' and closed, (hex(st), rk, closed))
    c = ic.Conn(P + 1)
    st = c.login(INI, T4, chap=(CHAP_USER, CHAP_SECRET))
    c.close()
    check('... and logs in with it where it was sent', st == 0, hex(st))
    before = portal_logins(rpc, P + 4)
    r = run(ISERADM, '--initiator-name', INI, '--user', CHAP_USER, '--password', CHAP_SECRET, 'inq',
            f'iscsi://{L}:{P + 4}/{T4}/0')
    after = portal_logins(rpc, P + 4)
    check('our initiator (iseradm inq --user --password) passes CHAP, follows the redirection and reads INQUIRY',
          r.returncode == 0 and 'ISERT' in r.stdout.upper() and
          after.get('redirected') == before.get('redirected', 0) + 1, (r.stdout + r.stderr, before, after))
    # libiscsi (1.19, and its master of 2026-06) keeps its login phase across the reconnection a
    # redirection makes, so after CHAP its next login starts mid-CHAP without an InitiatorName
    # (docs/config.md says so).  Should it learn to start afresh, this fails: update the docs.
    before = portal_logins(rpc, P + 4)
    r = run('iscsi-inq', '-i', INI, f'iscsi://{CHAP_USER}%{CHAP_SECRET}@{L}:{P + 4}/{T4}/0')
    after = portal_logins(rpc, P + 4)
    check('libiscsi (iscsi-inq, CHAP in the URL) is redirected after CHAP, and its next login lacks InitiatorName',
          r.returncode != 0 and 'Missing parameter' in r.stderr and
          after.get('redirected') == before.get('redirected', 0) + 1, (r.stdout + r.stderr, before, after))
    before = portal_logins(rpc, P + 4)
    r = run('iscsi-inq', '-i', INI, f'iscsi://{CHAP_USER}%{wrong}@{L}:{P + 4}/{T4}/0')
    after = portal_logins(rpc, P + 4)
    check('libiscsi with a wrong secret fails at the front portal, not redirected',
          r.returncode != 0 and after.get('redirected') == before.get('redirected', 0), (r.stderr, before, after))


def session(port, target):
    c = ic.Conn(port)
    st = c.login(INI, target)
    return c, st


def portal_logins(rpc, port):
    for p in rpc.call('stats', {'sections': ['portals']})['result']['portals']:
        if p['portal'] == f'{L}:{port}':
            return p['logins']
    return {}


def run(*cmd):
    return subprocess.run(list(cmd), capture_output=True, text=True, timeout=60)


def refusals(work):
    cfgfile = os.path.join(work, 'bad.json')
    t1 = {'redirect': f'{L}:{P + 1}'}
    bad = [({'redirect': 'gateway-b'}, 'redirect', 'numeric'),
           ({'redirect': '0.0.0.0:3260'}, 'redirect', 'wildcard'),
           ({'redirect': f'{L}:70000'}, 'redirect', 'IP[:PORT]'),
           ({**t1, 'redirect_type': 'sometimes'}, 'redirect_type', 'temporary'),
           ({'redirect_type': 'permanent'}, 'redirect_type', 'not set'),
           ({'redirect_balance': [f'{L}:{P + 3}']}, 'redirect_balance[0]', "not one of this TPG's portals"),
           ({'redirect_balance': [f'{L}:{P}', f'{L}:{P}']}, 'redirect_balance[1]', 'twice'),
           ({**t1, 'redirect_balance': [f'{L}:{P}']}, 'redirect_balance', 'not both'),
           ({'redirect_balance': f'{L}:{P}'}, 'redirect_balance', 'array')]
    for extra, key, words in bad:
        with open(cfgfile, 'w') as f:
            json.dump(config(extra), f)
        r = run(ISERTD, '--check', '-c', cfgfile)
        check(f'--check refuses {extra}: names {key} ({r.stderr.strip()[:110]})',
              r.returncode != 0 and key in r.stderr and words in r.stderr, r.stderr)


def main():
    work = checks.workdir('isert-redirect-')
    refusals(work)
    cfgfile = os.path.join(work, 'isertd.json')
    with open(cfgfile, 'w') as f:
        json.dump(config(), f)
    proc, sock = start_isertd(ISERTD, work, cfgfile)
    rpc = Rpc(sock)
    held = []
    try:
        # The wire: 0101 with TargetAddress and no tag, then the close.
        st, rk, closed = first_login(P, T1)
        check('a login at the front portal: status 0101 (moved temporarily)', st == 0x0101, hex(st))
        check('TargetAddress is the redirect address, without a portal group tag',
              rk.get('TargetAddress') == f'{L}:{P + 1}', rk)
        check('the target closes the connection after the redirection', closed, closed)
        st, rk, _ = first_login(P, T1, 'iqn.2026-11.org.test:stranger')
        check('an initiator without an ACL is refused (0202), not told where to go',
              st == 0x0202 and 'TargetAddress' not in rk, (hex(st), rk))
        c, st = session(P + 1, T1)
        check('a login arriving at the redirect address is taken (no loop)', st == 0, hex(st))
        c.close()
        d = ic.Conn(P)
        check('a discovery session at the front portal is not redirected', d.login(INI, discovery=True) == 0)
        lines = d.send_targets()
        d.close()
        check('SendTargets (temporary): the TPG\'s own portals',
              f'TargetAddress={L}:{P},1' in lines and f'TargetAddress={L}:{P + 1},1' in lines, lines)

        # Peers follow it: libiscsi, our initiator library.
        before = portal_logins(rpc, P)
        r = run('iscsi-inq', '-i', INI, f'iscsi://{L}:{P}/{T1}/0')
        check('libiscsi (iscsi-inq) at the front portal is redirected and reads INQUIRY',
              r.returncode == 0 and 'ISERT' in r.stdout.upper(), r.stdout + r.stderr)
        after = portal_logins(rpc, P)
        check('stats: the front portal counts the redirection, accepts nothing',
              after.get('redirected') == before.get('redirected', 0) + 1 and
              after.get('accepted') == before.get('accepted'), (before, after))
        r = run(ISERADM, '--initiator-name', INI, 'inq', f'iscsi://{L}:{P}/{T1}/0')
        check('our initiator (iseradm inq) follows the redirection', r.returncode == 0, r.stdout + r.stderr)
        wrong = 'Wrong-secret-0123456'
        chap_checks(rpc, wrong)

        # Live: permanent, through iserctl; then null takes it away.
        r = run(ISERCTL, '-s', sock, 'set', f'/iscsi/{T1}/tpg1', 'redirect_type=permanent')
        check('iserctl set redirect_type=permanent', r.returncode == 0, r.stdout + r.stderr)
        r = run(ISERCTL, '-s', sock, 'ls')
        check('iserctl ls shows the redirection on the TPG',
              f'tpg1 [enabled, redirect permanent {L}:{P + 1}, ' in r.stdout and 'redirect_balance over 2 portals' in r.stdout,
              r.stdout)
        st, rk, _ = first_login(P, T1)
        check('then: status 0102 (moved permanently)', st == 0x0102 and rk.get('TargetAddress') == f'{L}:{P + 1}',
              (hex(st), rk))
        # libiscsi 1.19 (Debian 12's) follows status 0101 only: its login compares the status with
        # SCSI_STATUS_REDIRECT (0x101) and takes 0102 for a refused login (docs/config.md says so).
        r = run('iscsi-inq', '-i', INI, f'iscsi://{L}:{P}/{T1}/0')
        check('libiscsi (iscsi-inq) does not follow a permanent redirection: "Target moved permanently(258)"',
              r.returncode != 0 and 'Target moved permanently(258)' in r.stdout + r.stderr, r.stdout + r.stderr)
        r = run(ISERADM, '--initiator-name', INI, 'inq', f'iscsi://{L}:{P}/{T1}/0')
        check('our initiator (iseradm inq) follows it', r.returncode == 0, r.stdout + r.stderr)
        d = ic.Conn(P)
        d.login(INI, discovery=True)
        lines = d.send_targets()
        d.close()
        check('SendTargets (permanent): only the new address',
              [x for x in lines if x.startswith('TargetAddress') and T1 in ''.join(lines)][:1] ==
              [f'TargetAddress={L}:{P + 1},1'] and f'TargetAddress={L}:{P},1' not in lines, lines)
        r = run(ISERCTL, '-s', sock, 'set', f'/iscsi/{T1}/tpg1', 'redirect=null')
        check('iserctl set redirect=null (its redirect_type goes with it)', r.returncode == 0, r.stdout + r.stderr)
        c, st = session(P, T1)
        check('then the front portal takes the login itself', st == 0, hex(st))
        c.close()
        saved = rpc.call('config.get')['result']['config']['targets'][0]['tpgs'][0]
        check('and the configuration has no redirect left', 'redirect' not in saved and 'redirect_type' not in saved,
              saved)
        r = run(ISERCTL, '-s', sock, 'set', f'/iscsi/{T1}/tpg1', 'redirect=[::1:3260')
        check('iserctl set redirect=[::1:3260 is refused naming redirect',
              r.returncode != 0 and 'redirect' in r.stderr, r.stdout + r.stderr)

        # Balance: the portal with the fewest sessions of the list.
        c, st = session(P + 2, T2)
        held.append(c)
        check('balance: the first login stays where it arrived (both portals empty)', st == 0, hex(st))
        st, rk, _ = first_login(P + 2, T2)
        check('balance: the next login there goes to the emptier portal',
              st == 0x0101 and rk.get('TargetAddress') == f'{L}:{P + 3}', (hex(st), rk))
        c, st = session(P + 3, T2)
        held.append(c)
        check('balance: it is taken there', st == 0, hex(st))
        c, st = session(P + 2, T2)
        held.append(c)
        check('balance: with one session each, a login stays where it arrived', st == 0, hex(st))
        st, rk, _ = first_login(P + 2, T2)
        check('balance: 2 to 1, the next goes to the other portal again',
              st == 0x0101 and rk.get('TargetAddress') == f'{L}:{P + 3}', (hex(st), rk))
        st, rk, _ = chap_login(P + 2, T5, None)
        check('balance behind CHAP: no secret gets 0201, not the least loaded portal',
              st == 0x0201 and 'TargetAddress' not in rk, (hex(st), rk))
        st, rk, _ = chap_login(P + 2, T5, wrong)
        check('balance behind CHAP: a wrong secret gets 0201, not the least loaded portal',
              st == 0x0201 and 'TargetAddress' not in rk, (hex(st), rk))
        st, rk, _ = chap_login(P + 2, T5, CHAP_SECRET)
        check('balance behind CHAP: the right secret goes to the emptier portal',
              st == 0x0101 and rk.get('TargetAddress') == f'{L}:{P + 3}', (hex(st), rk))

        # A loop between two TPGs: our initiator gives up after a bounded number of hops.
        r = run(ISERADM, '--initiator-name', INI, 'inq', f'iscsi://{L}:{P + 4}/{T3}/0')
        check('a redirection loop: iseradm fails saying so', r.returncode != 0 and 'redirections' in r.stderr,
              r.stdout + r.stderr)
    finally:
        for c in held:
            c.close()
        end_isertd(proc, work)
    checks.finish()


if __name__ == '__main__':
    main()
