#!/usr/bin/env bash
# Install (if missing) and start (or reuse) a RabbitMQ broker with the stream plugin, bound to 127.0.0.1 only.
# Private state under /tmp/streamproto-rmq so runs are repeatable. Prints "reused" or "started".
set -euo pipefail
BASE=${RMQ_BASE:-/tmp/streamproto-rmq}
if ! command -v rabbitmq-server >/dev/null 2>&1 || ! command -v tcpdump >/dev/null 2>&1; then
  # Debian's RabbitMQ (3.10 on bookworm) ships the stream plugin; tcpdump records the scenarios.
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq && apt-get install -y -qq rabbitmq-server tcpdump >/dev/null
  # The package starts a system broker on every interface: stop it, ours binds 127.0.0.1 only.
  (service rabbitmq-server stop || rabbitmqctl stop) >/dev/null 2>&1 || true
fi
if rabbitmq-diagnostics -q ping >/dev/null 2>&1 || (ss -ltn | grep -q '127.0.0.1:5552 '); then
  echo reused; exit 0
fi
rm -rf "$BASE"; mkdir -p "$BASE/mnesia" "$BASE/log"
cat > "$BASE/rabbitmq.conf" <<CONF
listeners.tcp.default = 127.0.0.1:5672
stream.listeners.tcp.1 = 127.0.0.1:5552
stream.advertised_host = 127.0.0.1
loopback_users = none
management.tcp.ip = 127.0.0.1
CONF
echo "[rabbitmq_stream]." > "$BASE/enabled_plugins"
# The Debian start script drops to the rabbitmq user: it must own the private state.
if id rabbitmq >/dev/null 2>&1; then chown -R rabbitmq:rabbitmq "$BASE"; fi
export RABBITMQ_NODE_IP_ADDRESS=127.0.0.1 RABBITMQ_MNESIA_BASE="$BASE/mnesia" RABBITMQ_LOG_BASE="$BASE/log" \
       RABBITMQ_CONFIG_FILE="$BASE/rabbitmq.conf" RABBITMQ_ENABLED_PLUGINS_FILE="$BASE/enabled_plugins" \
       RABBITMQ_DIST_PORT=25672 ERL_EPMD_ADDRESS=127.0.0.1
nohup rabbitmq-server > "$BASE/server.out" 2>&1 &
echo $! > "$BASE/pid"
for _ in $(seq 1 90); do
  if ss -ltn | grep -q '127.0.0.1:5552 '; then echo started; exit 0; fi
  sleep 1
done
echo "broker did not come up; see $BASE/server.out" >&2; exit 1
