#!/usr/bin/env python3
"""Secrets and peer strings in what isertd prints, logs and answers
(docs/security.md, "Secrets" and "Logs").

CHAP secrets go through every way the admin socket takes them (acl.add,
acl.set, discovery.set, tpg.set demo_chap, an inline apply document, a
refused change, a dry-run plan) and none of them may appear in isertd's log,
in a plan, an error, config.get, iserctl config or --print-config; only
config.get show_secrets (iserctl config --show-secrets, isertd
--print-config --show-secrets) shows them.  Secrets kept in files
(password_file, a systemd credential) work for logins, are refused when
others can read them, and stay files when the configuration is saved; a
configuration file holding a secret that others may read gets the same
warning from --check as at start-up.
Initiator names with a newline, CR, ESC and invalid UTF-8 never start a
log line of their own or reach it raw.  What isertd no longer needs of a
secret is wiped: its memory (/proc/PID/mem) holds no secret file's read
buffer, no configuration text and no answered admin request with a secret
in it (json-c's own copies are another matter: docs/security.md); and
isertd is not dumpable (no core, no ptrace by its own uid) unless started
with --core-dumps.

usage: test_secrets.py ISERTD ISERCTL [PORT]"""
import json
import os
import shutil
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import iscsi_client as ic  # noqa: E402
import checks  # noqa: E402
from admin_rpc import Rpc, start_isertd, stop_isertd  # noqa: E402
from checks import check  # noqa: E402

ISERTD, ISERCTL = sys.argv[1], sys.argv[2]
PORT = int(sys.argv[3]) if len(sys.argv) > 3 else 3560
T1, T2 = 'iqn.2026-11.org.isert:sec1', 'iqn.2026-11.org.isert:sec2'
INI = 'iqn.2026-11.org.test:chap'
MASK = '********'
# Every secret this test hands isertd; none may come back but where asked for.
S = {k: f'Secret-{k}-0123456789' for k in ('file0', 'file1', 'acladd', 'aclmut', 'aclset', 'disc', 'demo',
                                             'inline', 'refused', 'plan', 'cred', 'rotated', 'cfginline')}


def iserctl(sock, *args):
    p = subprocess.run([ISERCTL, '-s', sock, *args], capture_output=True, text=True, timeout=30)
    return p.returncode, p.stdout, p.stderr


def leaked(text, allowed=()):
    return [k for k, v in S.items() if v in text and k not in allowed]


def memory_finds(pid, needles):
    """Which of needles (bytes) are in the writable memory of process pid (/proc/PID/mem, as root): its heap,
    stacks, data and anonymous mappings, where a secret's copies are; mappings over 4 GiB are a sanitizer's
    shadow, not isertd's data."""
    found = set()
    keep = max(len(n) for n in needles) - 1
    with open(f'/proc/{pid}/maps') as f:
        maps = [line.split() for line in f]
    with open(f'/proc/{pid}/mem', 'rb', 0) as mem:
        for m in maps:
            lo, hi = (int(x, 16) for x in m[0].split('-'))
            if 'rw' not in m[1] or hi - lo > 1 << 32 or (len(m) > 5 and m[5] in ('[vvar]', '[vsyscall]')):
                continue
            tail = b''
            for at in range(lo, hi, 1 << 24):
                try:
                    mem.seek(at)
                    chunk = tail + mem.read(min(1 << 24, hi - at))
                except OSError:
                    tail = b''
                    continue
                found.update(n for n in needles if n in chunk)
                tail = chunk[-keep:]
    return found


def held(pid, forms):
    """The names of forms ({name: bytes}) found in pid's memory."""
    found = memory_finds(pid, list(forms.values()))
    return sorted(k for k, v in forms.items() if v in found)


def file_form(k):
    return S[k].encode() + b'\n'    # as its file holds it: only the file's read buffer has the newline


# The texts this test writes (the configuration file, admin requests) put a space before each colon, which
# json-c never writes: a secret in this form can only be in a buffer that held one of those texts.
SEP = (', ', ' : ')


def text_form(k):
    return b' : "' + S[k].encode() + b'"'


def write_secret(path, secret, mode=0o600):
    with open(path, 'w') as f:
        f.write(secret + '\n')
    os.chmod(path, mode)


