#!/usr/bin/env python3
# SPDX-License-Identifier: LGPL-2.1-or-later
"""What held the event loop: the longest dispatches of a running daemon.

perf records the daemon's main thread: its epoll waits (the sys_enter and
sys_exit tracepoints of the epoll waits sd-event may use)
and CPU samples. A dispatch is the time from one wait's return to the next
wait; the samples inside it say what ran. Needs root and perf (Debian's
linux-perf); the daemon is not slowed by ptrace.

    with LoopProfile(pid) as prof:
        ...                              # the load
    for d in prof.longest(5):
        print(d["ms"], d["top"])
"""
import collections
import os
import signal
import subprocess
import tempfile

EVENTS = ["cpu-clock"] + [f"syscalls:sys_{x}_{w}" for w in ("epoll_wait", "epoll_pwait", "epoll_pwait2") for x in ("enter", "exit")]


class LoopProfile:
    def __init__(self, pid, freq=4999):
        self.pid = pid
        self.freq = freq
        self.dispatches = []

    def __enter__(self):
        fd, self.data = tempfile.mkstemp(prefix="loopprof-", suffix=".data")
        os.close(fd)
        events = ",".join(EVENTS)
        self.proc = subprocess.Popen(["perf", "record", "-q", "-m", "1024", "-F", str(self.freq), "-e", events, "-t", str(self.pid),
                                      "-o", self.data], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        return self

    def __exit__(self, *exc):
        self.proc.send_signal(signal.SIGINT)
        self.proc.wait(timeout=60)
        try:
            self.dispatches = self._parse()
        finally:
            os.unlink(self.data)

    def _parse(self):
        out = subprocess.run(["perf", "script", "-i", self.data, "-F", "time,event,ip,sym"],
                             capture_output=True, text=True, check=False).stdout
        dispatches, start, samples = [], None, []
        for line in out.splitlines():
            parts = line.split()
            if len(parts) < 2:
                continue
            t = float(parts[0].rstrip(":"))
            event = parts[1].rstrip(":")
            if "sys_exit_epoll" in event:
                start, samples = t, []
            elif "sys_enter_epoll" in event and start is not None:
                dispatches.append({"ms": (t - start) * 1000, "samples": samples})
                start = None
            elif event == "cpu-clock" and start is not None:
                samples.append(parts[3] if len(parts) > 3 else "?")     # time event ip sym
        return dispatches

    def longest(self, n=5, top=4):
        """The n longest dispatches, each with its most sampled symbols."""
        res = []
        for d in sorted(self.dispatches, key=lambda x: -x["ms"])[:n]:
            common = collections.Counter(d["samples"]).most_common(top)
            res.append({"ms": round(d["ms"], 1), "cpu_ms": round(len(d["samples"]) * 1000 / self.freq, 1),
                        "top": [f"{s} ({c})" for s, c in common]})
        return res
