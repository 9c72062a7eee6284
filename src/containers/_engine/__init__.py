"""The one traversal of trees, its accelerations and their compiled loops.

Every operation that walks a tree (the fmap family, flatten, flatten_up_to, diff,
pformat, treelize) is a client of ``_core.traverse`` or runs one of the accelerations
listed in this package's README, each with ``traverse``'s client as its plain twin.
The modules are imported by their clients directly; this file defines nothing.
"""
