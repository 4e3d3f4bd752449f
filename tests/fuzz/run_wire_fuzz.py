#!/usr/bin/env python3
"""Test-suite wrapper around wire_fuzz.py: start isertd (wire.json, loopback
PORT), fuzz it for a bounded number of inputs, then stop it with SIGTERM.
Passes if the target stayed healthy and exited 0 (under ASan, a leak or
error at exit makes the status non-zero).

usage: run_wire_fuzz.py ISERTD PORT [wire_fuzz.py options...]"""
import os
import shutil
import subprocess
import sys
import tempfile
import time

here = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(here, '..', 'integration'))
import iscsi_client as ic  # noqa: E402


def main():
    isertd, port, extra = sys.argv[1], sys.argv[2], sys.argv[3:]
    log = tempfile.NamedTemporaryFile(prefix='isertd-wirefuzz-', suffix='.log', delete=False)
    # No admin socket, and a state folder of its own (this test runs beside others): a mutated CDB can be a
    # PERSISTENT RESERVE OUT with APTPL, whose state file belongs here, not in the host's /var/lib/isert.
    state = tempfile.mkdtemp(prefix='isertd-wirefuzz-state-')
    proc = subprocess.Popen([isertd, '--config', os.path.join(here, 'wire.json'), '--portal', f'127.0.0.1:{port}',
                             '--admin-socket', 'none', '--state-dir', state], stdout=log, stderr=log)
    ok = False
    try:
        for _ in range(100):
            try:
                ic.Conn(int(port), timeout=1).close()
                break
            except OSError:
                time.sleep(0.1)
        rc = subprocess.call([sys.executable, os.path.join(here, 'wire_fuzz.py'), '--port', port] + extra)
        alive = proc.poll() is None
        if not alive:
            print(f'isertd died during fuzzing (status {proc.returncode})')
        ok = rc == 0 and alive
    finally:
        if proc.poll() is None:
            proc.terminate()
            try:
                st = proc.wait(15)
                if st != 0:
                    print(f'isertd exited with status {st} on SIGTERM')
                    ok = False
            except subprocess.TimeoutExpired:
                proc.kill()
                print('isertd did not stop within 15 s of SIGTERM')
                ok = False
        log.close()
        if not ok:
            print('--- isertd log (tail) ---')
            print(open(log.name, errors='replace').read()[-6000:])
        os.unlink(log.name)
        shutil.rmtree(state, ignore_errors=True)
    return 0 if ok else 1


if __name__ == '__main__':
    sys.exit(main())
