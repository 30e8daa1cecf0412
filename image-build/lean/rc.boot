#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
# The lean cell's boot, run once by busybox init before anything else:
# what systemd, udev and networkd do on the Debian cell image, cut to what a
# one-pod instance needs. Each step logs to the console with the uptime.
PATH=/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin
export PATH

say() {
	read -r up _ </proc/uptime
	echo "cell-boot: [$up] $*"
}

# The initramfs moved /dev here and unmounted /proc and /sys.
mount -t proc -o nosuid,nodev,noexec proc /proc
mount -t sysfs -o nosuid,nodev,noexec sysfs /sys
[ -e /dev/null ] || mount -t devtmpfs -o nosuid,mode=0755 devtmpfs /dev
mkdir -p /dev/pts /dev/shm
mount -t devpts -o nosuid,noexec,gid=5,mode=0620,ptmxmode=0666 devpts /dev/pts
mount -t tmpfs -o nosuid,nodev,mode=1777 shm /dev/shm
mount -t tmpfs -o nosuid,nodev,mode=0755 run /run
mount -t tmpfs -o nosuid,nodev,mode=1777 tmp /tmp
mount -t cgroup2 -o nosuid,nodev,noexec,nsdelegate cgroup2 /sys/fs/cgroup
mount -t securityfs securityfs /sys/kernel/security 2>/dev/null
mount -t bpf -o mode=0700 bpf /sys/fs/bpf 2>/dev/null
# The cell's mounts (a pod's overlay, its volumes) must not propagate back
# to / (systemd images: cell-rprivate.service).
mount --make-rprivate /
mount -o remount,rw,noatime /
ln -sf /proc/self/fd /dev/fd
ln -sf /proc/self/fd/0 /dev/stdin
ln -sf /proc/self/fd/1 /dev/stdout
ln -sf /proc/self/fd/2 /dev/stderr
hostname -F /etc/hostname
say "mounts done"

# The root partition and its ext4 grown to the disk (a cell's volume is
# mostly larger than the image's 1 GiB root), before user data and pulls
# use it. One line, never a failed boot; cell.growroot=0 turns it off.
grown=$(cell-boot --grow-root 2>&1)
say "${grown#cell-boot: }"

# The modules of /etc/modules-load.d (the NICs a cloud gives, overlay, veth,
# the netfilter modules libiptc does not load itself); anything else is
# loaded on demand by the kernel through /sbin/modprobe.
sed -e 's/#.*//' /etc/modules-load.d/cell.conf | xargs modprobe -a -q
# The NICs: most are not there (modprobe says "No such device").
sed -e 's/#.*//' /etc/modules-load.d/nic.conf | xargs modprobe -a -q 2>/dev/null
sysctl -q -p /etc/sysctl.d/90-cell.conf
say "modules and sysctls"

# Unique per instance, never baked into the image.
[ -s /etc/machine-id ] ||
	tr -d '-' </proc/sys/kernel/random/uuid >/etc/machine-id

# The primary interface (the first one not lo) by DHCP; udhcpc stays in the
# background to renew the lease. The pod IP is cell-net's.
ip link set lo up
primary=
for n in /sys/class/net/*; do
	n=${n##*/}
	[ "$n" = lo ] && continue
	primary=$n
	break
done
if [ -n "$primary" ]; then
	udhcpc -i "$primary" -s /etc/cell/udhcpc.script -p /run/udhcpc.pid \
		-t 60 -T 1 -b -x hostname:cell
	say "$primary up: $(ip -4 -o addr show dev "$primary" | awk '{print $4}')"
else
	say "no network interface"
fi

# First boot's user data (once per instance: cell-cloudinit keeps its own
# record). 1 (a module failed) and 2 (errors in the user data) are logged;
# the agent starts either way, for the controller to reach the cell.
# cell-cloudinit finds a NoCloud seed by udev's by-label links or
# util-linux's blkid; here busybox's findfs names it.
mkdir -p /var/log/containers
seed=$(findfs LABEL=cidata 2>/dev/null || findfs LABEL=CIDATA 2>/dev/null)
cell-cloudinit ${seed:+--cidata-device "$seed"}
say "cell-cloudinit done ($?)"
