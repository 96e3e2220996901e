# SPDX-License-Identifier: LGPL-2.1-or-later
"""Policy files the tests on real devices write."""


def busy_flip(dev, dynamic=""):
    """One device's [Dynamic] policy: none at rest, mq-deadline after 2 ticks
    over 5000 IOPS, back after 2 ticks under 1000, no dwell; dynamic: more
    [Dynamic] lines."""
    return f"""[Match]
name = {dev}
[Queue]
scheduler = none
[Dynamic]
enter = iops > 5000
enter_ticks = 2
leave = iops < 1000
leave_ticks = 2
{dynamic}min_dwell_ticks = 0
[Busy]
scheduler = mq-deadline
"""
