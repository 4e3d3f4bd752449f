#!/usr/bin/env python3
"""iserctl call METHOD KEY=VALUE... and its bash completion, both from the
method table rpc.methods answers (docs/admin.md, "iserctl"): each value
typed as the table says, refusals before anything is sent (naming the key,
changing nothing), the JSON form as it was, and the completion offering
exactly the table's parameters, also in a real interactive bash (tmux).

usage: test_call.py ISERTD ISERCTL"""
import json
import os
import shlex
import shutil
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import checks  # noqa: E402
from admin_rpc import Rpc, end_isertd, start_isertd  # noqa: E402
from checks import check, wait_for  # noqa: E402

ISERTD, ISERCTL = sys.argv[1], sys.argv[2]
T = 'iqn.2026-11.org.isert:call'
COMP = os.path.join(os.path.dirname(os.path.abspath(__file__)), '..', '..', 'tools', 'iserctl', 'iserctl.bash')


def iserctl(sock, *args):
    p = subprocess.run([ISERCTL, '-s', sock, *args], capture_output=True, text=True, timeout=30)
    return p.returncode, p.stdout, p.stderr


def complete(sock, *words):
    """What _iserctl offers for the command line iserctl -s SOCK WORDS..., the last word the one completed."""
    line = ' '.join(shlex.quote(w) for w in ('iserctl', '-s', sock) + words)
    p = subprocess.run(['bash', '-c', f'PATH={shlex.quote(os.path.dirname(ISERCTL))}:$PATH; '
                        f'source {shlex.quote(COMP)}; COMP_WORDS=({line}); COMP_CWORD={len(words) + 2}; '
                        '_iserctl; printf "%s\\n" "${COMPREPLY[@]}"'], capture_output=True, text=True, timeout=30)
    return [w for w in p.stdout.split('\n') if w]


def typed_in_tmux(sock, work, keys, want):
    """The command line an interactive bash shows after keys (tmux send-keys words) are typed: once it ends
    with want, or as it is after 10 s."""
    tm = ['tmux', '-L', f'isert-call-{os.getpid()}']
    env = f'env -i PATH={shlex.quote(os.path.dirname(ISERCTL))}:/usr/bin:/bin TERM=xterm HOME={work} PS1=@ '
    subprocess.run(tm + ['new-session', '-d', '-s', 'c', '-x', '200', '-y', '10',
                         env + 'bash --norc --noprofile -i'], capture_output=True, timeout=10)
    try:
        subprocess.run(tm + ['send-keys', '-t', 'c', f'source {shlex.quote(COMP)}; clear', 'Enter'], timeout=10)
        time.sleep(0.5)
        subprocess.run(tm + ['send-keys', '-t', 'c', f'iserctl -s {sock} call lun.add '], timeout=10)
        for k in keys:
            subprocess.run(tm + ['send-keys', '-t', 'c'] + k.split(' '), timeout=10)
            time.sleep(0.5)  # each Tab runs iserctl call rpc.methods

        def line():
            screen = subprocess.run(tm + ['capture-pane', '-p', '-t', 'c'], capture_output=True, text=True).stdout
            return ([ln for ln in screen.split('\n') if ln.startswith('@')][-1:] or [''])[0]
        # bash takes the keys in order, each completion in its own time (a loaded machine, the sanitizers).
        wait_for(lambda: line().endswith(want))
        return line()
    finally:
        subprocess.run(tm + ['kill-server'], capture_output=True, timeout=10)


