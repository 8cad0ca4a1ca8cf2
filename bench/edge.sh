#!/usr/bin/env bash
# Serves the same files (1 KiB, 64 KiB and 1 MiB) from Pier's edge, Caddy
# and nginx, and drives each with wrk over HTTP/1.1 keep-alive and over
# TLS. Servers are pinned to CPU 0 and wrk to CPU 1. Prints requests per
# second, the ratios pier/caddy and pier/nginx (goal: >= 1.0 and >= 0.7),
# and each server's CPU per request with nginx/pier (goal for Pier's
# sendfile at 64 KiB and 1 MiB: >= 1.0).
#
#   bash bench/edge.sh                   # 3 runs of 5 s per server and case
#   DURATION=10s REPEAT=5 bash bench/edge.sh
#   PEERS=nginx H2=1 H3=1 P99=1 bash bench/edge.sh   # what bench/peers.sh runs
#
# Knobs beyond the default cases (see bench/README.md):
#   PEERS="caddy nginx"  the peers to run (either or both)
#   PROTOS="http https"  the HTTP/1.1 cases: plain, TLS or both
#   SIZES="1k.txt 64k.txt 1m.txt"  the files of the HTTP/1.1 cases (the
#            site also holds 16k.txt and 32k.txt, to place the threshold)
#   H2=1     HTTP/2 cases: h2load -c64 -m10 against Pier and nginx over TLS
#   H3=1     HTTP/3 against Pier's own HTTP/2 (bench/httpload, both with
#            -c4 -m16), with requests per second of Pier's CPU
#   P99=1    1 KiB over HTTP/1.1 at the same paced load (P99_RATE, default
#            10000 req/s over 32 connections) for Pier and nginx: p99 latency
#   RESULTS=file RUNSTATS=file   machine-readable results and per-run CPU
#            records (bench/runstat.sh), for bench/peers.sh
#
# Pier serves the files as a launched site, so requests name its preview
# host. *.localhost does not resolve here for wrk, so wrk connects to
# 127.0.0.1 and sends the preview host in the Host header; over TLS its SNI
# is then 127.0.0.1, for which Pier answers with a local-CA certificate of
# the same kind (ECDSA P-256) as the preview host's. Caddy and nginx serve
# any host name with an ECDSA P-256 certificate made for the run.
set -euo pipefail
cd "$(dirname "$0")/.."
DURATION=${DURATION:-5s}
REPEAT=${REPEAT:-3}
CONNS=${CONNS:-32}
PEERS=${PEERS:-caddy nginx}
H2=${H2:-0} H3=${H3:-0} P99=${P99:-0} P99_RATE=${P99_RATE:-10000}
PROTOS=${PROTOS:-http https}
SIZES=${SIZES:-1k.txt 64k.txt 1m.txt}
has_peer() { [[ " $PEERS " == *" $1 "* ]]; }
# shellcheck source=bench/runstat.sh
. bench/runstat.sh
# shellcheck source=bench/static.sh
. bench/static.sh
need=()
command -v wrk >/dev/null || need+=(wrk)
if has_peer caddy; then command -v caddy >/dev/null || need+=(caddy); fi
[ "$H2" = 1 ] && { command -v h2load >/dev/null || need+=(nghttp2-client); }
command -v nginx >/dev/null || need+=(nginx)
command -v bc >/dev/null || need+=(bc)
command -v openssl >/dev/null || need+=(openssl)
if [ ${#need[@]} -gt 0 ]; then
  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${need[@]}" >/dev/null
fi
mkdir -p bin
go build -o bin/pier ./cmd/pier
go build -o bin/pier-server ./cmd/pier-server
[ "$H3" = 1 ] && go build -o bin/httpload ./bench/httpload

static_site

PIER_HTTP=127.0.0.1:18090 PIER_HTTPS=127.0.0.1:18443
export PIER_DATA_DIR=$tmp/data PIER_BASE_URL=http://$PIER_HTTP
mkdir -p "$PIER_DATA_DIR"
export PIER_API_KEY=$(./bin/pier-server admin create-key --json | jq -r .apiKey)
project=$(./bin/pier-server admin create-project --name bench --json | jq -r .projectId)
taskset -c 0 ./bin/pier-server server --http-addr $PIER_HTTP --https-addr $PIER_HTTPS --dns-addr 127.0.0.1:18053 \
  --smtp-addr 127.0.0.1:18025 --log-level warn 2>"$tmp/pier.log" &
pids+=($!)
pier_pid=$!
for _ in $(seq 100); do curl -fsS "http://$PIER_HTTP/healthz" >/dev/null 2>&1 && break; sleep 0.1; done
preview=$(./bin/pier launch "$site" --project "$project" --name bench 2>"$tmp/launch.log")
host=${preview#https://}; host=${host%%/*}; host=${host%%:*}
echo "pier edge site: $preview"

# One certificate for Caddy and nginx, of the kind Pier's local CA issues.
openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 2 -subj /CN=localhost \
  -addext "subjectAltName=DNS:localhost,IP:127.0.0.1" -keyout "$tmp/key.pem" -out "$tmp/cert.pem" 2>/dev/null

CADDY_HTTP=18091 CADDY_TLS=18444
cat >"$tmp/Caddyfile" <<EOF
{
	admin off
	auto_https off
	storage file_system $tmp/caddy
}
http://:$CADDY_HTTP {
	root * $site
	file_server
}
https://:$CADDY_TLS {
	tls $tmp/cert.pem $tmp/key.pem
	root * $site
	file_server
}
EOF
if has_peer caddy; then
  XDG_DATA_HOME=$tmp/caddy XDG_CONFIG_HOME=$tmp/caddy HOME=$tmp \
    taskset -c 0 caddy run --config "$tmp/Caddyfile" --adapter caddyfile >"$tmp/caddy.log" 2>&1 &
  pids+=($!)
  caddy_pid=$!
fi

NGINX_HTTP=18092 NGINX_TLS=18445
start_nginx "$tmp" "$site" "" "listen 127.0.0.1:$NGINX_HTTP;
		listen 127.0.0.1:$NGINX_TLS ssl http2;
		ssl_certificate $tmp/cert.pem;
		ssl_certificate_key $tmp/key.pem;
		ssl_session_cache shared:SSL:1m;
		ssl_protocols TLSv1.3;
		ssl_conf_command Ciphersuites TLS_AES_128_GCM_SHA256;"
pids+=("$nginx_pid")
sleep 0.5

# Both servers speak TLS 1.3 with the same cipher and key exchange: Go's
# server picks AES-128-GCM on a CPU with AES instructions, and nginx 1.22
# would otherwise offer TLS 1.2 with AES-256 to wrk. Checked, not assumed.
tlsof() { openssl s_client -connect "127.0.0.1:$1" -servername "$host" </dev/null 2>/dev/null | awk '/^New, / {print $2, $NF}'; }
pier_tls=$(tlsof 18443) nginx_tls=$(tlsof "$NGINX_TLS")
echo "TLS: pier $pier_tls, nginx $nginx_tls"
[ "$pier_tls" = "$nginx_tls" ] || { echo "edge.sh: pier and nginx negotiate different TLS ($pier_tls vs $nginx_tls)" >&2; exit 1; }

# Every server must answer the same bytes before anything is timed.
for f in $SIZES; do
  want=$(sha256sum <"$site/$f")
  urls=("http://127.0.0.1:18090/$f" "https://127.0.0.1:18443/$f" "http://127.0.0.1:$NGINX_HTTP/$f" "https://127.0.0.1:$NGINX_TLS/$f")
  if has_peer caddy; then urls+=("http://127.0.0.1:$CADDY_HTTP/$f" "https://127.0.0.1:$CADDY_TLS/$f"); fi
  for url in "${urls[@]}"; do
    got=$(curl -fsSk -H "Host: $host" "$url" | sha256sum) || { echo "no answer from $url"; cat "$tmp"/*.log; exit 1; }
    [ "$got" = "$want" ] || { echo "$url serves other bytes"; exit 1; }
  done
done

# rps URL LABEL PID: one wrk run; prints requests per second and the
# server's CPU microseconds per request (its process tree's CPU time from
# /proc over the requests wrk completed).
rps() {
  local out
  runstat_begin "$3"
  out=$(taskset -c 1 wrk -t1 -c"$CONNS" -d"$DURATION" --latency -H "Host: $host" "$1" | tee -a "$tmp/wrk.log")
  runstat_end "$2"
  awk -v cpu="$RS_SERVER" '/requests in/ {n = $1} /Requests\/sec/ {r = $2} END {printf "%s %.2f\n", r, (n > 0 ? cpu * 1e6 / n : 0)}' <<<"$out"
}
median() { printf '%s\n' "$@" | sort -g | awk '{v[NR]=$1} END {print v[int((NR+1)/2)]}'; }

echo "wrk -t1 -c$CONNS -d$DURATION, $REPEAT rounds of pier, caddy, nginx (pier first in odd rounds, last in even ones); medians; servers on CPU 0, wrk on CPU 1"
echo "req/s, then server CPU µs per request (cpu) and nginx's CPU per request over Pier's (cpu nginx/pier: at least 1 means Pier costs no more)"
printf '%-10s %10s %10s %10s %11s %11s %9s %9s %16s\n' case pier caddy nginx pier/caddy pier/nginx "pier cpu" "ngx cpu" "cpu nginx/pier"
fail=0
for proto in $PROTOS; do
  for f in $SIZES; do
    case $proto in http) pp=18090 cp=$CADDY_HTTP np=$NGINX_HTTP ;; https) pp=18443 cp=$CADDY_TLS np=$NGINX_TLS ;; esac
    ps=() cs=() ns=() rcs=() rns=() pcs=() ncs=() rcpu=()
    for i in $(seq "$REPEAT"); do
      ci=0 cc=0
      # The order alternates, so neither server always runs first.
      if [ $((i % 2)) = 1 ]; then
        read -r pi pc < <(rps "$proto://127.0.0.1:$pp/$f" "pier $proto ${f%.txt}" "$pier_pid")
        has_peer caddy && read -r ci cc < <(rps "$proto://127.0.0.1:$cp/$f" "caddy $proto ${f%.txt}" "$caddy_pid")
        read -r ni nc < <(rps "$proto://127.0.0.1:$np/$f" "nginx $proto ${f%.txt}" "$nginx_pid")
      else
        read -r ni nc < <(rps "$proto://127.0.0.1:$np/$f" "nginx $proto ${f%.txt}" "$nginx_pid")
        has_peer caddy && read -r ci cc < <(rps "$proto://127.0.0.1:$cp/$f" "caddy $proto ${f%.txt}" "$caddy_pid")
        read -r pi pc < <(rps "$proto://127.0.0.1:$pp/$f" "pier $proto ${f%.txt}" "$pier_pid")
      fi
      ps+=("$pi") cs+=("$ci") ns+=("$ni") pcs+=("$pc") ncs+=("$nc")
      if has_peer caddy; then rcs+=("$(echo "$pi / $ci" | bc -l)"); else rcs+=(0); fi
      rns+=("$(echo "$pi / $ni" | bc -l)") rcpu+=("$(echo "$nc / $pc" | bc -l)")
    done
    # The runs of a round follow each other, so they share the machine's
    # load: a ratio is the median of the rounds' ratios.
    p=$(median "${ps[@]}") c=$(median "${cs[@]}") n=$(median "${ns[@]}")
    rc=$(median "${rcs[@]}") rn=$(median "${rns[@]}")
    pc=$(median "${pcs[@]}") nc=$(median "${ncs[@]}") rcp=$(median "${rcpu[@]}")
    size=${f%.txt}
    printf '%-10s %10.0f %10.0f %10.0f %11.2f %11.2f %9.2f %9.2f %16.2f\n' "$proto $size" "$p" "$c" "$n" "$rc" "$rn" "$pc" "$nc" "$rcp"
    printf '  runs: pier %s | caddy %s | nginx %s | pier µs/req %s | nginx µs/req %s\n' "${ps[*]}" "${cs[*]}" "${ns[*]}" "${pcs[*]}" "${ncs[*]}" >&2
    label=$([ "$proto" = http ] && echo "HTTP/1.1" || echo "HTTP/1.1 TLS")
    unit=$(case $size in 1m) echo "1 MiB" ;; *) echo "${size%k} KiB" ;; esac)
    result "$label $unit vs nginx (wrk -c$CONNS)" "$p" "$n" "$rn" "req/s"
    result "$label $unit vs nginx, server CPU per request (ratio nginx/pier)" "$pc" "$nc" "$rcp" "µs/req"
    if has_peer caddy; then result "$label $unit vs caddy (wrk -c$CONNS)" "$p" "$c" "$rc" "req/s"; fi
    if [ "$(echo "$rn < 0.7" | bc -l)" = 1 ] || { has_peer caddy && [ "$(echo "$rc < 1.0" | bc -l)" = 1 ]; }; then fail=1; fi
  done
done

# HTTP/2 over TLS: h2load, 64 connections of 10 streams each. The URL
# names the preview host, so it goes in SNI and :authority as a browser
# sends them (the edge serves h2 for a site whose SNI names it on its fast
# path); --connect-to sends the connections to 127.0.0.1. nginx gets the
# same names.
h2rps() { # port file label pid → "req/s server-CPU-µs-per-request"
  local out
  runstat_begin "$4"
  out=$(taskset -c 1 h2load -c64 -m10 -D "${DURATION%s}" --connect-to "127.0.0.1:$1" "https://$host:$1/$2" 2>&1 | tee -a "$tmp/h2load.log")
  runstat_end "$3"
  awk -v cpu="$RS_SERVER" '/^finished in/ {gsub(",", ""); r = $4} /^requests:/ {n = $8; if ($10 + $12 > 0) print "h2load: " $0 > "/dev/stderr"}
    END {printf "%s %.2f\n", r, (n > 0 ? cpu * 1e6 / n : 0)}' <<<"$out"
}
if [ "$H2" = 1 ]; then
  for f in 1k.txt 64k.txt; do
    ps=() ns=() rns=() pcs=() ncs=() rcpu=()
    for i in $(seq "$REPEAT"); do
      # Pier first in odd rounds, nginx first in even ones.
      if [ $((i % 2)) = 1 ]; then
        read -r pi pc < <(h2rps 18443 "$f" "pier h2 ${f%.txt}" "$pier_pid")
        read -r ni nc < <(h2rps "$NGINX_TLS" "$f" "nginx h2 ${f%.txt}" "$nginx_pid")
      else
        read -r ni nc < <(h2rps "$NGINX_TLS" "$f" "nginx h2 ${f%.txt}" "$nginx_pid")
        read -r pi pc < <(h2rps 18443 "$f" "pier h2 ${f%.txt}" "$pier_pid")
      fi
      ps+=("$pi") ns+=("$ni") pcs+=("$pc") ncs+=("$nc")
      rns+=("$(echo "$pi / $ni" | bc -l)") rcpu+=("$(echo "$nc / $pc" | bc -l)")
    done
    p=$(median "${ps[@]}") n=$(median "${ns[@]}") rn=$(median "${rns[@]}")
    pc=$(median "${pcs[@]}") nc=$(median "${ncs[@]}") rcp=$(median "${rcpu[@]}")
    printf '%-10s %10.0f %10s %10.0f %11s %11.2f %9.2f %9.2f %16.2f\n' "h2 ${f%.txt}" "$p" - "$n" - "$rn" "$pc" "$nc" "$rcp"
    printf '  runs: pier %s | nginx %s | pier µs/req %s | nginx µs/req %s\n' "${ps[*]}" "${ns[*]}" "${pcs[*]}" "${ncs[*]}" >&2
    result "HTTP/2 ${f%k.txt} KiB vs nginx (h2load -c64 -m10)" "$p" "$n" "$rn" "req/s"
    result "HTTP/2 ${f%k.txt} KiB vs nginx, server CPU per request (ratio nginx/pier)" "$pc" "$nc" "$rcp" "µs/req"
  done
fi

# HTTP/3 against Pier's own HTTP/2, same server, same client program
# (bench/httpload: 4 connections of 16 streams). The client is Go's on one
# CPU, so it may set the pace: requests per second of Pier's CPU compare
# the server's cost per request where requests per second cannot.
h3rps() { # proto path label → "req/s req-per-server-CPU-second"
  local out
  runstat_begin "${pids[@]}"
  out=$(taskset -c 1 ./bin/httpload -proto "$1" -addr 127.0.0.1:18443 -host "$host" -path "$2" -ca "$tmp/pier-ca.pem" -c 4 -m 16 -d "$DURATION")
  runstat_end "$3"
  echo "$out" >>"$tmp/httpload.log"
  awk -v cpu="$RS_SERVER" '{ for (i = 1; i <= NF; i++) { split($i, kv, "="); v[kv[1]] = kv[2] } }
    END { if (v["errors"] > 0) print "httpload: " $0 > "/dev/stderr"; printf "%s %.0f\n", v["rps"], (cpu > 0 ? v["reqs"] / cpu : 0) }' <<<"$out"
}
if [ "$H3" = 1 ]; then
  ./bin/pier-server ca >"$tmp/pier-ca.pem"
  for f in 1k.txt 64k.txt; do
    h2s=() h3s=() h2c=() h3c=() r=() rc=()
    for i in $(seq "$REPEAT"); do
      # h2 first in odd rounds, h3 first in even ones.
      if [ $((i % 2)) = 1 ]; then
        read -r a ac < <(h3rps h2 "/$f" "pier h2-go ${f%.txt}"); read -r b bc_ < <(h3rps h3 "/$f" "pier h3 ${f%.txt}")
      else
        read -r b bc_ < <(h3rps h3 "/$f" "pier h3 ${f%.txt}"); read -r a ac < <(h3rps h2 "/$f" "pier h2-go ${f%.txt}")
      fi
      h2s+=("$a") h3s+=("$b") h2c+=("$ac") h3c+=("$bc_")
      r+=("$(echo "$b / $a" | bc -l)") rc+=("$(echo "$bc_ / $ac" | bc -l)")
    done
    printf '%-10s %10.0f %10s %10.0f %11s %11.2f   (h3 vs pier h2; per CPU-second %.0f vs %.0f: %.2f)\n' "h3 ${f%.txt}" \
      "$(median "${h3s[@]}")" - "$(median "${h2s[@]}")" - "$(median "${r[@]}")" "$(median "${h3c[@]}")" "$(median "${h2c[@]}")" "$(median "${rc[@]}")"
    printf '  runs: h3 %s | h2 %s | h3 per CPU-s %s | h2 per CPU-s %s\n' "${h3s[*]}" "${h2s[*]}" "${h3c[*]}" "${h2c[*]}" >&2
    result "HTTP/3 ${f%k.txt} KiB vs Pier HTTP/2 (httpload -c4 -m16)" "$(median "${h3s[@]}")" "$(median "${h2s[@]}")" "$(median "${r[@]}")" "req/s"
    result "HTTP/3 ${f%k.txt} KiB vs Pier HTTP/2, per server CPU-second" "$(median "${h3c[@]}")" "$(median "${h2c[@]}")" "$(median "${rc[@]}")" "req/CPU-s"
  done
fi

# p99 latency at the same load: wrk's connections each wait a fixed delay
# after every answer (wrk's delay() hook), which holds both servers near
# P99_RATE requests per second while their answers are much faster than
# the delay. wrk's latency leaves the delay out.
if [ "$P99" = 1 ]; then
  delay=$(awk -v c="$CONNS" -v r="$P99_RATE" 'BEGIN { printf "%d", c * 1000 / r }')
  echo "function delay() return $delay end" >"$tmp/pace.lua"
  p99() { # url label → "req/s p99-ms"
    runstat_begin "${pids[@]}"
    taskset -c 1 wrk -t1 -c"$CONNS" -d"$DURATION" --latency -s "$tmp/pace.lua" -H "Host: $host" "$1" | tee -a "$tmp/wrk.log" |
      awk 'function ms(v) { if (v ~ /us$/) return v / 1000; if (v ~ /ms$/) return v + 0; if (v ~ /s$/) return v * 1000; return v }
        /Requests\/sec/ {r = $2} $1 == "99%" {p = ms($2)} END {printf "%s %.3f\n", r, p}'
    runstat_end "$2"
  }
  pp=() np=() pr=() nr=() rp=()
  for _ in $(seq "$REPEAT"); do
    read -r a ap < <(p99 "http://127.0.0.1:18090/1k.txt" "pier p99 1k"); read -r b bp < <(p99 "http://127.0.0.1:$NGINX_HTTP/1k.txt" "nginx p99 1k")
    pr+=("$a") nr+=("$b") pp+=("$ap") np+=("$bp") rp+=("$(echo "$bp / $ap" | bc -l)")
  done
  printf '%-10s %10s %10s %10s %11s %11.2f   (p99 ms, nginx/pier; ~%s req/s each: pier %.0f, nginx %.0f)\n' "p99 1k" \
    "$(median "${pp[@]}")" - "$(median "${np[@]}")" - "$(median "${rp[@]}")" "$P99_RATE" "$(median "${pr[@]}")" "$(median "${nr[@]}")"
  printf '  runs: pier p99 %s at %s req/s | nginx p99 %s at %s req/s\n' "${pp[*]}" "${pr[*]}" "${np[*]}" "${nr[*]}" >&2
  result "edge p99, 1 KiB over HTTP/1.1 at ~$P99_RATE req/s vs nginx (ratio nginx/pier)" "$(median "${pp[@]}")" "$(median "${np[@]}")" "$(median "${rp[@]}")" "p99 ms"
fi
grep -E "Non-2xx|Socket errors" "$tmp/wrk.log" && { echo "errors during the run"; exit 1; } || true
if [ "$fail" = 0 ]; then echo "goal met: pier >= 1.0x caddy and >= 0.7x nginx in every HTTP/1.1 case"; else echo "goal missed in at least one HTTP/1.1 case (see the ratios)"; fi
