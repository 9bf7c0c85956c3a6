#!/usr/bin/env bash
# Load run for `make bench-load`: a private redis-server and ratelimitd on
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

wait_http() { for _ in $(seq 100); do curl -fs "$1" >/dev/null 2>&1 && return 0; sleep 0.1; done; echo "not ready: $1" >&2; return 1; }

go build -o "$work/ratelimitd" ./cmd/ratelimitd
go build -o "$work/rlload" ./cmd/rlload

# ratelimitd listens on port 0 and writes the ports it got to --ready-file:
# a port picked here and handed over could be taken in between.
start_service() { # backend, extra env...
  local backend=$1; shift
  local ready="$work/ready-$backend.json"
  env BACKEND_TYPE="$backend" GRPC_HOST=127.0.0.1 GRPC_PORT=0 HOST=127.0.0.1 PORT=0 \
    DEBUG_HOST=127.0.0.1 DEBUG_PORT=0 LOG_LEVEL=error "$@" \
    "$work/ratelimitd" --config bench/config --ready-file "$ready" >"$work/ratelimitd-$backend.log" 2>&1 &
  pids+=($!)
  for _ in $(seq 100); do [ -s "$ready" ] && break; sleep 0.1; done
  GRPC=$(sed -n 's/.*"grpc":"\([^"]*\)".*/\1/p' "$ready")
  HTTP=$(sed -n 's/.*"http":"\([^"]*\)".*/\1/p' "$ready")
  wait_http "http://$HTTP/healthcheck"
}

# redis-server cannot bind port 0: a port below the kernel's ephemeral range
# (which outgoing connections draw from), another one if it is taken.
start_redis() {
  local low _ pid
  read -r low _ </proc/sys/net/ipv4/ip_local_port_range
  for _ in $(seq 20); do
    REDIS_PORT=$((10000 + RANDOM % (low - 20000)))
    redis-server --port "$REDIS_PORT" --bind 127.0.0.1 --save "" --appendonly no --dir "$work" >"$work/redis.log" 2>&1 &
    pid=$!
    for _ in $(seq 50); do
      if grep -q "Running mode=" "$work/redis.log"; then pids+=("$pid"); return 0; fi
      kill -0 "$pid" 2>/dev/null || break
      sleep 0.1
    done
    kill "$pid" 2>/dev/null || true
    wait "$pid" 2>/dev/null || true
  done
  echo "redis-server found no free port" >&2
  return 1
}

load() { # label, rlload flags...
  local label=$1; shift
  echo "== $label"
  "$work/rlload" -addr "$GRPC" -domain bench -duration "$DURATION" -clients "$CLIENTS" -timeout 1s "$@"
}

start_redis
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
