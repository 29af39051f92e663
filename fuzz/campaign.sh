#!/bin/sh
# A campaign: every target in turn (or those named), RUNS inputs each, one process at a time.
#   sh fuzz/campaign.sh [RUNS] [TARGET ...]
# MAX_TIME=SECONDS in the environment also stops each target after that long (whichever comes first).
# Inputs libFuzzer keeps go to fuzz/work/TARGET, failures to fuzz/findings/, logs to fuzz/logs/.
set -u
cd "$(dirname "$0")/.."
RUNS=${1:-1000000}
[ $# -gt 0 ] && shift
TARGETS=${*:-$(python fuzz/run.py --list)}
python fuzz/seeds.py fuzz/corpus >/dev/null
mkdir -p fuzz/work fuzz/logs fuzz/findings
for t in $TARGETS; do
    mkdir -p "fuzz/work/$t"
    echo "$(date -u +%FT%TZ) $t: $RUNS runs" >> fuzz/logs/campaign.log
    python fuzz/run.py "$t" "fuzz/work/$t" "fuzz/corpus/$t" -runs="$RUNS" -max_total_time="${MAX_TIME:-0}" \
        -print_final_stats=1 \
        -artifact_prefix="fuzz/findings/$t-" > "fuzz/logs/$t.log" 2>&1
    echo "$(date -u +%FT%TZ) $t: exit $? $(grep -E '^#[0-9]+ +DONE|^stat::' "fuzz/logs/$t.log" | tr '\n' ' ')" >> fuzz/logs/campaign.log
done
