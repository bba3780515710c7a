#!/usr/bin/env bash
# Regenerates the doctor's fixture trees under tests/fixtures/. Each tree is a filesystem root
# holding only the files the checks read; see docs/DOCTOR.md for what each file means.
# Run from crates/cutrace-doctor: bash tools/make_fixtures.sh
set -euo pipefail
F=tests/fixtures
rm -rf "$F"; mkdir -p "$F"

# w ROOT PATH CONTENT: write a file (printf %b, so \0 and \n work) under a fixture root.
w() { mkdir -p "$(dirname "$F/$1/$2")"; printf '%b' "$3" > "$F/$1/$2"; }

driver() { # ROOT VERSION
  w "$1" proc/driver/nvidia/version "NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  $2  Release Build  (dvs-builder@U22-I3-AF03-09-1)  Sun Nov  2 00:00:00 UTC 2026\nGCC version:  gcc version 12.3.0 (Ubuntu 12.3.0-1ubuntu1~22.04)\n"
  w "$1" proc/driver/nvidia/gpus/0000:18:00.0/information "Model: \t\t NVIDIA H200\nIRQ:   \t\t 142\nGPU UUID: \t GPU-00000000-1111-2222-3333-444444444444\nBus Location: \t 0000:18:00.0\nDevice Minor: \t 0\nGPU Excluded:\t No\n"
}
params() { # ROOT ADMIN_ONLY
  w "$1" proc/driver/nvidia/params "ResmanDebugLevel: 4294967295\nRmLogonRC: 1\nModifyDeviceFiles: 1\nDeviceFileUID: 0\nDeviceFileGID: 0\nDeviceFileMode: 438\nRmProfilingAdminOnly: $2\nEnableMSI: 1\n"
}
who() { # ROOT UID CAPEFF
  w "$1" proc/self/status "Name:\tcutrace\nUmask:\t0022\nState:\tR (running)\nUid:\t$2\t$2\t$2\t$2\nGid:\t$2\t$2\t$2\t$2\nGroups:\t$2\nCapInh:\t0000000000000000\nCapPrm:\t$3\nCapEff:\t$3\nCapBnd:\t000001ffffffffff\n"
  w "$1" proc/self/environ "PATH=/usr/bin:/bin\0HOME=/home/u\0"
}
osrel() { # ROOT ID ID_LIKE
  w "$1" etc/os-release "NAME=\"x\"\nID=$2\nID_LIKE=\"$3\"\n"
}
cupti() { # ROOT DIR SONAME_LINK CUPTI_VERSION
  w "$1" "$2/$3" ""
  local cuda; cuda=$(echo "$2" | sed -E 's#/(extras/CUPTI/lib64|lib64)$##')
  w "$1" "$cuda/version.json" "{\n  \"cuda\": {\"name\": \"CUDA SDK\", \"version\": \"$4\"},\n  \"cuda_cupti\": {\"name\": \"CUDA CUPTI\", \"version\": \"$4\"}\n}\n"
}
proc() { # ROOT PID COMM ARGV(with \0)
  w "$1" "proc/$2/comm" "$3\n"; w "$1" "proc/$2/cmdline" "$4"
}
ROOT_CAPS=000001ffffffffff
NO_CAPS=0000000000000000
PERFMON=0000004000000000
DOCKER_DEFAULT=00000000a80425fb

# The H200 test machine as gpu/results/run23_doctor_probe.txt shows it: root, counters open, CUDA 13.0.
R=h200-root-open
driver $R 580.159.04; params $R 0; who $R 0 $ROOT_CAPS; osrel $R ubuntu debian
cupti $R usr/local/cuda/lib64 libcupti.so.13 13.0.85
w $R proc/driver/nvidia/capabilities/mig/config "DeviceFileMinor: 1\nDeviceFileMode: 256\nDeviceFileModify: 1\n"
w $R proc/driver/nvidia/capabilities/gpu0/mig/.keep ""
proc $R 1 systemd "/sbin/init\0"

# Admin-only counters, an unprivileged user, driver 550 (CUDA 12.4).
R=admin-only-unprivileged
driver $R 550.54.14; params $R 1; who $R 1000 $NO_CAPS; osrel $R ubuntu debian
cupti $R usr/local/cuda/extras/CUPTI/lib64 libcupti.so.12 12.4.127

# The same user with CAP_PERFMON on R565+ (allowed) ...
R=perfmon-r570
driver $R 570.86.15; params $R 1; who $R 1000 $PERFMON; osrel $R ubuntu debian
cupti $R usr/local/cuda/extras/CUPTI/lib64 libcupti.so.12 12.8.90
# ... and on a driver older than R565 (not allowed).
R=perfmon-r550
driver $R 550.54.14; params $R 1; who $R 1000 $PERFMON; osrel $R ubuntu debian
cupti $R usr/local/cuda/extras/CUPTI/lib64 libcupti.so.12 12.4.127

