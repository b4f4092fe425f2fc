# Sourced: bounded SECONDS CMD... runs CMD (stdout and stderr as the caller redirects them)
# for at most SECONDS. Past that, before it is killed, a hang report goes to stderr: for each
# process of its tree, each thread's system call (/proc/PID/task/TID/syscall: number and
# arguments, so the fd it waits on), its kernel wait channel, and its stack where gdb exists.
# A rare hang in the VM then says where it waited. Exit status: CMD's, or 124 after a hang.
bounded_tree() { # PID: it and its descendants
    local p=$1 c
    echo "$p"
    for c in $(cat /proc/"$p"/task/*/children 2>/dev/null); do bounded_tree "$c"; done
}
bounded_report() { # PID
    local p t
    echo "== hang report ($(date +%T)): the process tree of $1"
    for p in $(bounded_tree "$1"); do
        echo "-- pid $p: $(tr '\0' ' ' </proc/"$p"/cmdline 2>/dev/null)"
        for t in /proc/"$p"/task/*; do
            echo "   tid ${t##*/}: syscall $(cat "$t"/syscall 2>/dev/null); wchan $(cat "$t"/wchan 2>/dev/null)"
        done
        if command -v gdb >/dev/null; then
            gdb -p "$p" -batch -ex "thread apply all bt" 2>/dev/null | grep -E '^(#|Thread)' | head -n 80
        fi
    done
}
bounded() {
    local secs=$1 pid tenths=0
    shift
    "$@" &
    pid=$!
    while kill -0 "$pid" 2>/dev/null; do
        if [ "$tenths" -ge $((secs * 10)) ]; then
            bounded_report "$pid" >&2
            kill -9 $(bounded_tree "$pid") 2>/dev/null
            wait "$pid" 2>/dev/null
            return 124
        fi
        sleep 0.1
        tenths=$((tenths + 1))
    done
    wait "$pid"
}
