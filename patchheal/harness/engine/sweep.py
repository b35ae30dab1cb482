"""The end of every sandbox run: nothing of it may outlive it (issue 25, C2 and M4).

A sandbox session keeps one container per worktree, and the host resets the
worktree between attempts while that container lives. A process a run left
behind (a double fork and `setsid` escapes the step's process group) would
still be there after the reset: it could rewrite the next candidate's source,
or leave files in `/tmp` or `/dev/shm` for the next run to read. So after
every run, in its own exec as the step's user (authoritative: the run's own
processes cannot stop an exec they are not part of):

- every process of the step's user is killed (`kill -9 -1` spares only the
  caller and PID 1; the session's keeper runs as another user), and the sweep
  waits until none is left — one still alive after about two seconds fails
  the run as a harness error;
- `/tmp` (also the step's HOME), `/dev/shm` and `/dev/mqueue` are emptied,
  directories made writable first (a 0555 or 0000 directory defeats
  `find -delete` on its own), and checked: nothing the user owns is left
  (the engine's own mount points of same-path mounts, root's, stay); System V
  IPC objects of the user are removed where `ipcrm` exists.

The sweep's exit code is the host's signal; nothing a step prints counts.
"""

from __future__ import annotations

# Exit codes the host reads (any other non-zero one: the sweep itself failed).
SURVIVED = 97
NOT_EMPTY = 98

_SCRIPT = f"""
while read -r key value rest; do [ "$key" = Uid: ] && me=$value; done </proc/$$/status
# kill(-1, 0) succeeds whenever any other process exists (the keeper's included):
# who is left is read from /proc instead. A zombie counts until init reaps it.
left() {{
  for entry in /proc/[0-9]*; do
    [ "${{entry#/proc/}}" = "$$" ] && continue
    uid=""
    while read -r key value rest; do
      if [ "$key" = Uid: ]; then uid=$value; break; fi
    done <"$entry/status" 2>/dev/null
    [ "$uid" = "$me" ] && return 0
  done
  return 1
}}
mounted() {{
  while read -r _id _parent _dev _root point _rest; do
    [ "$point" = "$1" ] && return 0
  done </proc/self/mountinfo
  return 1
}}
n=0
while kill -9 -1 2>/dev/null; left; do
  n=$((n + 1))
  if [ "$n" -gt 200 ]; then echo "a process of the user outlived its run"; exit {SURVIVED}; fi
  sleep 0.01 2>/dev/null || sleep 1
done
command -v ipcrm >/dev/null 2>&1 && ipcrm --all 2>/dev/null
for dir in /tmp /dev/shm /dev/mqueue; do
  [ -d "$dir" ] && [ -w "$dir" ] || continue
  for entry in "$dir"/* "$dir"/.[!.]* "$dir"/..?*; do
    [ -e "$entry" ] || [ -L "$entry" ] || continue
    [ -d "$entry" ] && [ ! -L "$entry" ] && chmod -R u+rwx "$entry" 2>/dev/null
    rm -rf "$entry" 2>/dev/null
    # What the engine made stays: the mount points of same-path mounts (a worktree root or
    # git folder under the host's /tmp, owned by whoever runs patchheal, often the step's
    # user) and what is below them (-xdev). Nothing else of the user's may be left.
    found=$(find "$entry" -xdev -uid "$me" -print 2>/dev/null | while read -r path; do
      mounted "$path" || {{ echo "$path"; break; }}
    done)
    if [ -n "$found" ]; then echo "$found is left after the cleanup"; exit {NOT_EMPTY}; fi
  done
done
exit 0
"""

SWEEP_COMMAND = ["/bin/sh", "-c", _SCRIPT]