def config(work):
    return {
        'backstores': [{'name': 'r0', 'type': 'ram', 'size': '8M'}],
        'targets': [
            {'iqn': T1, 'tpgs': [{'tag': 1, 'portals': [{'ip': '127.0.0.1', 'port': PORT}],
                                  'luns': [{'lun': 0, 'backstore': 'r0'}],
                                  'acls': [{'initiator': INI, 'chap': {
                                      'userid': 'u0', 'password_file': os.path.join(work, 'acl.secret')}}]}]},
            {'iqn': T2, 'tpgs': [{'tag': 1, 'demo_mode': True, 'portals': [{'ip': '127.0.0.1', 'port': PORT}],
                                  'luns': [{'lun': 0, 'backstore': 'r0'}]}]},
        ],
        # inline: the configuration's text holds it
        'discovery': {'chap': {'userid': 'd0', 'password': S['cfginline']}},
    }


def check_config_files(work):
    """The loader's rules for secrets kept in files, through isertd --check."""
    def run(doc, env=None):
        path = os.path.join(work, 'check.json')
        with open(path, 'w') as f:
            json.dump(doc, f)
        p = subprocess.run([ISERTD, '--check', '-c', path], capture_output=True, text=True, timeout=30,
                           env=env)
        return p.returncode, p.stdout + p.stderr

    def with_chap(chap):
        doc = config(work)
        doc['targets'][0]['tpgs'][0]['acls'][0]['chap'] = chap
        return doc

    loose = os.path.join(work, 'loose.secret')
    write_secret(loose, S['file1'], 0o644)
    rc, out = run(with_chap({'userid': 'u0', 'password_file': loose}))
    check('a password_file others can read is refused, naming the field and what to do',
          rc != 0 and 'acls[0].chap.password_file' in out and 'chmod 600' in out and not leaked(out), out)
    os.chmod(loose, 0o640)
    rc, out = run(with_chap({'userid': 'u0', 'password_file': loose}))
    check('... and one its group can read', rc != 0 and 'its group' in out, out)
    short = os.path.join(work, 'short.secret')
    write_secret(short, 'tooshort')
    rc, out = run(with_chap({'userid': 'u0', 'password_file': short}))
    check('a password_file with a secret under 12 characters is refused',
          rc != 0 and 'password_file' in out and 'at least 12' in out and 'tooshort' not in out, out)
    rc, out = run(with_chap({'userid': 'u0', 'password': S['refused'], 'password_file': loose}))
    check('password and password_file together are refused', rc != 0 and 'not both' in out and not leaked(out), out)
    rc, out = run(with_chap({'userid': 'u0', 'password': MASK}))
    check('the mask where a secret belongs is refused, saying what it is',
          rc != 0 and 'mask' in out and '--show-secrets' in out, out)
    rc, out = run(with_chap({'userid': 'u0', 'password': [S['refused']]}))
    check('a secret of the wrong type: the error does not echo it',
          rc != 0 and 'acls[0].chap.password' in out and not leaked(out), out)
    rc, out = run(with_chap(S['refused']))
    check('a chap that is a string: the error does not echo it',
          rc != 0 and 'must be an object' in out and not leaked(out), out)
    rc, out = run(with_chap({'userid': 'u0', 'password_file': 'isertd-acl'}), env={'PATH': os.environ['PATH']})
    check('a credential name without $CREDENTIALS_DIRECTORY is refused, naming LoadCredential=',
          rc != 0 and 'CREDENTIALS_DIRECTORY' in out and 'LoadCredential=isertd-acl:' in out, out)
    # The configuration itself holding a secret (discovery's, inline): start-up warns when others or its
    # group may read it, and --check says the same on stderr, still valid (a warning is not an error).
    path = os.path.join(work, 'loose.json')
    with open(path, 'w') as f:
        json.dump(config(work), f)
    for mode, who in ((0o644, 'group and others'), (0o604, 'others'), (0o640, 'its group')):
        os.chmod(path, mode)
        p = subprocess.run([ISERTD, '--check', '-c', path], capture_output=True, text=True, timeout=30)
        check(f'--check of a configuration holding a secret, mode {mode:04o}: valid, and warns as start-up does',
              p.returncode == 0 and 'configuration is valid' in p.stdout and
              f'{path} holds CHAP secrets and is readable by {who}: chmod 600 it' in p.stderr and
              not leaked(p.stdout + p.stderr), (p.returncode, p.stdout, p.stderr))
    os.chmod(path, 0o600)
    p = subprocess.run([ISERTD, '--check', '-c', path], capture_output=True, text=True, timeout=30)
    check('... and mode 0600: no warning', p.returncode == 0 and 'readable by' not in p.stderr, p.stderr)