def main():
    work = checks.workdir('isert-call-')
    cfgfile = os.path.join(work, 'isertd.json')
    with open(cfgfile, 'w') as f:
        json.dump({'backstores': [{'name': 'r0', 'type': 'ram', 'size': '8M'},
                                  {'name': 'r1', 'type': 'ram', 'size': '8M'}],
                   'targets': [{'iqn': T, 'tpgs': [{'tag': 1, 'enable': True,
                                                    'luns': [{'lun': 0, 'backstore': 'r0'}]}]}]}, f)
    proc, sock = start_isertd(ISERTD, work, cfgfile, '-r', '1')
    try:
        rpc = Rpc(sock)
        methods = {m['name']: m for m in rpc.call('rpc.methods')['result']}
        names = {n: [p['name'] for p in m['params']] for n, m in methods.items()}

        def running():
            return rpc.call('config.get', {'show_secrets': True})['result']

        def luns():
            return running()['config']['targets'][0]['tpgs'][0]['luns']

        # The completion, from the same table.
        got = complete(sock, 'call', '')
        check('completion after call: exactly the methods of rpc.methods', sorted(got) == sorted(methods), got)
        got = complete(sock, 'call', 'lun.add', '')
        want = [p + '=' for p in names['lun.add']]
        check('completion after call lun.add: exactly its parameters in rpc.methods, each with =',
              sorted(got) == sorted(want) and len(want) >= 5, f'{got} != {want}')
        got = complete(sock, 'call', 'lun.add', 'target', '=', T, 'tag=1', '')
        check('completion leaves out the parameters on the line (NAME = VALUE and NAME=VALUE)',
              sorted(got) == sorted(set(want) - {'target=', 'tag='}), got)
        check('completion after a boolean NAME= (bash splits at =): true and false',
              sorted(complete(sock, 'call', 'lun.add', 'read_only', '=')) == ['false', 'true'])
        check('completion of a boolean NAME=VALUE in one word: the whole word',
              complete(sock, 'call', 'lun.add', 'read_only=f') == ['read_only=false'])
        check('completion after an integer NAME=: nothing', complete(sock, 'call', 'lun.add', 'tag', '=') == [])
        if not shutil.which('tmux'):
            check('tmux is installed (tools/deps.sh) for the interactive completion', False)
        else:
            want = 'call lun.add read_only=true backstore=X'
            line = typed_in_tmux(sock, work, ['read_o Tab', 't Tab', 'b Tab', 'X'], want)
            check('interactive bash: read_o<Tab>t<Tab>b<Tab>X gives read_only=true backstore=X (no space after =)',
                  line.endswith(want), repr(line))

        # KEY=VALUE typed by the table.
        before = running()
        rc, out, err = iserctl(sock, 'call', 'lun.add', f'target={T}', 'tag=1', 'backstore=r1', 'read_only=yes')
        check('call lun.add target=... tag=1 backstore=r1 read_only=yes: exit 0', rc == 0, out + err)
        check('the LUN is there, read-only (config.get)',
              {'lun': 1, 'backstore': 'r1', 'read_only': True} in
              [{k: x.get(k) for k in ('lun', 'backstore', 'read_only')} for x in luns()], json.dumps(luns()))
        rc, out, _ = iserctl(sock, 'ls')
        check('iserctl ls shows it', 'lun1 -> /backstores/r1 [read-only]' in out, out)
        rc, out, err = iserctl(sock, 'call', 'lun.remove', f'target={T}', 'tag=1', 'lun=1', 'dry_run=1')
        check('dry_run=1 (a boolean as 1): a plan, nothing done',
              rc == 0 and json.loads(out)['dry_run'] is True and len(luns()) == 2, out + err)

        # Refusals before anything is sent: exit 2, naming the key, nothing changed.
        before = running()
        for label, args, words in (
                ('tag=abc (an integer)', ['tag=abc'], "call lun.add: tag: 'abc' is not an integer"),
                ('tag=1.5 (an integer)', ['tag=1.5'], "tag: '1.5' is not an integer"),
                ('read_only=maybe (a boolean)', ['tag=1', 'read_only=maybe'],
                 "read_only: 'maybe' is not true or false"),
                ('an unknown key', ['tag=1', 'colour=red'],
                 f"call lun.add: unknown parameter 'colour' (this method takes: {', '.join(names['lun.add'])})"),
                ('a key given twice', ['tag=1', 'tag=2'], "call lun.add: 'tag' given twice"),
                ('an argument that is not KEY=VALUE', ['tag=1', 'r1'], "'r1' is not KEY=VALUE"),
                ('a JSON object among KEY=VALUE', ['tag=1', '{"lun": 3}'], 'a JSON object of parameters comes alone')):
            rc, out, err = iserctl(sock, 'call', 'lun.add', f'target={T}', 'backstore=r1', *args)
            check(f'call lun.add with {label}: exit 2, saying "{words}"', rc == 2 and words in err, f'{rc} {err}')
            check(f'call lun.add with {label}: nothing changed', running() == before)
        daemon = rpc.call('lun.add', {'target': T, 'tag': 1, 'backstore': 'r1', 'colour': 'red'})['error']['message']
        rc, _, err = iserctl(sock, 'call', 'lun.add', f'target={T}', 'tag=1', 'backstore=r1', 'colour=red')
        check("iserctl's message for an unknown key is isertd's own", daemon in err, f'{daemon!r} / {err!r}')
        rc, _, err = iserctl(sock, 'call', 'lun.frobnicate', 'a=1')
        check('an unknown method: isertd answers, naming it (exit 1)',
              rc == 1 and "unknown method 'lun.frobnicate'" in err, f'{rc} {err}')
        rc, _, err = iserctl(sock, 'call', 'global.set', 'login_timeout=9', f'generation={before["generation"] - 1}')
        check('generation=N (an integer) on a change method: a stale one exits 5', rc == 5 and 'stale' in err,
              f'{rc} {err}')
        check('none of it changed anything', running() == before)

        # Methods with doc_keys: the file's keys go on, JSON else a string; isertd checks them.
        img = os.path.join(work, 'f1.img')
        rc, out, err = iserctl(sock, 'call', 'backstore.create', 'name=f1', 'type=file', f'path={img}', 'size=4M')
        check('call backstore.create ... size=4M (a doc key, as a string): exit 0',
              rc == 0 and os.path.getsize(img) == 4 << 20, out + err)
        rc, _, err = iserctl(sock, 'call', 'backstore.create', 'name=f2', 'type=ram', 'size=4M', 'colour=red')
        check('a key of no backstore: isertd refuses it, naming it (exit 1)',
              rc == 1 and 'colour: unknown key' in err, f'{rc} {err}')
        for size, want in (('8M', 8 << 20), (str(16 << 20), 16 << 20)):
            rc, out, err = iserctl(sock, 'call', 'backstore.resize', 'name=f1', f'size={size}')
            check(f'call backstore.resize size={size} (a "value": string or JSON number)',
                  rc == 0 and json.loads(out).get('size') == want, out + err)
        ini = 'iqn.2026-11.org.test:call'
        rc, out, err = iserctl(sock, 'call', 'acl.add', f'target={T}', 'tag=1', f'initiator={ini}',
                               'chap={"userid":"u","password":"secretsecret12"}')
        acl = [a for a in running()['config']['targets'][0]['tpgs'][0].get('acls', []) if a['initiator'] == ini]
        check('chap=\'{"userid":...}\' (a secret "value" as JSON): the ACL has it',
              rc == 0 and acl and acl[0].get('chap') == {'userid': 'u', 'password': 'secretsecret12'},
              out + err + json.dumps(acl))
        before = running()
        rc, _, err = iserctl(sock, 'call', 'acl.set', f'target={T}', 'tag=1',
                             '{"initiator": "%s", "chap": {"userid": "u", "password": "secret-not-shown"}}' % ini)
        check('a JSON object among KEY=VALUE holding a secret: exit 2, the secret not shown, nothing changed',
              rc == 2 and 'comes alone' in err and 'secret-not-shown' not in err and running() == before,
              f'{rc} {err}')
        rc, out, err = iserctl(sock, 'call', 'acl.set', f'target={T}', 'tag=1', f'initiator={ini}', 'chap=null')
        acl = [a for a in running()['config']['targets'][0]['tpgs'][0].get('acls', []) if a['initiator'] == ini]
        check('chap=null (JSON null): CHAP off', rc == 0 and acl and 'chap' not in acl[0], out + err)

        # The JSON form, as before.
        rc, out, err = iserctl(sock, 'call', 'lun.remove', json.dumps({'target': T, 'tag': 1, 'lun': 1}))
        check('call lun.remove \'{"target": ...}\' (the JSON form): exit 0, the LUN gone',
              rc == 0 and [x['lun'] for x in luns()] == [0], out + err)
        before = running()
        rc, _, err = iserctl(sock, 'call', 'acl.set', '{"chap": {"password": "Leaked-secret-1234"')
        check('a JSON form that is not JSON: exit 2, nothing changed, the text not shown (it may hold a secret)',
              rc == 2 and 'are not a JSON object' in err and 'Leaked' not in err and running() == before,
              f'{rc} {err}')
        rc, out, _ = iserctl(sock, 'call', 'config.get')
        check('call METHOD without parameters', rc == 0 and json.loads(out)['generation'] == before['generation'])
    finally:
        end_isertd(proc, work)
    checks.finish()


if __name__ == '__main__':
    main()