# R610 with the profiler-context capability node world-readable while the flag says 1.
R=r610-capability-grant
driver $R 610.43.03; params $R 1; who $R 1000 $NO_CAPS; osrel $R ubuntu debian
cupti $R usr/local/cuda/lib64 libcupti.so.13 13.0.85
w $R proc/driver/nvidia/capabilities/profiler-context "DeviceFileMinor: 3\nDeviceFileMode: 292\nDeviceFileModify: 1\n"
w $R proc/driver/nvidia/capabilities/profiler-device "DeviceFileMinor: 4\nDeviceFileMode: 256\nDeviceFileModify: 1\n"
w $R dev/nvidia-caps/nvidia-cap3 ""

# .conf says 0, the running module says 1: Debian and Red Hat variants.
for d in debian redhat; do
  R=conf-drift-$d
  driver $R 570.86.15; params $R 1; who $R 1000 $NO_CAPS
  cupti $R usr/local/cuda/extras/CUPTI/lib64 libcupti.so.12 12.8.90
  w $R etc/modprobe.d/nvidia-profiling.conf "# open counters to all users\noptions nvidia NVreg_RestrictProfilingToAdminUsers=0\n"
done
osrel conf-drift-debian ubuntu debian
osrel conf-drift-redhat rhel "centos fedora"

# DCGM's host engine running (root, counters open otherwise).
R=dcgm-hostengine
driver $R 580.159.04; params $R 0; who $R 0 $ROOT_CAPS; osrel $R ubuntu debian
cupti $R usr/local/cuda/lib64 libcupti.so.13 13.0.85
proc $R 1 systemd "/sbin/init\0"
proc $R 4242 nv-hostengine "/usr/bin/nv-hostengine\0-n\0--service-account\0nvidia-dcgm\0"

# MIG on, one GPU instance holding two compute instances (shared).
R=mig-shared
driver $R 580.159.04; params $R 0; who $R 0 $ROOT_CAPS; osrel $R ubuntu debian
cupti $R usr/local/cuda/lib64 libcupti.so.13 13.0.85
for ci in ci0 ci1; do w $R proc/driver/nvidia/capabilities/gpu0/mig/gi1/$ci/access "DeviceFileMinor: 9\nDeviceFileMode: 292\nDeviceFileModify: 1\n"; done
w $R proc/driver/nvidia/capabilities/gpu0/mig/gi1/access "DeviceFileMinor: 8\nDeviceFileMode: 292\nDeviceFileModify: 1\n"

# An MPS control daemon (comm truncated to 15 characters by the kernel) and a Compute Sanitizer.
R=mps-daemon
driver $R 580.159.04; params $R 0; who $R 0 $ROOT_CAPS; osrel $R ubuntu debian
cupti $R usr/local/cuda/lib64 libcupti.so.13 13.0.85
proc $R 3100 nvidia-cuda-mps "nvidia-cuda-mps-control\0-d\0"
w $R tmp/nvidia-mps/control ""
proc $R 3200 compute-sanitiz "/usr/local/cuda/bin/compute-sanitizer\0--tool\0memcheck\0./app\0"

# Root inside a Docker container without SYS_ADMIN (Docker's default capability set).
R=container-no-sysadmin
driver $R 580.159.04; params $R 1; who $R 0 $DOCKER_DEFAULT; osrel $R ubuntu debian
cupti $R usr/local/cuda/lib64 libcupti.so.13 13.0.85
w $R .dockerenv ""
w $R proc/1/cgroup "0::/system.slice/docker-3f2a9c.scope\n"

# CUPTI 13.0 on a CUDA 12.8 driver (570): CUPTI_ERROR_NOT_INITIALIZED.
R=cupti13-driver12
driver $R 570.86.15; params $R 0; who $R 0 $ROOT_CAPS; osrel $R ubuntu debian
cupti $R usr/local/cuda/extras/CUPTI/lib64 libcupti.so.13 13.0.85

# No driver at all.
R=no-driver
who $R 1000 $NO_CAPS; osrel $R debian ""

# .conf says 1 but the running module says 0: today open, restricted after the next boot.
R=conf-drift-reverse
driver $R 570.86.15; params $R 0; who $R 1000 $NO_CAPS; osrel $R ubuntu debian
cupti $R usr/local/cuda/extras/CUPTI/lib64 libcupti.so.12 12.8.90
w $R usr/lib/modprobe.d/nvidia-profiling.conf "options nvidia NVreg_RestrictProfilingToAdminUsers=0\n"
w $R etc/modprobe.d/nvidia-profiling.conf "options nvidia NVreg_RestrictProfilingToAdminUsers=1\n"

# R610, flag 1, the profiler capability nodes readable by root only: denied.
R=r610-no-grant
driver $R 610.43.03; params $R 1; who $R 1000 $NO_CAPS; osrel $R ubuntu debian
cupti $R usr/local/cuda/lib64 libcupti.so.13 13.0.85
w $R proc/driver/nvidia/capabilities/profiler-context "DeviceFileMinor: 3\nDeviceFileMode: 256\nDeviceFileModify: 1\n"
