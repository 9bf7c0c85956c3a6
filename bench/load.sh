#!/usr/bin/env bash
# Load run for `make bench`: a private redis-server and ratelimitd on
# loopback, rlload against them for a bounded time per scenario, then both
# are stopped. Prints throughput and latency per scenario.
set -euo pipefail
cd "$(dirname "$0")/.."
DURATION=${DURATION:-5s}
CLIENTS=${CLIENTS:-32}
work=$(mktemp -d)
pids=()
cleanup() { for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done; wait 2>/dev/null || true; rm -rf "$work"; }
trap cleanup EXIT

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
wait_http() { for _ in $(seq 100); do curl -fs "$1" >/dev/null 2>&1 && return 0; sleep 0.1; done; echo "not ready: $1" >&2; return 1; }

go build -o "$work/ratelimitd" ./cmd/ratelimitd
go build -o "$work/rlload" ./cmd/rlload

start_service() { # backend, extra env...
  local backend=$1; shift
  GRPC=$(free_port); HTTP=$(free_port); DEBUG=$(free_port)
  env BACKEND_TYPE="$backend" GRPC_HOST=127.0.0.1 GRPC_PORT="$GRPC" HOST=127.0.0.1 PORT="$HTTP" \
    DEBUG_HOST=127.0.0.1 DEBUG_PORT="$DEBUG" LOG_LEVEL=error "$@" \
    "$work/ratelimitd" --config bench/config >"$work/ratelimitd-$backend.log" 2>&1 &
  pids+=($!)
  wait_http "http://127.0.0.1:$HTTP/healthcheck"
}

load() { # label, rlload flags...
  local label=$1; shift
  echo "== $label"
  "$work/rlload" -addr "127.0.0.1:$GRPC" -domain bench -duration "$DURATION" -clients "$CLIENTS" -timeout 1s "$@"
}

REDIS_PORT=$(free_port)
redis-server --port "$REDIS_PORT" --bind 127.0.0.1 --save "" --appendonly no --dir "$work" >"$work/redis.log" 2>&1 &
pids+=($!)
for _ in $(seq 50); do redis-cli -p "$REDIS_PORT" ping >/dev/null 2>&1 && break; sleep 0.1; done

start_service redis REDIS_URL="127.0.0.1:$REDIS_PORT" REDIS_POOL_SIZE=64
before=$(redis-cli -p "$REDIS_PORT" info commandstats | tr -d '\r' | awk -F'[=,:]' '/cmdstat_fcall:|cmdstat_evalsha|cmdstat_eval:/{s+=$3} END{print s+0}')
for alg in fixed_window token_bucket gcra sliding_window leaky_bucket sliding_log; do
  load "redis $alg, 1 descriptor" -key "$alg" -values 10000
done
load "redis fixed_window, 5 descriptors per request" -key fixed_window -values 10000 -descriptors 5
after=$(redis-cli -p "$REDIS_PORT" info commandstats | tr -d '\r' | awk -F'[=,:]' '/cmdstat_fcall:|cmdstat_evalsha|cmdstat_eval:/{s+=$3} END{print s+0}')
echo "redis script calls during the redis runs: $((after - before))"

start_service memory
load "memory fixed_window, 1 descriptor" -key fixed_window -values 10000
load "memory token_bucket, 5 descriptors per request" -key token_bucket -values 10000 -descriptors 5
