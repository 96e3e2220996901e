#!/usr/bin/env python3
# SPDX-License-Identifier: LGPL-2.1-or-later
"""blkpolicyd as Debian installs it, under a real systemd and udevd.

Builds a Debian 12 root file system with debootstrap (cached outside the
repo), installs the project's .deb into it with dpkg, disables the unit so
that only the udev rule can start it, and boots it on Debian's 6.12 kernel
in QEMU (TCG), with a small initramfs that mounts the root and hands over to
systemd. A test unit then checks, from inside:
  - the service is active although not enabled: udev's coldplug started it;
  - it runs with the unit's sandbox, and still sets the disks (sysfs is
    writable under ProtectSystem=strict, debugfs is readable);
  - it follows udevd's monitor: a null_blk made after boot is set;
  - the watchdog is fed; blkpolicyctl reaches the socket; the journal has
    the structured fields; reload (SIGHUP) keeps it active; a broken
    policy file is skipped at reload, a broken config refused;
  - a reload that adds a property= policy reads the udev property it names
    (devices keep only the properties the policies name);
  - other writers: Debian's tuned, active, with a profile that sets vdd's
    elevator, and a stand-in google-guest-agent.service that writes none
    to vdd, both enabled; doctor names them as running and advises the
    settle unit; systemd-analyze verify multi-user.target breaks
    blkpolicyd's start with the old After= drop-in and is clean with
    blkpolicyd-settle.service enabled; tuned restarted wins vdd, the settle
    unit gives it back to blkpolicyd;
  - a package upgrade (the .deb repacked as the next release, its shipped
    set N frozen and a set N+1 that wants kyber on vdb) hands over and
    changes no disk: the first install's pin keeps set N, status and the
    journal say set N+1 is newer; policy_set = N+1 and a reload apply it,
    N puts it back;
  - systemctl stop restores what the kernel had.
The lines come back over the serial console as "ok - ..." / "not ok - ...".

  sudo python3 tests/vm/systemdtest.py --deb build/blkpolicyd.deb
"""
import argparse
import hashlib
import os
import re
import shutil
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import vmtest  # noqa: E402
# vmtest put tests/ on the path: the shared harness, as vmtest's own
from blkptest.results import Results  # noqa: E402

# what the image needs beyond minbase: systemd as init, udevd, modprobe,
# the .deb's dependencies (dpkg -i runs offline), and tuned, a writer of the
# same settings, with libpam-systemd for polkitd's logind (debootstrap does
# not choose among a virtual package's providers)
PACKAGES = ["systemd", "systemd-sysv", "udev", "kmod", "libinih1", "libnl-3-200", "libcjson1", "tuned",
            "libpam-systemd"]
MIRROR = "http://deb.debian.org/debian"
ROOT_MODULES = ["virtio_pci", "virtio_blk", "ext4"]

# the initramfs only mounts the root and hands over to systemd
INIT = vmtest.MOUNTS + r"""for m in $(cat /modules.list); do insmod /lib/modules/$m; done
mkdir -p /newroot
for i in $(seq 100); do [ -b /dev/vda ] && break; sleep 0.05; done
mount -t ext4 /dev/vda /newroot
umount /sys/kernel/debug /sys /proc
mount --move /dev /newroot/dev
exec switch_root /newroot /sbin/init
"""

