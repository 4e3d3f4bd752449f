#!/usr/bin/env python3
"""Print "FAMILY.Suite.Test<TAB>passed|FAILED|skipped<TAB>reason" for each
test of an iscsi-test-cu run, from its console output (CUnit basic mode,
verbose, the default).

Why not the CUnit XML (-x): it records a skipped test as passed, and the
console output of an XML run does not say which test logged what.  Here a
test is skipped when it passed and logged "[SKIPPED]" between its
"  Test: NAME ..." line and its result ("passed"/"FAILED" right after the
dots or at the start of a line; libiscsi's own messages are indented); the
reason is its first such message.  The counts are checked against CUnit's
run summary, so output this parser misreads fails the run (exit 1) instead
of passing tests unseen.  A test listed twice counts once, FAILED first."""
import re
import sys

family, path = sys.argv[1], sys.argv[2]
suite = test = reason = None
records = []          # (name, state, reason) per test run
summary = None        # (ran, failed) from "tests  total ran passed failed inactive"
test_re = re.compile(r'^  Test: (.+?) \.\.\.(.*)$')


def end(state):
    global test
    if state == 'passed' and reason is not None:
        state = 'skipped'
    records.append((f"{family}.{suite}.{test}", state, reason or ''))
    test = None


for line in open(path, errors='replace'):
    line = line.rstrip('\n')
    m = re.match(r'^\s+tests\s+(\d+)\s+(\d+)\s+(\d+)\s+(\d+)\s+(\d+)\s*$', line)
    if m and test is None:
        summary = (int(m.group(2)), int(m.group(4)))
        continue
    m = re.match(r'^Suite: (.+)$', line)
    if m:
        suite, test = m.group(1).strip(), None
        continue
    m = test_re.match(line)
    if m and suite:
        test, reason = m.group(1).strip(), None
        rest = m.group(2)
        if rest.startswith('passed') or rest.startswith('FAILED'):
            end(rest[:6])
        elif '[SKIPPED]' in rest:
            reason = rest.split('[SKIPPED]', 1)[1].strip()
        continue
    if test is None:
        continue
    if line.startswith('passed') or line.startswith('FAILED'):
        end(line[:6])
    elif '[SKIPPED]' in line and reason is None:
        reason = line.split('[SKIPPED]', 1)[1].strip()

nfailed = sum(1 for r in records if r[1] == 'FAILED')
if summary is None or summary != (len(records), nfailed):
    print(f"cu-results.py: {path}: read {len(records)} tests, {nfailed} failed; "
          f"CUnit's summary says {summary}", file=sys.stderr)
    sys.exit(1)
results = {}
for name, state, why in records:
    if name not in results or state == 'FAILED' or (state == 'skipped' and results[name][0] == 'passed'):
        results[name] = (state, why)
for name, (state, why) in results.items():
    print(f"{name}\t{state}\t{why}")
