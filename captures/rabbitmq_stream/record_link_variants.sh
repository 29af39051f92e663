#!/usr/bin/env bash
# Two scenarios re-recorded the way users often capture, to exercise the capture layer on real files:
#   rstream_consume_any_sll2.pcapng       tcpdump -i any -y LINUX_SLL2 (pcapng, Linux cooked v2 headers)
#   rstream_publish_confirm_snaplen96.pcap  tcpdump -i any -s 96 (every larger packet cut short)
# Usage: captures/rabbitmq_stream/record_link_variants.sh   (root, for tcpdump)
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
cd "$HERE"
python3 -c "import rstream" 2>/dev/null || pip install rstream
bash ./broker.sh

record() {  # record OUTPUT SCENARIO TCPDUMP-OPTIONS...
  local out=$1 scenario=$2
  shift 2
  tcpdump -i any "$@" -U -w "$out" 'tcp port 5552' 2>/dev/null &
  local td=$!
  sleep 1
  python3 scenarios.py "$scenario" > /dev/null || true
  sleep 1
  kill -INT "$td"; wait "$td" || true
  echo "$out: $(stat -c %s "$out") bytes"
}

record rstream_consume_any_sll2.pcapng rstream_consume -y LINUX_SLL2 -s 0
record rstream_publish_confirm_snaplen96.pcap rstream_publish_confirm -s 96
