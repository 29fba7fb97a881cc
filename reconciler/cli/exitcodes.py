"""Exit codes every `jobtree` verb shares (the contract in DESIGN.md §5 and `reconciler.cli`).

Only the numbers: which verb exits with which, and why, is each verb's.
"""

OK = 0  # success, or no change (`plan --exit-code`)
CHANGES = 1  # `plan --exit-code`: merging head would change something
USAGE = 2  # a wrong option or argument (click's own usage errors exit 2 too)
INVALID = 3  # the fleet files are invalid (validate, simulate, reconcile, plan)
OTHER = 4  # anything else: Git unreachable, a refused push, an unwritable output
