"""ok/FAIL lines and their count, for the integration tests."""
import sys

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
