#!/bin/sh
# A CI job that leaks: what it starts outlives it, in every way a process can
# try to leave its parent. Used by `make demo`.
set -e
echo "job: building..."
sleep 300 &                                       # a plain background job
nohup sleep 301 >/dev/null 2>&1 &                 # a nohup-ed watcher
setsid sleep 302 &                                # a setsid-ed worker
(setsid sh -c 'sleep 303 & exit 0' &)             # a classic double-forked daemon
sh -c 'trap "" TERM; exec sleep 304' &            # a worker that ignores SIGTERM
sleep 0.5
echo "job: done, exit 0 (and it forgot five processes)"
