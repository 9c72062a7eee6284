"""The files under ``cases/`` are type-checked by test_checkers.py, never collected.

Some of their lines are deliberate type errors, and their ``case_*`` functions are not
tests (agreement_cases.py is run by test_agreement.py instead).
"""

collect_ignore_glob = ["cases/*"]
