#!/bin/sh
# The official redis image's contract for Debian's redis-server: options alone
# mean `redis-server OPTIONS`, and protected mode is off unless asked for
# (Debian's default would refuse every client that is not on loopback; the
# service network is private to the run).
set -eu

if [ "${1#-}" != "$1" ] || [ "${1%.conf}" != "$1" ]; then
    set -- redis-server "$@"
fi
if [ "$1" = "redis-server" ]; then
    case " $* " in
        *" --protected-mode "*) ;;
        *) set -- "$@" --protected-mode no ;;
    esac
fi
exec "$@"
