"""ok/FAIL lines and their count, and the scratch folder, for the integration tests."""
import os
import sys
import tempfile
import time

passed = failed = 0


def check(name, cond, detail=''):
    global passed, failed
    if cond:
        passed += 1
        print(f'ok   {name}')
    else:
        failed += 1
        print(f'FAIL {name} {detail}')


def finish():
    """Print the count and exit non-zero if a check failed."""
    print(f'{passed} passed, {failed} failed')
    sys.exit(1 if failed else 0)


def workdir(prefix):
    """A fresh folder for a test's files, in tmpfs (/dev/shm) where there is one.

    These tests are about the protocol and administration, not the disk: on
    the CI machine's virtual disk one fsync has taken 9-18 s while a test's
    own synchronous writes (a file LUN with the write cache off) queued
    device flushes, so a save or a FUA write outlived the client's timeout.
    tmpfs has no device to flush."""
    shm = '/dev/shm'
    return tempfile.mkdtemp(prefix=prefix, dir=shm if os.access(shm, os.W_OK) else None)


def wait_for(cond, seconds=10, step=0.05):
    """cond()'s first true value within seconds, else its last value.

    For what the target does in its own time (a closed connection noticed,
    a unit attention queued, a session logged in): a fixed sleep before the
    check is a bet on the machine's speed, which a test running beside
    another (meson's is_parallel) or under the sanitizers can lose."""
    end = time.monotonic() + seconds
    while True:
        v = cond()
        if v or time.monotonic() >= end:
            return v
        time.sleep(step)
