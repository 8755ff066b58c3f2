"""The lab: a QEMU guest with the Debian 6.12 kernel and two memory nodes, where tierlab's
live commands run against a real kernel and the simulator is compared with it (docs/lab.md).
"""
