#!/bin/sh
# Prints RSS, PSS and anonymous memory (kB, from /proc/PID/smaps_rollup) of each PID given,
# and their total (issue 14, docs/PERFORMANCE.md "Idle memory").
# Usage: scripts/rss.sh PID...   e.g. scripts/rss.sh $(pgrep -d' ' -f snowpea-)
printf '%-8s %-28s %8s %8s %8s\n' pid process rss_kB pss_kB anon_kB
tr=0; tp=0; ta=0
for pid in "$@"; do
  f=/proc/$pid/smaps_rollup
  [ -r "$f" ] || continue
  name=$(tr '\0' ' ' < /proc/$pid/cmdline | awk '{print $1}' | xargs basename)
  r=$(awk '/^Rss:/{print $2}' "$f"); p=$(awk '/^Pss:/{print $2}' "$f"); a=$(awk '/^Anonymous:/{print $2}' "$f")
  printf '%-8s %-28s %8s %8s %8s\n' "$pid" "$name" "$r" "$p" "$a"
  tr=$((tr + r)); tp=$((tp + p)); ta=$((ta + a))
done
printf '%-8s %-28s %8s %8s %8s\n' total "" "$tr" "$tp" "$ta"
