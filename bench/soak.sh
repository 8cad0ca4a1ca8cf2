#!/usr/bin/env bash
# Soak: mixed hostile and ordinary traffic against one Pier for DURATION,
# printing errors and the server's RSS every EVERY. Goal: 0 errors and RSS
# flat within 10 % after warm-up (see bench/README.md).
#
#   bash bench/soak.sh                          # 10 minutes at half capacity
#   DURATION=2m WARMUP=30s EVERY=15s bash bench/soak.sh
#   RATE=3000 bash bench/soak.sh                # a fixed rate instead of half capacity
#   PIER_TEST_DATABASE_URL=postgres://… bash bench/soak.sh   # on PostgreSQL
#
# The server runs pinned to CPU 0 and the load to CPU 1. It serves one live
# site on a preview host and on a domain bought in the launch (so DNS has a
# real zone). The rate limits are raised, since all the load comes from one
# address; everything else runs with its defaults, including the header
# timeout that closes the slow connections and DNS response rate limiting,
# whose refusals and truncated answers the load treats as a real resolver
# would (truncated answers are retried over TCP).
#
# The SMTP phase sets up mail on the bought domain and sends legitimate mail
# from 127.0.0.0/24 while other /24s of loopback flood sessions, guess
# recipients and send messages past the size limit (bench/soak/smtp.go);
# the SMTP limits keep their defaults. SMTP=0 leaves it out.
set -euo pipefail
cd "$(dirname "$0")/.."
DURATION=${DURATION:-10m}
EVERY=${EVERY:-30s}
WARMUP=${WARMUP:-2m}
RATE=${RATE:-0}
SLOW=${SLOW:-32}
SMTP=${SMTP:-1}
need=()
command -v jq >/dev/null || need+=(jq)
command -v curl >/dev/null || need+=(curl)
if [ ${#need[@]} -gt 0 ]; then
  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${need[@]}" >/dev/null
fi
mkdir -p bin
go build -o bin/pier ./cmd/pier
go build -o bin/pier-server ./cmd/pier-server
go build -o bin/soak ./bench/soak

tmp=$(mktemp -d)
pids=()
cleanup() { for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done; wait 2>/dev/null || true; rm -rf "$tmp"; }
trap cleanup EXIT

site=$tmp/site
mkdir -p "$site"
printf '<!doctype html><title>soak</title><p>%s</p>\n' "$(head -c 3000 /dev/urandom | base64 -w0)" >"$site/index.html"
head -c 65536 /dev/urandom | base64 -w0 >"$site/64k.txt"

HTTP=127.0.0.1:18190 HTTPS=127.0.0.1:18543 DNS=127.0.0.1:18153 SMTPADDR=127.0.0.1:18125
export PIER_DATA_DIR=$tmp/data PIER_BASE_URL=http://$HTTP
mkdir -p "$PIER_DATA_DIR"
db=()
if [ -n "${PIER_TEST_DATABASE_URL:-}" ]; then db=(--database-url "$PIER_TEST_DATABASE_URL"); fi
export PIER_API_KEY=$(./bin/pier-server admin create-key "${db[@]}" --scopes read,quote,launch,buy_domain --json | jq -r .apiKey)
project=$(./bin/pier-server admin create-project "${db[@]}" --name soak --budget-usd 1000 --json | jq -r .projectId)
taskset -c 0 ./bin/pier-server server "${db[@]}" --http-addr $HTTP --https-addr $HTTPS --dns-addr $DNS --smtp-addr $SMTPADDR --inbox-bytes 4294967296 \
  --rate-limit search=1000000:1000000 --rate-limit quotes=1000000:1000000 --rate-limit mcp=1000000:1000000 --log-level warn 2>"$tmp/pier.log" &
server=$!
pids+=($server)
for _ in $(seq 100); do curl -fsS "http://$HTTP/healthz" >/dev/null 2>&1 && break; sleep 0.1; done

# A domain the sandbox registrar sells, bought in the launch.
domain=$(./bin/pier domains search "soak$RANDOM$RANDOM" --tld-allowlist com,dev,app,org,net --json |
  jq -r '[.data.candidates[] | select(.available and .firstYearPriceUsd != null)][0].domain')
preview=$(./bin/pier launch "$site" --project "$project" --name soak --domain "$domain" 2>"$tmp/launch.log") || {
  echo "launch failed:"; cat "$tmp/launch.log"; cat "$tmp/pier.log"; exit 1; }
preview=$(grep -oE 'https://[^ ]+' <<<"$preview" | head -n1)
host=${preview#https://}; host=${host%%/*}; host=${host%%:*}
echo "site: $preview and $domain; server pid $server"

mailflags=()
if [ "$SMTP" != 0 ]; then
  api() { curl -fsS -H "Authorization: Bearer $PIER_API_KEY" -H 'Content-Type: application/json' -H "Idempotency-Key: soak-$RANDOM$RANDOM$RANDOM" "$@"; }
  quote=$(api -X POST "http://$HTTP/v1/quotes" -d "{\"projectId\":\"$project\",\"items\":[{\"kind\":\"email\",\"domain\":\"$domain\"}]}" | jq -r .data.quoteId)
  task=$(api -X POST "http://$HTTP/v1/domains/$domain/email" -d "{\"quoteId\":\"$quote\"}" | jq -r .data.taskId)
  for _ in $(seq 300); do [ "$(api "http://$HTTP/v1/tasks/$task" | jq -r .data.state)" = succeeded ] && break; sleep 0.2; done
  api -X POST "http://$HTTP/v1/email-addresses" -d "{\"address\":\"orders@$domain\"}" >/dev/null
  mailflags=(-smtp "$SMTPADDR" -mail-to "orders@$domain")
  echo "mail: orders@$domain on $SMTPADDR"
fi

set +e
taskset -c 1 ./bin/soak -base "http://$HTTP" -https "$HTTPS" -dns "$DNS" -site-host "$host" -site-body "$site/index.html" \
  -domain "$domain" -project "$project" -pid "$server" -duration "$DURATION" -every "$EVERY" -warmup "$WARMUP" \
  -rate "$RATE" -slow "$SLOW" "${mailflags[@]}"
code=$?
set -e
if grep -qiE 'panic|fatal' "$tmp/pier.log"; then echo "the server logged a panic:"; grep -iE -A5 'panic|fatal' "$tmp/pier.log" | head -40; code=1; fi
kill -0 "$server" 2>/dev/null || { echo "the server died"; code=1; }
exit $code
