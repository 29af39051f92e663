#!/usr/bin/env bash
# Re-record the RabbitMQ Stream captures: real broker (Debian rabbitmq-server, stream plugin, bound to
# 127.0.0.1) and two real clients (rstream, rbfly), one pcap per scenario, taken with tcpdump on lo.
# Usage: captures/rabbitmq_stream/record.sh [scenario ...]   (default: all; needs root for tcpdump)
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
cd "$HERE"
python3 -c "import rstream, rbfly" 2>/dev/null || pip install rstream rbfly
bash ./broker.sh
SCENARIOS=("$@")
if [ ${#SCENARIOS[@]} -eq 0 ]; then
  SCENARIOS=(rstream_publish_confirm rstream_consume rstream_errors rstream_bad_password
             rbfly_publish_consume rbfly_offset_reference)
fi
touch facts.jsonl
for s in "${SCENARIOS[@]}"; do
  tcpdump -i lo -U -s 0 -w "$s.pcap" 'tcp port 5552' 2>/dev/null &
  TD=$!
  sleep 1
  python3 scenarios.py "$s" > "/tmp/$s.facts" || true
  sleep 1
  kill -INT "$TD"; wait "$TD" || true
  # keep one line of facts per scenario, replacing an older run's
  grep -v "\"scenario\": \"$s\"" facts.jsonl > facts.jsonl.new || true
  grep '^{' "/tmp/$s.facts" >> facts.jsonl.new || true
  mv facts.jsonl.new facts.jsonl
  echo "$s: $(cat "/tmp/$s.facts" | grep '^{' || echo 'no facts')"
done
