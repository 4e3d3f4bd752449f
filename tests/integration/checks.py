"""ok/FAIL lines and their count, and the scratch folder, for the integration tests."""
import os
import sys
import tempfile

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