def dumpable_checks():
    """isertd run as nobody: not dumpable, the kernel gives its /proc/PID files to root and another process of
    its uid cannot read its memory; with --core-dumps it can (as before isertd made itself not dumpable)."""
    nobody = 65534
    work = checks.workdir('isert-nobody-')
    os.chown(work, nobody, nobody)
    cfgfile = os.path.join(work, 'isertd.json')
    with open(cfgfile, 'w') as f:
        json.dump({'backstores': [{'name': 'r0', 'type': 'ram', 'size': '4M'}],
                   'targets': [{'iqn': T1, 'tpgs': [{'tag': 1, 'demo_mode': True,
                                                     'portals': [{'ip': '127.0.0.1', 'port': PORT + 1}],
                                                     'luns': [{'lun': 0, 'backstore': 'r0'}]}]}]}, f)
    os.chown(cfgfile, nobody, nobody)
    as_nobody = ['setpriv', f'--reuid={nobody}', f'--regid={nobody}', '--clear-groups']
    for extra, dumpable in (([], False), (['--core-dumps'], True)):
        proc, _ = start_isertd(ISERTD, work, cfgfile, '-r', '1', *extra, admin='none', state='none',
                               log=subprocess.DEVNULL, stderr=subprocess.PIPE, prefix=as_nobody, ready=PORT + 1)
        owner = os.stat(f'/proc/{proc.pid}/mem').st_uid
        peek = subprocess.run(as_nobody + [sys.executable, '-c', f'open("/proc/{proc.pid}/mem", "rb")'],
                              capture_output=True, text=True, timeout=30)
        rc = stop_isertd(proc)
        err = proc.stderr.read().decode()
        proc.stderr.close()
        if dumpable:
            check('isertd --core-dumps (as nobody): dumpable, its uid may read its memory',
                  rc == 0 and owner == nobody and peek.returncode == 0, (rc, owner, peek.stderr[-200:], err[-300:]))
        else:
            check('isertd (as nobody): not dumpable (what keeps it from leaving a core): /proc/PID/mem is root\'s, '
                  'and its own uid cannot read its memory', rc == 0 and owner == 0 and 'PermissionError' in peek.stderr,
                  (rc, owner, peek.stderr[-200:], err[-300:]))
    shutil.rmtree(work, ignore_errors=True)


