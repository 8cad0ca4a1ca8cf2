# Sourced by the bench scripts (edge.sh, dns.sh, wrk.sh, services.sh,
# peers.sh). For one timed run it records how busy each CPU was
# (/proc/stat) and how much CPU the processes under test took: the servers
# and all their descendants (/proc/PID/stat) and the load tool (the
# children time of the shell that ran it). What is left of the two CPUs'
# busy time is other work on the machine; a run where that passes
# FLAG_OTHER of a core (default 0.25) is flagged as disturbed.
#
#   runstat_begin PID...        # before the load tool starts
#   runstat_end LABEL           # after it ended, in the same shell
#   result NAME PIER PEER RATIO NOTE
#
# With RUNSTATS=file, runstat_end appends one line per run:
#   label wall_s server_cores client_cores cpu0_% cpu1_% other_cores flag
# With RESULTS=file, result appends one tab-separated line per comparison.
# Neither writes anything when its variable is unset.

FLAG_OTHER=${FLAG_OTHER:-0.25}
RS_HZ=$(getconf CLK_TCK)

# treetime PID...: user+system clock ticks of the processes and every
# descendant (the fields after the command name, which may hold spaces).
treetime() {
  { cat /proc/[0-9]*/stat 2>/dev/null || true; } | awk -v roots="$*" '
    { pid = $1; sub(/^.*\) /, ""); ppid[pid] = $2; t[pid] = $12 + $13 }
    END {
      n = split(roots, r, " "); for (i = 1; i <= n; i++) in_[r[i]] = 1
      for (changed = 1; changed; ) { changed = 0; for (p in ppid) if (!(p in in_) && (ppid[p] in in_)) { in_[p] = 1; changed = 1 } }
      for (p in in_) s += t[p]; print s + 0
    }'
}
# childtime: sets RS_CT to the user+system ticks of this shell's
# waited-for children (read without a subshell, which would be another
# process with children of its own).
childtime() {
  local s
  read -r s <"/proc/$BASHPID/stat"
  s=${s##*) }
  read -r -a s <<<"$s"
  RS_CT=$((s[13] + s[14]))
}
# cputicks: busy and total ticks of CPU 0 and CPU 1.
cputicks() { awk '/^cpu[01] / {b = $2+$3+$4+$7+$8+$9; printf "%d %d ", b, b+$5+$6} END {print ""}' /proc/stat; }

runstat_begin() {
  RS_PIDS="$*"
  RS_T0=$(treetime "$@")
  childtime
  RS_C0=$RS_CT
  read -r RS_B0 RS_A0 RS_B1 RS_A1 <<<"$(cputicks)"
  RS_S=$(date +%s.%N)
}

# runstat_end LABEL: sets RS_SERVER (server CPU seconds), RS_FLAG and
# RS_LINE, and appends RS_LINE to $RUNSTATS.
runstat_end() {
  local e t c e0 z0 e1 z1
  e=$(date +%s.%N)
  read -r e0 z0 e1 z1 <<<"$(cputicks)"
  childtime
  c=$RS_CT
  # shellcheck disable=SC2086
  t=$(treetime $RS_PIDS)
  RS_LINE=$(awk -v l="$1" -v hz="$RS_HZ" -v s="$RS_S" -v e="$e" -v st="$((t - RS_T0))" -v ct="$((c - RS_C0))" \
    -v b0="$((e0 - RS_B0))" -v a0="$((z0 - RS_A0))" -v b1="$((e1 - RS_B1))" -v a1="$((z1 - RS_A1))" -v lim="$FLAG_OTHER" \
    'BEGIN { w = e - s; srv = st / hz / w; cli = ct / hz / w; busy = (b0 + b1) / hz / w; o = busy - srv - cli; if (o < 0) o = 0
             printf "%s %.1f %.2f %.2f %.0f %.0f %.2f %s\n", l, w, srv, cli, (a0 ? 100*b0/a0 : 0), (a1 ? 100*b1/a1 : 0), o, (o > lim ? "FLAGGED" : "ok") }')
  RS_SERVER=$(awk -v hz="$RS_HZ" -v st="$((t - RS_T0))" 'BEGIN { printf "%.3f", st / hz }')
  RS_FLAG=${RS_LINE##* }
  if [ -n "${RUNSTATS:-}" ]; then echo "$RS_LINE" >>"$RUNSTATS"; fi
}

result() { # name pier peer ratio note
  if [ -n "${RESULTS:-}" ]; then printf '%s\t%s\t%s\t%s\t%s\n' "$@" >>"$RESULTS"; fi
}
