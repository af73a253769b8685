#!/usr/bin/env bash
# A fast block device in RAM, for benchmarks where the CPU, not the device, is the wall: a
# loop device over a file in /dev/shm with ext4 on it, mounted for every store's data
# directory (each store opens its files with O_DIRECT, as on the real disk). The device's own
# ceiling is measured in the same run by `ferrite bench` (`bench io`, and the ceiling of
# `bench lookup` / `bench compare`), because the data directory lives on it.
#
#   scripts/fastdev.sh up [SIZE]   make and mount it (SIZE for truncate: default 6G); prints
#                                  the mount point, the directory to give as --db
#   scripts/fastdev.sh down        unmount, detach and free the RAM
#   scripts/fastdev.sh status      what is set up now
#   scripts/fastdev.sh compare SUITE [OPTIONS...]
#                                  the whole thing in one command: up (FERRITE_FASTDEV_SIZE,
#                                  default 8G), `ferrite bench compare SUITE --db MOUNT/cmp
#                                  OPTIONS...` with the binary in $FERRITE (default
#                                  target/release/ferrite), then down, whatever the run did;
#                                  exits with the run's status
#
# Run as root. A suite on it:
#   dir=$(scripts/fastdev.sh up 6G)
#   ferrite bench compare ycsb --db "$dir/cmp" --out results-fast --records 4.6M --cache-mib 64
#   scripts/fastdev.sh down
# The image takes RAM as it fills (data sets plus the stores' overheads): leave room for the
# stores' caches and the page cache LMDB reads through.
set -euo pipefail

image=${FERRITE_FASTDEV_IMAGE:-/dev/shm/ferrite-fastdev.img}
mount_point=${FERRITE_FASTDEV_MOUNT:-/mnt/ferrite-fastdev}
export PATH="$PATH:/usr/sbin:/sbin"

fail() {
    echo "fastdev: $*" >&2
    exit 2
}

need() {
    [[ $(id -u) -eq 0 ]] || fail "needs root (loop devices and mount)"
    for tool in losetup mkfs.ext4 mount umount truncate; do
        command -v "$tool" >/dev/null || fail "$tool is missing (apt-get install mount e2fsprogs)"
    done
    [[ -d /dev/shm ]] || fail "/dev/shm is missing: no RAM-backed file system to put the image on"
    if [[ ! -e /dev/loop-control ]]; then
        modprobe loop 2>/dev/null || true
        [[ -e /dev/loop-control ]] ||
            fail "loop devices are not available here (no /dev/loop-control; modprobe loop failed)"
    fi
}

device_of() { # the loop device backed by the image, if any
    losetup -j "$image" 2>/dev/null | head -n 1 | cut -d: -f1
}

up() {
    local size=${1:-6G}
    need
    if mountpoint -q "$mount_point" 2>/dev/null; then
        echo "fastdev: already up on $mount_point ($(device_of)); 'down' first to resize" >&2
        echo "$mount_point"
        return
    fi
    local shm_free
    shm_free=$(df --output=avail -B1 /dev/shm | tail -n 1)
    local want
    want=$(numfmt --from=iec "${size%B}") || fail "size '$size' is not a size (e.g. 6G)"
    ((want < shm_free)) ||
        fail "size $size is more than /dev/shm has free ($(numfmt --to=iec "$shm_free"))"
    rm -f "$image"
    truncate -s "$size" "$image"
    local device
    device=$(losetup --find --show --direct-io=on "$image" 2>/dev/null ||
        losetup --find --show "$image") || fail "losetup could not attach $image"
    # No journal: the power-cut behaviour of a RAM disk is not what this measures, and the
    # root file system of the development machines is ext4 without a journal too.
    mkfs.ext4 -q -F -O ^has_journal -E lazy_itable_init=0,lazy_journal_init=0 "$device" ||
        { losetup -d "$device"; fail "mkfs.ext4 failed on $device"; }
    mkdir -p "$mount_point"
    mount -o noatime "$device" "$mount_point" ||
        { losetup -d "$device"; fail "mounting $device on $mount_point failed"; }
    echo "fastdev: $size in RAM as $device (ext4) on $mount_point" >&2
    echo "$mount_point"
}

down() {
    need
    if mountpoint -q "$mount_point" 2>/dev/null; then
        # Right after a benchmark exits the kernel may still hold the file system for a
        # moment ("target is busy", seen once): try again for a few seconds first.
        local tries=0
        until umount "$mount_point" 2>/dev/null; do
            ((++tries < 10)) || fail "unmounting $mount_point failed (still in use? fuser -m $mount_point)"
            sleep 0.5
        done
    fi
    local device
    device=$(device_of)
    [[ -z $device ]] || losetup -d "$device"
    rm -f "$image"
    rmdir "$mount_point" 2>/dev/null || true
    echo "fastdev: down" >&2
}

status() {
    local device
    device=$(device_of)
    if [[ -n $device ]] && mountpoint -q "$mount_point" 2>/dev/null; then
        echo "up: $device on $mount_point"
        df -h "$mount_point" | tail -n 1
    else
        echo "down"
    fi
}

compare() {
    [[ $# -ge 1 ]] || fail "compare needs a suite: scripts/fastdev.sh compare SUITE [OPTIONS...]"
    local ferrite=${FERRITE:-target/release/ferrite}
    [[ -x $ferrite ]] ||
        fail "$ferrite is not an executable (cargo build --release -p ferrite-cli --features peers, or set FERRITE)"
    if mountpoint -q "$mount_point" 2>/dev/null; then
        fail "already up on $mount_point: 'down' first, or run the suite yourself with --db"
    fi
    local dir
    dir=$(up "${FERRITE_FASTDEV_SIZE:-8G}")
    trap down EXIT
    local suite=$1
    shift
    local status=0
    "$ferrite" bench compare "$suite" --db "$dir/cmp" "$@" || status=$?
    return "$status"
}

case "${1:-}" in
    up) up "${2:-}" ;;
    down) down ;;
    status) status ;;
    compare)
        shift
        compare "$@"
        ;;
    *)
        echo "usage: scripts/fastdev.sh up [SIZE] | down | status | compare SUITE [OPTIONS...]" >&2
        exit 2
        ;;
esac