# runs inside, as a systemd unit, once the system is up
TEST = r"""#!/bin/sh
# Each check runs a command or a function of this script in this shell.
say() { echo "$@" > /dev/ttyS0; }
# a check's detail (detail()) is said after its "not ok" line, indented
check() {
        name=$1; shift; rm -f /run/check-detail
        if "$@" >/dev/null 2>&1; then say "ok - $name"; else say "not ok - $name"; sed 's/^/  /' /run/check-detail > /dev/ttyS0 2>/dev/null; fi
}
detail() { echo "$@" >> /run/check-detail; }
until_true() { n=$1; shift; for i in $(seq $n); do "$@" >/dev/null 2>&1 && return 0; sleep 0.1; done; return 1; }
prop() { systemctl show -p "$1" --value blkpolicyd.service; }
sched() { sed 's/.*\[\(.*\)\].*/\1/' /sys/block/$1/queue/scheduler; }
runs() { [ "$(sched $1)" = "$2" ]; }
# active, or why not: the unit's state and the journal's first lines
service_active() {
        until_true 300 systemctl is-active -q blkpolicyd.service && return 0
        detail "$(systemctl status blkpolicyd.service --no-pager 2>&1 | head -20)"
        detail "$(journalctl -b -u blkpolicyd -o cat --no-pager | head -40)"
        return 1
}
not_enabled() { ! systemctl is-enabled -q blkpolicyd.service; }
only_two_caps() { grep -q "^CapEff:.*0000000000001001$" /proc/$(prop MainPID)/status; }
udev_monitor() { blkpolicyctl --json status | grep -q '"monitor":[[:space:]]*"udev"'; }
reads_dispatch_busy() { blkpolicyctl --json device nullb0 | grep -Eq '"dispatch_busy":[[:space:]]*[0-9]'; }
watchdog_fed() { [ "$(prop WatchdogTimestampMonotonic)" != "$1" ]; }
journal_fields() { journalctl -b -u blkpolicyd -o json | grep -q '"DEVICE":"vdb"'; }
reload_ok() { systemctl reload blkpolicyd && systemctl is-active -q blkpolicyd; }
# a broken policy file is skipped, as at start: the reload succeeds, the
# file is counted as rejected, and what it asked for (kyber) is not done
reload_skips_broken() {
        printf '[Match]\nname = vdb\n[Queue]\nscheduler = kyber\nno_such_setting = 1\n' > /etc/blkpolicyd/policies.d/99-broken.policy
        systemctl reload blkpolicyd
        r=$?
        blkpolicyctl --json status | grep -Eq '"policy_files_rejected":[[:space:]]*1'
        k=$?
        runs vdb none
        v=$?
        rm /etc/blkpolicyd/policies.d/99-broken.policy
        systemctl reload blkpolicyd
        [ $r = 0 ] && [ $k = 0 ] && [ $v = 0 ] && systemctl is-active -q blkpolicyd
}
# a broken configuration file is refused: the running one stays
reload_refused() {
        conf=/etc/blkpolicyd/blkpolicyd.conf
        cp -a $conf /run/blkpolicyd.conf.saved 2>/dev/null
        had=$?
        printf '[Daemon]\nrestore_on_exit = perhaps\n' >> $conf
        ! systemctl reload blkpolicyd
        r=$?
        if [ $had = 0 ]; then mv /run/blkpolicyd.conf.saved $conf; else rm $conf; fi
        [ $r = 0 ] && systemctl is-active -q blkpolicyd && runs vdb none
}
bfq_loaded() { runs vdc bfq && [ -d /sys/module/bfq ]; }
# the running set names no udev property, so devices keep none: a reload
# that names one must read it again before deciding
property_reload() {
        printf '[Match]\nproperty = ID_SERIAL=blkpd-vdc*\n[Queue]\nscheduler = kyber\n' > /etc/blkpolicyd/policies.d/95-serial.policy
        systemctl reload blkpolicyd && runs vdc kyber && runs vdb none
}
property_dropped() { rm /etc/blkpolicyd/policies.d/95-serial.policy && systemctl reload blkpolicyd && runs vdc bfq; }
no_restarts() { [ "$(prop NRestarts)" = 0 ]; }
observing() { blkpolicyctl --json status | grep -q '"mode":[[:space:]]*"observe"'; }
pending_shown() {
        blkpolicyctl --json verify > /run/verify.json
        grep -q '"mode":[[:space:]]*"observe"' /run/verify.json &&
        grep -Eq '"pending":[[:space:]]*[1-9]' /run/verify.json &&
        tr -d ' \n\t' < /run/verify.json | grep -q '"name":"vdb".*"pending":\[{"attr":"scheduler","intended":"none"' &&
        ! blkpolicyctl verify    # exit 4: pending changes are not as intended
}
pending_in_metrics() {
        blkpolicyctl metrics > /run/metrics.txt &&
        grep -q '^blkpolicyd_enforcing 0$' /run/metrics.txt &&
        grep -q '^blkpolicyd_mode{mode="observe"} 1$' /run/metrics.txt &&
        grep -Eq '^blkpolicyd_settings[{]result="pending"[}] [1-9][0-9]*$' /run/metrics.txt &&
        grep -Eq '^blkpolicyd_devices_by_state[{]state="pending"[}] [1-9][0-9]*$' /run/metrics.txt &&
        ! grep -q '^blkpolicyd_device_' /run/metrics.txt     # per-device series are opt-in
}
# another writer of the same settings: a udev rule in /etc and a tuned
# profile (files only: tuned does not load it), named by doctor with exit
# 4; removed again, and tuned's own profile put back, before anything can
# trigger the rule or reload tuned
doctor_names_writers() {
        printf 'ACTION=="add|change", KERNEL=="vdb", ATTR{queue/scheduler}="mq-deadline"\n' \
                > /etc/udev/rules.d/60-blkpd-test.rules
        mkdir -p /etc/tuned/profiles/blkpd-test
        printf '[disk]\ndevices=vdc\nelevator=kyber\n' > /etc/tuned/profiles/blkpd-test/tuned.conf
        cp /etc/tuned/active_profile /run/active_profile.saved
        echo blkpd-test > /etc/tuned/active_profile
        blkpolicyctl doctor > /run/doctor.txt
        rc=$?
        rm -rf /etc/udev/rules.d/60-blkpd-test.rules /etc/tuned/profiles
        mv /run/active_profile.saved /etc/tuned/active_profile
        cat /run/doctor.txt
        [ $rc = 4 ] && grep -q '60-blkpd-test.rules' /run/doctor.txt && grep -q 'blkpd-test/tuned.conf' /run/doctor.txt
}
# Debian's tuned, running its profile, and the stand-in agent: writers that
# run. tuned 2.19 keeps profiles in /etc/tuned/<name>/
tuned_runs_its_profile() { systemctl is-active -q tuned && tuned-adm active | grep -q blkpd-vm; }
doctor_json() { blkpolicyctl --json doctor | tr -d ' \n\t'; }
doctor_sees_tuned_running() {
        doctor_json | grep -q '"source":"tuned","path":"/etc/tuned/blkpd-vm/tuned.conf","line":[0-9]*,"attr":"scheduler","value":"kyber","match":"\[disk\]devices=vdd","effective":true,"dormant":false'
}
# running but not enabled: only systemd can say that it runs (ActiveState
# over its private socket, from inside blkpolicyd's sandbox)
doctor_asks_systemd() {
        systemctl disable -q tuned.service || return 1
        doctor_sees_tuned_running
        r=$?
        systemctl enable -q tuned.service
        [ $r = 0 ] && systemctl is-active -q tuned
}
doctor_sees_agent_running() {
        doctor_json | grep -q '"source":"gce-guest-agent","path":"/etc/systemd/system/google-guest-agent.service",[^}]*"dormant":false,"advice":"theagentwritesnone[^"]*enableblkpolicyd-settle.service'
}
# doctor's old advice, an After= drop-in, makes systemd drop blkpolicyd's
# start; the settle unit enabled instead leaves no ordering cycle. Both
# with blkpolicyd.service enabled, as the package installs it (this image
# has it disabled, for the udev rule's check): else the boot's transaction
# has no start of it to order
verify_boot() {
        systemctl enable -q blkpolicyd.service || return 1
        systemd-analyze verify multi-user.target > "$1" 2>&1
        systemctl disable -q blkpolicyd.service
        cat "$1"
}
cycle_with_old_advice() {
        mkdir -p /etc/systemd/system/blkpolicyd.service.d
        printf '[Unit]\nAfter=google-guest-agent.service\n' > /etc/systemd/system/blkpolicyd.service.d/after-gce.conf
        verify_boot /run/verify-old.txt
        rm -r /etc/systemd/system/blkpolicyd.service.d
        # which job systemd deletes to break it varies (blkpolicyd's or the
        # agent's start): a cycle through blkpolicyd is the fault either way
        grep -q 'deleted to break ordering cycle' /run/verify-old.txt && grep -q 'blkpolicyd.service' /run/verify-old.txt
}
no_cycle_with_settle() {
        systemctl enable -q blkpolicyd-settle.service || return 1
        verify_boot /run/verify-new.txt
        ! grep -qi 'ordering cycle' /run/verify-new.txt && not_enabled
}
tuned_wins_vdd() { systemctl restart tuned && until_true 300 runs vdd kyber; }
settle_takes_vdd_back() { systemctl start blkpolicyd-settle.service && runs vdd none && runs vdb none && runs vdc bfq; }
enforce_by_dropin() {
        mkdir -p /etc/blkpolicyd/blkpolicyd.conf.d &&
        printf '[Daemon]\nmode = enforce\n' > /etc/blkpolicyd/blkpolicyd.conf.d/50-enforce.conf &&
        systemctl reload blkpolicyd && runs vdb none &&
        blkpolicyctl --json status | grep -q '"mode":[[:space:]]*"enforce"'
}
# backing out by reload is a transition, not drift: every value back and
# nothing overridden after ticks of drift checks; enforcing again by reload
# applies again, no resume
tick_count() { blkpolicyctl --json status | tr -d ' \n\t' | sed 's/.*"tick":{"count":\([0-9]*\).*/\1/'; }
ticks_since() { [ "$(tick_count)" -ge $(($1 + $2)) ]; }
ticks_pass() { t=$(tick_count); until_true 300 ticks_since "$t" 5; }
none_overridden() {
        blkpolicyctl --json status | grep -Eq '"overridden":[[:space:]]*0,' &&
        blkpolicyctl metrics | grep -q '^blkpolicyd_devices_by_state{state="overridden"} 0$'
}
# what the disks and the daemon say, for a check that failed
disks_said() {
        detail "failed at: $1; vdb=$(sched vdb) vdc=$(sched vdc) vdd=$(sched vdd) drop-ins: $(ls /etc/blkpolicyd/blkpolicyd.conf.d 2>&1 | tr '\n' ' ')"
        detail "status: $(blkpolicyctl --json status | tr -d ' \n\t' | cut -c1-400)"
        detail "$(blkpolicyctl metrics | grep '^blkpolicyd_devices_by_state')"
        return 1
}
# each step of a check, named when it fails
step() { "$@" || { disks_said "$*"; return 1; }; }
back_out() {
        step rm /etc/blkpolicyd/blkpolicyd.conf.d/50-enforce.conf && step systemctl reload blkpolicyd &&
        step observing && step runs vdb mq-deadline && step runs vdc mq-deadline && step ticks_pass &&
        step none_overridden
}
enforce_again() {
        printf '[Daemon]\nmode = enforce\n' > /etc/blkpolicyd/blkpolicyd.conf.d/50-enforce.conf &&
        step systemctl reload blkpolicyd && step runs vdb none && step runs vdc bfq && step ticks_pass &&
        step none_overridden
}
sched_writes() { blkpolicyctl --json status | tr -d ' \n\t' | sed 's/.*"writes":{"scheduler":\([0-9]*\).*/\1/'; }
put_backs() { journalctl -b -u blkpolicyd -o cat | grep -c "put back"; }
upgrade_no_churn() {
        pid=$(prop MainPID)
        put_backs > /run/put-backs-before
        dpkg -i /var/cache/blkpolicyd-test.deb || return 1
        until_true 300 systemctl is-active -q blkpolicyd.service || return 1
        until_true 300 blkpolicyctl status || return 1
        [ "$(prop MainPID)" != "$pid" ] && [ "$(sched_writes)" = 0 ]
}
handed_over() { journalctl -b -u blkpolicyd -o cat | grep -q "Handing over" && [ "$(put_backs)" = "$(cat /run/put-backs-before)" ]; }
PROM=/var/lib/prometheus/node-exporter/blkpolicyd.prom
# the file a stopped daemon leaves: down, and how it ended
stopped_file() {
        grep -q '^blkpolicyd_up 0$' $PROM && grep -q "^blkpolicyd_exit_info{result=\"$1\",$2} 1$" $PROM ||
                { detail "$(cat $PROM)"; return 1; }
}
killed_file() {
        mkdir -p /run/systemd/system/blkpolicyd.service.d &&
        printf '[Service]\nRestart=no\n' > /run/systemd/system/blkpolicyd.service.d/no-restart.conf &&
        systemctl daemon-reload && systemctl start blkpolicyd && until_true 300 grep -q '^blkpolicyd_up 1$' $PROM &&
        systemctl kill -s KILL blkpolicyd && until_true 300 stopped_state &&
        stopped_file signal 'code="killed",status="KILL"'
}
stopped_state() { [ "$(prop ActiveState)" = failed ] || [ "$(prop ActiveState)" = inactive ]; }
# the first install pinned the set it ships, SET (the postinst's drop-in);
# the upgrade .deb ships set NEXT, whose 20-fast-virtual.policy wants kyber
SET=$(grep -v '^#' /usr/lib/blkpolicyd/policies.d/policy-set | head -n 1)
NEXT=$((SET + 1))
pin=/etc/blkpolicyd/blkpolicyd.conf.d/00-policy-set.conf
pinned() { grep -q "^policy_set = $1\$" $pin; }
status_sets() { blkpolicyctl --json status | tr -d ' \n\t' | grep -q "\"policy_set\":{\"in_use\":$1,\"newest\":$NEXT,\"differs\":\[$2\]}"; }
journal_says_newer() {
        journalctl -b -u blkpolicyd MESSAGE_ID=c41e7a2d95b04f6e8a3d1b7c62f0e985 -o json > /run/sets.json
        grep -q "\"POLICY_SET\":\"$SET\"" /run/sets.json && grep -q "\"POLICY_SET_NEWEST\":\"$NEXT\"" /run/sets.json &&
        grep -q '"POLICY_SET_DIFFERS":"20-fast-virtual.policy"' /run/sets.json
}
opt_in() { step sed -i "s/^policy_set = $SET\$/policy_set = $NEXT/" $pin && step systemctl reload blkpolicyd && step runs vdb kyber && step status_sets $NEXT ""; }
opt_out() { step sed -i "s/^policy_set = $NEXT\$/policy_set = $SET/" $pin && step systemctl reload blkpolicyd && step runs vdb none && step status_sets $SET '"20-fast-virtual.policy"'; }
nullb() {
        modprobe null_blk nr_devices=0 &&
        mkdir /sys/kernel/config/nullb/nullb0 &&
        echo 2 > /sys/kernel/config/nullb/nullb0/queue_mode &&
        echo 1 > /sys/kernel/config/nullb/nullb0/submit_queues &&
        echo 0 > /sys/kernel/config/nullb/nullb0/poll_queues &&
        echo 1 > /sys/kernel/config/nullb/nullb0/power
}

check "blkpolicyd.service is active" service_active
check "... though not enabled: the udev rule started it" not_enabled
check "... with no capabilities but CAP_CHOWN and CAP_NET_ADMIN" only_two_caps
check "installed observing: status says mode observe" observing
check "... nothing written: vdb still runs the kernel's mq-deadline" runs vdb mq-deadline
check "... and verify shows vdb's pending change to none" pending_shown
check "... and the metrics say so, as the host's sums: mode observe, settings and disks pending" pending_in_metrics
check "one drop-in with mode = enforce and a reload: applied" enforce_by_dropin
check "the single-queue virtio disk vdb was set to none, under ProtectSystem=strict" runs vdb none
check "vdc got bfq, which the kernel loaded on the write (an admin's policy)" bfq_loaded
check "doctor names a udev rule and a tuned profile that write the same settings, exit 4" doctor_names_writers
check "Debian's tuned runs its profile, which sets vdd's elevator" until_true 300 tuned_runs_its_profile
check "... doctor names it as a writer that runs" doctor_sees_tuned_running
check "... and still when tuned runs but is not enabled (systemd asked over its private socket)" doctor_asks_systemd
check "... and the running agent stand-in, with the settle unit as advice" doctor_sees_agent_running
check "doctor's old advice (After= the agent) makes an ordering cycle through blkpolicyd's start that systemd breaks" cycle_with_old_advice
check "... blkpolicyd-settle.service enabled instead: no ordering cycle" no_cycle_with_settle
check "tuned restarted writes kyber over blkpolicyd's none on vdd" tuned_wins_vdd
check "... blkpolicyd-settle.service sets none again, the other disks as they were" settle_takes_vdd_back
check "blkpolicyctl reaches the control socket" blkpolicyctl status
check "it follows udevd's monitor, not raw uevents" udev_monitor
check "a null_blk made after boot" nullb
check "... is set to none (the kernel gave it mq-deadline)" until_true 50 runs nullb0 none
check "... and its dispatch_busy is read from debugfs (an admin's [Dynamic] policy)" until_true 100 reads_dispatch_busy
check "the watchdog is fed" until_true 400 watchdog_fed "$(prop WatchdogTimestampMonotonic)"
check "the journal has its structured fields" journal_fields
check "systemctl reload: done, still active" reload_ok
check "systemctl reload with a broken policy: done, that file skipped and counted" reload_skips_broken
check "systemctl reload with a broken config fails, and the running one stays" reload_refused
check "a reload with a property= policy matches vdc by its udev ID_SERIAL" property_reload
check "... and a reload without it puts vdc back to bfq" property_dropped
check "backing out to observe by reload: every value back, nothing overridden" back_out
check "... and enforce again by reload: applied again, nothing overridden" enforce_again
check "no restarts" no_restarts
check "the first install pinned the shipped policy set $SET in a drop-in" pinned $SET
check "a package upgrade restarts the daemon (new PID) and writes no scheduler again" upgrade_no_churn
check "... the disks keep their settings through it" runs vdb none
check "... the old daemon handed over instead of putting back" handed_over
check "... the upgrade's set $NEXT (vdb: kyber) is not applied: the pin stays at $SET" pinned $SET
check "... status says set $SET in use, set $NEXT newer, 20-fast-virtual.policy differs" status_sets $SET '"20-fast-virtual.policy"'
check "... and the journal, with POLICY_SET= fields" journal_says_newer
check "policy_set = $NEXT in the pin and a reload: set $NEXT's kyber on vdb" opt_in
check "... and back to policy_set = $SET: vdb none again" opt_out
systemctl stop blkpolicyd
check "systemctl stop restores the kernel's mq-deadline on vdb" runs vdb mq-deadline
check "... and on nullb0" runs nullb0 mq-deadline
check "... and on vdc" runs vdc mq-deadline
check "... and leaves the metrics file of a stop on purpose (ExecStopPost= ran)" stopped_file success 'code="exited",status="0"'
check "a SIGKILL (no restart): ExecStopPost= writes that it died, from \$SERVICE_RESULT" killed_file
say "===JOURNAL==="
journalctl -b -u blkpolicyd --no-pager -o cat > /dev/ttyS0 2>&1
say "===SYSTEMD-TEST-END==="
systemctl poweroff
"""

