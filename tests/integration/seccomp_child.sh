#!/usr/bin/env bash
# A forked child that installs a seccomp filter (OpenSSH's privilege-separated child under sshd -r)
# and then uses, closes or shuts down the upgraded server end it inherited, or just exits
# (tests/programs/seccomp_child_check.cpp). The shim hands the connection to the kernel before the
# filter; nothing it does afterwards may be a syscall the filter kills (before: the doorbells'
# teardown asked getsockopt/ioctl, SIGSYS, and the stream was lost). Same transcript as plain TCP.
. "$(dirname "${BASH_SOURCE[0]}")/helpers/lib.sh"
compare_transcripts "$BUILD/seccomp_child_check"
it_finish