def main():
    dumpable_checks()
    work = checks.workdir('isert-secrets-')
    cfgfile = os.path.join(work, 'isertd.json')
    creds = os.path.join(work, 'credentials')
    os.mkdir(creds, 0o700)
    write_secret(os.path.join(work, 'acl.secret'), S['file0'])
    write_secret(os.path.join(creds, 'isertd-disc'), S['cred'], 0o400)
    with open(cfgfile, 'w') as f:
        json.dump(config(work), f, separators=SEP)
    os.chmod(cfgfile, 0o600)
    check_config_files(work)

    logpath = os.path.join(work, 'isertd.log')
    env = dict(os.environ, CREDENTIALS_DIRECTORY=creds)
    proc, sock = start_isertd(ISERTD, work, cfgfile, '-r', '2', env=env)
    try:
        rpc = Rpc(sock, separators=SEP)

        # A secret from a file is the one the login is checked against.
        c = ic.Conn(PORT)
        check('CHAP with the secret from password_file logs in', c.login(INI, T1, chap=('u0', S['file0'])) == 0)
        c.close()
        c = ic.Conn(PORT)
        check('... and another secret is refused', c.login(INI, T1, chap=('u0', S['file1'])) != 0)
        c.close()
        c = ic.Conn(PORT)
        check('discovery CHAP with the secret inline in the configuration',
              c.login('iqn.2026-11.org.test:d', discovery=True, chap=('d0', S['cfginline'])) == 0)
        c.close()
        # Loaded: the CHAP code holds each secret; the file's buffer and the configuration's text are gone.
        left = held(proc.pid, {'password_file buffer': file_form('file0'), 'configuration text': text_form('cfginline')})
        check('after the load: no secret file buffer and no configuration text with a secret in isertd\'s memory',
              not left, left)

        # Every way a secret reaches the admin socket.
        acl2 = 'iqn.2026-11.org.test:chap2'
        r = rpc.call('acl.add', {'target': T1, 'tag': 1, 'initiator': acl2,
                                 'chap': {'userid': 'u2', 'password': S['acladd'], 'mutual_userid': 'tgt',
                                          'mutual_password': S['aclmut']}})
        check('acl.add with one-way and mutual CHAP', 'result' in r and not leaked(json.dumps(r)), json.dumps(r))
        left = held(proc.pid, {k: text_form(k) for k in ('acladd', 'aclmut')})
        check('... once answered, its request text is not in isertd\'s memory', not left, left)
        r = rpc.call('acl.set', {'target': T1, 'tag': 1, 'initiator': acl2,
                                 'chap': {'userid': 'u2', 'password': S['aclset']}})
        check('acl.set with a new secret', 'result' in r and not leaked(json.dumps(r)), json.dumps(r))
        r = rpc.call('acl.set', {'target': T1, 'tag': 1, 'initiator': acl2, 'chap': S['refused']})
        check('acl.set with a chap that is a string: refused, the answer does not echo it',
              'error' in r and not leaked(json.dumps(r)), json.dumps(r))
        r = rpc.call('discovery.set', {'chap': {'userid': 'd', 'password': S['disc']}})
        check('discovery.set with CHAP', 'result' in r and not leaked(json.dumps(r)), json.dumps(r))
        r = rpc.call('tpg.set', {'target': T2, 'tag': 1, 'demo_chap': {'userid': 'demo', 'password': S['demo']}})
        check('tpg.set demo_chap: the plan masks it',
              'result' in r and MASK in json.dumps(r) and not leaked(json.dumps(r)), json.dumps(r))
        c = ic.Conn(PORT)
        check('the demo CHAP set live takes logins', c.login('iqn.2026-11.org.test:demo', T2,
                                                             chap=('demo', S['demo'])) == 0)
        c.close()
        doc = rpc.call('config.get', {'show_secrets': True})['result']['config']
        doc['targets'][0]['tpgs'][0]['acls'][1]['chap']['password'] = S['inline']
        r = rpc.call('apply', {'config': doc, 'dry_run': True})
        check('apply of an inline document, dry run: the plan shows the secret changed, masked',
              {'op': 'set', 'path': f'/iscsi/{T1}/tpg1/acls/{acl2}/chap/password', 'value': MASK}
              in r.get('result', {}).get('plan', []) and not leaked(json.dumps(r)), json.dumps(r))
        r = rpc.call('apply', {'config': doc})
        check('apply of an inline document', 'result' in r and not leaked(json.dumps(r)), json.dumps(r))
        rc, out, err = iserctl(sock, '--dry-run', 'set', f'/iscsi/{T1}/tpg1/acls/{INI}', 'chap.userid=u9',
                               f'chap.password={S["plan"]}')
        check('iserctl set --dry-run of a new chap: the plan masks the secret',
              rc == 0 and MASK in out and not leaked(out + err), out + err)
        rc, out, err = iserctl(sock, '--json', '--dry-run', 'set', f'/iscsi/{T2}/tpg1',
                               f'demo_chap.userid=x', f'demo_chap.password={S["plan"]}')
        check('... and as JSON', rc == 0 and not leaked(out + err), out + err)

        # Reading the configuration back.
        got = rpc.call('config.get')['result']['config']
        text = json.dumps(got)
        acls = {a['initiator']: a for a in got['targets'][0]['tpgs'][0]['acls']}
        check('config.get masks every secret', not leaked(text) and acls[acl2]['chap']['password'] == MASK and
              got['discovery']['chap']['password'] == MASK and
              got['targets'][1]['tpgs'][0]['demo_chap']['password'] == MASK, text)
        check('... and shows where a secret is kept in a file',
              got['targets'][0]['tpgs'][0]['acls'][0]['chap'] ==
              {'userid': 'u0', 'password_file': os.path.join(work, 'acl.secret')}, json.dumps(got))
        rc, out, _ = iserctl(sock, 'config')
        check('iserctl config masks them', rc == 0 and not leaked(out) and MASK in out, out)
        rc, out, _ = iserctl(sock, 'config', '--show-secrets')
        check('iserctl config --show-secrets shows them (root)',
              rc == 0 and S['inline'] in out and S['disc'] in out and S['demo'] in out, out)
        rc, out, _ = iserctl(sock, '--json', 'ls')
        check('iserctl --json ls masks them', rc == 0 and not leaked(out), out)
        # A systemd credential (relative name, $CREDENTIALS_DIRECTORY) for discovery.
        r = rpc.call('discovery.set', {'chap': {'userid': 'd', 'password_file': 'isertd-disc'}})
        check('discovery.set with a credential name', 'result' in r, json.dumps(r))
        c = ic.Conn(PORT)
        check('a discovery login with the credential\'s secret',
              c.login('iqn.2026-11.org.test:d', discovery=True, chap=('d', S['cred'])) == 0)
        c.close()
        # save keeps file-kept secrets as files (and inline ones inline: the file is 0600).
        r = rpc.call('save')
        saved = json.load(open(cfgfile))
        check('save writes password_file and the credential name, not the secrets read from them',
              'result' in r and saved['discovery']['chap'] == {'userid': 'd', 'password_file': 'isertd-disc'} and
              S['file0'] not in json.dumps(saved) and S['cred'] not in json.dumps(saved) and
              S['inline'] in json.dumps(saved), json.dumps(saved))
        # Rotating a file-kept secret: apply of the same file sees the change, masked.
        write_secret(os.path.join(work, 'acl.secret'), S['rotated'])
        r = rpc.call('apply', {'path': cfgfile})
        check('apply after the secret file changed: the plan is that one secret, masked',
              r.get('result', {}).get('plan') ==
              [{'op': 'set', 'path': f'/iscsi/{T1}/tpg1/acls/{INI}/chap/password', 'value': MASK}],
              json.dumps(r))
        c = ic.Conn(PORT)
        check('... and logins use the new secret', c.login(INI, T1, chap=('u0', S['rotated'])) == 0)
        c.close()
        # Every request that carried a secret, and every secret file read, has been wiped.
        forms = {f'{k} in a request': text_form(k) for k in ('acladd', 'aclmut', 'aclset', 'refused', 'disc', 'demo',
                                                             'inline')}
        forms.update({f'{k} file buffer': file_form(k) for k in ('file0', 'cred', 'rotated')})
        left = held(proc.pid, forms)
        check('after the admin changes, save and apply: no request with a secret, no secret file buffer in '
              'isertd\'s memory', not left, left)

        # Hostile initiator names: nothing they carry starts or colours a log line.
        hostile = [b'iqn.2026-11.org.test:a\nisert error: forged line',
                   b'iqn.2026-11.org.test:b\risert error: forged cr',
                   b'iqn.2026-11.org.test:c\x1b[31mred\x1b[0m',
                   b'iqn.2026-11.org.test:d\xc3\x28\xff']
        conns = []
        for name in hostile:
            c = ic.Conn(PORT)
            st = c.login(name, T2, chap=('demo', S['demo']))
            conns.append(c)
            check(f'a demo login named {name!r}', st == 0, f'{st:#x}')
        r = rpc.call('lun.add', {'target': T2, 'tag': 1, 'backstore': 'r0', 'lun': 1, 'read_only': True})
        check('lun.add to their target (each session logs its LUN map change)', 'result' in r, json.dumps(r))
        for s in rpc.call('sessions', {'target': T2})['result']['sessions']:
            rpc.call('session.close', {'tsih': s['tsih']})
        time.sleep(0.5)
        for c in conns:
            c.close()
    finally:
        rc = stop_isertd(proc)
        check('isertd exits 0', rc == 0, f'exit {rc}')

    raw = open(logpath, 'rb').read()
    text = raw.decode('utf-8', 'replace')
    check('the log holds none of the secrets', not leaked(text), repr(leaked(text)))
    check('the log names the changes it made (acl.add, acl.set, discovery.set, tpg.set, apply)',
          all(f'): {m} ' in text for m in ('acl.add', 'acl.set', 'discovery.set', 'tpg.set', 'apply')), text[-3000:])
    check('every log line comes from isertd (no forged line)',
          all(line.startswith('isert ') for line in text.splitlines() if line), text[-3000:])
    check('no ESC, CR or invalid UTF-8 in the log', b'\x1b' not in raw and b'\r' not in raw and
          '\ufffd' not in text, repr([line for line in text.splitlines() if 'test:' in line][-8:]))
    check('the hostile names are in the log, escaped',
          'test:a\\x0aisert error: forged line' in text and 'LUN map changed' in text and
          'test:c\\x1b[31mred' in text, repr([line for line in text.splitlines() if 'test:' in line][-8:]))

    # --print-config masks unless asked.
    p = subprocess.run([ISERTD, '-c', cfgfile, '--print-config'], capture_output=True, text=True, env=env)
    check('isertd --print-config masks the secrets', p.returncode == 0 and not leaked(p.stdout) and
          MASK in p.stdout, repr(leaked(p.stdout)) + p.stdout[-1500:] + p.stderr)
    p = subprocess.run([ISERTD, '-c', cfgfile, '--print-config', '--show-secrets'], capture_output=True, text=True,
                       env=env)
    check('isertd --print-config --show-secrets shows them', p.returncode == 0 and S['inline'] in p.stdout,
          p.stdout + p.stderr)
    if checks.failed:
        print(text[-4000:])
    shutil.rmtree(work, ignore_errors=True)
    checks.finish()


if __name__ == '__main__':
    main()