# an admin's policies: null_blk devices sample dispatch_busy from debugfs
# (it never fires; the test reads the signal); vdc wants bfq, which Debian
# builds as a module that nothing has loaded at boot
ADMIN_POLICIES = {
    "90-vmtest-dynamic.policy": """[Match]
name = nullb*
[Dynamic]
enter = dispatch_busy > 100
leave = dispatch_busy < 1
[Busy]
scheduler = mq-deadline
""",
    "80-vmtest-bfq.policy": """[Match]
name = vdc
[Queue]
scheduler = bfq mq-deadline
""",
}

# tuned's profile for the VM: only vdd, so that the other disks' checks
# see blkpolicyd's values alone
TUNED_PROFILE = """[main]
summary=blkpolicyd VM test: an elevator for vdd
[disk]
devices=vdd
elevator=kyber
"""

# stands in for the GCE guest agent: what the real one does at each start
# (none on blk-mq disks), on vdd only, whose policy wants none anyway
FAKE_AGENT = """[Unit]
Description=Google Compute Engine Guest Agent (blkpolicyd VM test stand-in)
After=network-online.target
[Service]
Type=oneshot
RemainAfterExit=yes
ExecStart=/bin/sh -c 'echo none > /sys/block/vdd/queue/scheduler'
[Install]
WantedBy=multi-user.target
"""

