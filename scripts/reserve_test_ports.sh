#!/usr/bin/env bash
# The tests bind fixed loopback ports in 20000-45999 (servers, rendezvous, dist-init; see the
# port notes in tests/). Linux hands out ephemeral ports from 32768-60999 to every outgoing
# connection, and torch's TCPStore listens on 0.0.0.0, so a client socket that happened to get
# one of those ports made a real SGLang boot fail with EADDRINUSE (seen once in CI). Where this
# runs as root, keep the range out of the ephemeral pool (net.ipv4.ip_local_reserved_ports: an
# explicit bind still gets the port; port-0 binds get another). Otherwise say so and go on.
set -uo pipefail
RANGE="20000-45999"
FILE=/proc/sys/net/ipv4/ip_local_reserved_ports
if [ "$(id -u)" = 0 ] && [ -w "$FILE" ] && echo "$RANGE" > "$FILE" 2>/dev/null; then
    echo "[test env] ports $RANGE kept out of the ephemeral range (net.ipv4.ip_local_reserved_ports)"
else
    echo "[test env] could not reserve ports $RANGE (not root or $FILE read-only): a test may" \
         "now and then meet EADDRINUSE on a fixed port"
fi
