#!/usr/bin/env python3
"""Print "FAMILY.Suite.Test<TAB>passed|FAILED" for each test of a CUnit
automated-results XML file (what iscsi-test-cu -x writes)."""
import sys
import xml.etree.ElementTree as ET

family, path = sys.argv[1], sys.argv[2]
results = {}
for suite in ET.parse(path).getroot().iter('CUNIT_RUN_SUITE'):
    name = suite.find('.//SUITE_NAME')
    if name is None:
        continue
    sname = name.text.strip()
    for rec in suite.iter('CUNIT_RUN_TEST_RECORD'):
        for state, tag in (('passed', 'CUNIT_RUN_TEST_SUCCESS'), ('FAILED', 'CUNIT_RUN_TEST_FAILURE')):
            node = rec.find(tag)
            if node is not None:
                key = f"{family}.{sname}.{node.find('TEST_NAME').text.strip()}"
                if results.get(key) != 'FAILED':
                    results[key] = state
for key, state in results.items():
    print(f"{key}\t{state}")