TEST_UNIT = """[Unit]
Description=blkpolicyd VM test
After=multi-user.target
[Service]
Type=oneshot
ExecStart=/usr/local/sbin/blkpolicyd-vmtest
[Install]
WantedBy=multi-user.target
"""


def rootfs():
    """Debian 12 minbase plus PACKAGES, made once and kept in the cache."""
    digest = hashlib.sha256(",".join(PACKAGES).encode()).hexdigest()[:12]     # a new list, a new tree
    path = os.path.join(vmtest.CACHE, "rootfs-bookworm-" + digest)
    if not os.path.isdir(path):
        shutil.rmtree(path + ".tmp", ignore_errors=True)
        subprocess.run(["debootstrap", "--variant=minbase", "--include=" + ",".join(PACKAGES), "bookworm",
                        path + ".tmp", MIRROR], check=True, capture_output=True)
        os.rename(path + ".tmp", path)
    return path


def chroot(root, *cmd):
    r = subprocess.run(["chroot", root, *cmd], capture_output=True, text=True)
    if r.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)}: {r.stdout}{r.stderr}")


def shipped_set(path):
    """The number in a policy-set file: its first line that is no comment."""
    with open(path) as f:
        return int(next(line for line in f if line.strip() and not line.startswith("#")))


def upgrade_deb(deb, out):
    """The next release as the upgrade check installs it: deb repacked with
    a higher version, its shipped set N frozen in policy-sets/N and a newest
    set N+1 whose 20-fast-virtual.policy wants kyber (docs/service.md,
    "Upgrades")."""
    tree = tempfile.mkdtemp(prefix="blkpolicyd-upgrade-")
    try:
        subprocess.run(["dpkg-deb", "-R", deb, tree], check=True, capture_output=True)
        lib = os.path.join(tree, "usr/lib/blkpolicyd")
        shipped = shipped_set(os.path.join(lib, "policies.d", "policy-set"))
        frozen = os.path.join(lib, "policy-sets", str(shipped))
        shutil.rmtree(frozen, ignore_errors=True)
        shutil.copytree(os.path.join(lib, "policies.d"), frozen)
        with open(os.path.join(lib, "policies.d", "policy-set"), "w") as f:
            f.write(f"{shipped + 1}\n")
        fast = os.path.join(lib, "policies.d", "20-fast-virtual.policy")
        with open(fast) as f:
            text = f.read()
        with open(fast, "w") as f:
            f.write(re.sub(r"^scheduler = .*$", "scheduler = kyber", text, flags=re.M))
        control = os.path.join(tree, "DEBIAN", "control")
        with open(control) as f:
            text = f.read()
        with open(control, "w") as f:
            f.write(re.sub(r"^Version: (.*)$", rf"Version: \1+policyset{shipped + 1}", text, flags=re.M))
        sums = []
        for d, _, files in os.walk(tree):
            for name in files:
                path = os.path.join(d, name)
                rel = os.path.relpath(path, tree)
                if not rel.startswith("DEBIAN") and not os.path.islink(path):
                    with open(path, "rb") as f:
                        sums.append(f"{hashlib.md5(f.read()).hexdigest()}  {rel}\n")
        with open(os.path.join(tree, "DEBIAN", "md5sums"), "w") as f:
            f.write("".join(sorted(sums, key=lambda x: x.split("  ", 1)[1])))
        subprocess.run(["dpkg-deb", "--root-owner-group", "-b", tree, out], check=True, capture_output=True)
    finally:
        shutil.rmtree(tree, ignore_errors=True)


def build_image(base, deb, kdir, kver, out):
    root = tempfile.mkdtemp(prefix="blkpolicyd-rootfs-")
    try:
        subprocess.run(["cp", "-a", base + "/.", root], check=True)
        shutil.copy2(deb, os.path.join(root, "tmp", "blkpolicyd.deb"))
        upgrade_deb(deb, os.path.join(root, "var/cache/blkpolicyd-test.deb"))     # for the upgrade check
        chroot(root, "dpkg", "-i", "/tmp/blkpolicyd.deb")
        # only the udev rule may start it
        chroot(root, "systemctl", "disable", "blkpolicyd.service")
        chroot(root, "systemctl", "mask", "serial-getty@ttyS0.service", "getty@tty1.service")
        dropin = os.path.join(root, "etc/systemd/system/blkpolicyd.service.d")
        os.makedirs(dropin, exist_ok=True)
        with open(os.path.join(dropin, "vmtest.conf"), "w") as f:
            f.write("[Service]\n# the test waits for one watchdog ping; 30 s under TCG is long\nWatchdogSec=4s\n")
        # node_exporter's textfile dir, as Debian's prometheus-node-exporter makes it
        os.makedirs(os.path.join(root, "var/lib/prometheus/node-exporter"), exist_ok=True)
        os.makedirs(os.path.join(root, "etc/blkpolicyd/blkpolicyd.conf.d"), exist_ok=True)
        with open(os.path.join(root, "etc/blkpolicyd/blkpolicyd.conf.d/40-metrics.conf"), "w") as f:
            f.write("[Daemon]\nmetrics_textfile_dir = /var/lib/prometheus/node-exporter\n")
        for name, text in ADMIN_POLICIES.items():
            with open(os.path.join(root, "etc/blkpolicyd/policies.d", name), "w") as f:   # the .deb made the dir
                f.write(text)
        with open(os.path.join(root, "usr/local/sbin/blkpolicyd-vmtest"), "w") as f:
            f.write(TEST)
        os.chmod(os.path.join(root, "usr/local/sbin/blkpolicyd-vmtest"), 0o755)
        with open(os.path.join(root, "etc/systemd/system/blkpolicyd-vmtest.service"), "w") as f:
            f.write(TEST_UNIT)
        chroot(root, "systemctl", "enable", "blkpolicyd-vmtest.service")
        os.makedirs(os.path.join(root, "etc/tuned/blkpd-vm"), exist_ok=True)
        with open(os.path.join(root, "etc/tuned/blkpd-vm/tuned.conf"), "w") as f:
            f.write(TUNED_PROFILE)
        with open(os.path.join(root, "etc/tuned/active_profile"), "w") as f:
            f.write("blkpd-vm\n")
        with open(os.path.join(root, "etc/tuned/profile_mode"), "w") as f:
            f.write("manual\n")
        with open(os.path.join(root, "etc/systemd/system/google-guest-agent.service"), "w") as f:
            f.write(FAKE_AGENT)
        chroot(root, "systemctl", "enable", "tuned.service", "google-guest-agent.service")
        with open(os.path.join(root, "etc/fstab"), "w") as f:
            f.write("/dev/vda / ext4 defaults 0 1\n")
        shutil.copytree(os.path.join(kdir, "lib/modules", kver), os.path.join(root, "lib/modules", kver),
                        symlinks=True)
        subprocess.run(["mkfs.ext4", "-q", "-F", "-d", root, out, "1G"], check=True, capture_output=True)
    finally:
        shutil.rmtree(root, ignore_errors=True)


def boot(kdir, kver, initrd, image, work):
    disks = vmtest.scratch_disks(work, ["vdb", "vdc", "vdd"])
    devices = ["-drive", f"if=none,id=root,file={image},format=raw", "-device", "virtio-blk-pci,drive=root",
               "-drive", f"if=none,id=d1,file={disks[0]},format=raw", "-device", "virtio-blk-pci,drive=d1,num-queues=1",
               "-drive", f"if=none,id=d2,file={disks[1]},format=raw",
               "-device", "virtio-blk-pci,drive=d2,num-queues=1,serial=blkpd-vdc",
               "-drive", f"if=none,id=d3,file={disks[2]},format=raw", "-device", "virtio-blk-pci,drive=d3,num-queues=1"]
    return vmtest.qemu(kdir, kver, initrd, "console=ttyS0 panic=-1 loglevel=3 systemd.show_status=0 rw", devices,
                       timeout=900)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--deb", required=True)
    args = ap.parse_args()
    res = Results()
    work = tempfile.mkdtemp(prefix="blkpolicyd-systemd-")
    try:
        kdir, kver = vmtest.fetch_kernel("6.12")
        image = os.path.join(work, "root.img")
        build_image(rootfs(), args.deb, kdir, kver, image)
        initrd = os.path.join(work, "initrd.gz")
        vmtest.build_initramfs(kdir, kver, None, initrd, [], init=INIT, modules=ROOT_MODULES)
        serial = boot(kdir, kver, initrd, image, work).replace("\r", "")
        res.check("booted Debian 12 with systemd and ran the test unit", "===SYSTEMD-TEST-END===" in serial,
                  serial[-4000:])
        journal = re.search(r"===JOURNAL===\n(.*?)===SYSTEMD-TEST-END===", serial, re.S)
        # a failed check's own lines (indented, right after it), then the journal's end
        for m in re.finditer(r"^(ok|not ok) - (.*)\n((?:  .*\n)*)", serial, re.M):
            res.check("systemd: " + m.group(2), m.group(1) == "ok",
                      m.group(3) + (journal.group(1)[-3000:] if journal else ""))
    finally:
        shutil.rmtree(work, ignore_errors=True)
    res.finish("systemd: ")


if __name__ == "__main__":
    main()
