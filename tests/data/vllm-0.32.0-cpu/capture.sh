#!/usr/bin/env bash
# Capture the vLLM 0.32.0 (CPU) fixtures of this folder from real boots of the tiny model.
#
#   scripts/provision_vllm_cpu.sh            # once: venv + tiny model
#   tests/data/vllm-0.32.0-cpu/capture.sh    # writes the files next to this script
#
# Every server runs on 127.0.0.1 with a port in 46000-46999, in its own session (setsid), and
# is stopped by SIGTERM to its process group, then SIGKILL to what is left of that group.
# Home paths, the host name and non-loopback addresses are replaced by placeholders.
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
CACHE=${PPSWEEP_CACHE:-$HOME/.cache/pytest-ppsweep}
VENV=$CACHE/venv-vllm-0.32.0
MODEL=$CACHE/models-vllm/tiny-llama-h4
NAME=tiny-llama-h4
WORK=$(mktemp -d)
ONLY=${ONLY:-"flags tp1 pp2 tp2 fail fail-maxlen fail-worker"}
export HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 VLLM_NO_USAGE_STATS=1 DO_NOT_TRACK=1
export VLLM_CPU_KVCACHE_SPACE=1

HOST_SED=()
# A short host name ("vm") would hit words; such a name is left alone.
[ ${#HOSTNAME} -lt 4 ] || HOST_SED=(-e "s#$HOSTNAME#<host>#g")
redact() {  # stdin -> stdout
  sed -e "s#$CACHE#\$PPSWEEP_CACHE#g" -e "s#$HOME#\$HOME#g" -e "s#$WORK#\$WORK#g" \
      "${HOST_SED[@]}" \
      -E -e 's#\b(10|172|192|100)\.[0-9]+\.[0-9]+\.[0-9]+\b#<ip>#g'
}

# free_port BASE: the first port from BASE up (within 46000-46999) that 127.0.0.1 can bind now.
# 46000-46999 lies in Linux's ephemeral range, so an outgoing connection may hold a fixed one.
free_port() {
  python3 -c 'import socket, sys
for p in range(int(sys.argv[1]), 47000):
    s = socket.socket()
    try:
        s.bind(("127.0.0.1", p)); print(p); break
    except OSError: pass
    finally: s.close()' "$1"
}

SERVER_PID=
stop_server() {
  [ -n "$SERVER_PID" ] || return 0
  kill -TERM -- "-$SERVER_PID" 2>/dev/null || true
  for _ in $(seq 60); do kill -0 -- "-$SERVER_PID" 2>/dev/null || break; sleep 0.5; done
  kill -KILL -- "-$SERVER_PID" 2>/dev/null || true
  SERVER_PID=
}
trap stop_server EXIT

# boot LABEL BASE BIND ARGS... : start vllm serve on PORT (the first free port from BASE up);
# 0 when /health is 200, 1 when it exited. vLLM binds its HTTP port right after parsing its
# arguments, about 20 s after the free-port check here, and another process's outgoing
# connection may take the port meanwhile (EADDRINUSE): then it is tried again on the next port.
# ENV_EXTRA: 'env' arguments for this boot (e.g. -u NAME, NAME=value).
boot() {
  local label=$1 base=$2 bind=$3 tries; shift 3
  for tries in 1 2 3 4 5; do
    PORT=$(free_port "$base")
    boot_once "$label" "$PORT" "$bind" "$@" && return 0
    grep -q "Address already in use" "$WORK/$label.log" || return 1
    base=$(( PORT + 1 ))
  done
  return 1
}

boot_once() {
  local label=$1 port=$2 bind=$3; shift 3
  local log=$WORK/$label.log
  echo "== $label: ${ENV_EXTRA:+env $ENV_EXTRA }VLLM_CPU_OMP_THREADS_BIND='$bind' vllm serve <model> --host 127.0.0.1 --port $port $*" >&2
  # shellcheck disable=SC2086
  env ${ENV_EXTRA:-} VLLM_CPU_OMP_THREADS_BIND="$bind" setsid "$VENV/bin/vllm" serve "$MODEL" \
    --served-model-name "$NAME" --host 127.0.0.1 --port "$port" "$@" >"$log" 2>&1 &
  SERVER_PID=$!
  local t0; t0=$(date +%s)
  while :; do
    if ! kill -0 "$SERVER_PID" 2>/dev/null; then
      echo "== $label: exited after $(( $(date +%s) - t0 )) s" >&2; SERVER_PID=; return 1
    fi
    if curl -fs --max-time 5 "http://127.0.0.1:$port/health" >/dev/null 2>&1; then
      echo "== $label: healthy after $(( $(date +%s) - t0 )) s" >&2; return 0
    fi
    [ $(( $(date +%s) - t0 )) -lt 400 ] || { echo "== $label: not ready in 400 s" >&2; return 1; }
    sleep 1
  done
}

requests() {  # LABEL PORT: a few completions, one streamed with usage, one with logprobs
  local label=$1 port=$2 u=http://127.0.0.1:$2
  local p="the quick brown fox jumps over the lazy dog and the quick brown fox jumps over the lazy dog again"
  for i in 1 2 3; do
    curl -fs "$u/v1/completions" -H 'Content-Type: application/json' \
      -d "{\"model\":\"$NAME\",\"prompt\":\"$p\",\"max_tokens\":16,\"ignore_eos\":true,\"temperature\":0}" >/dev/null
  done
  curl -fsN "$u/v1/completions" -H 'Content-Type: application/json' \
    -d "{\"model\":\"$NAME\",\"prompt\":\"hello world\",\"max_tokens\":8,\"ignore_eos\":true,\"temperature\":0,\"stream\":true,\"stream_options\":{\"include_usage\":true}}" \
    >"$HERE/$label-stream-usage.sse"
  curl -fs "$u/v1/completions" -H 'Content-Type: application/json' \
    -d "{\"model\":\"$NAME\",\"prompt\":\"hello world\",\"max_tokens\":4,\"ignore_eos\":true,\"temperature\":0,\"logprobs\":2}" \
    | "$VENV/bin/python" -m json.tool >"$HERE/$label-logprobs.json"
}

capture_up() {  # LABEL PORT: config probes and metrics of a healthy server
  local label=$1 port=$2 u=http://127.0.0.1:$2
  # /inference/v1/config: recorded with its status code (absent from 0.32.0, see VLLM_CONTRACT.md)
  curl -s -o "$WORK/cfg" -w '%{http_code}\n' "$u/inference/v1/config" >"$HERE/$label-inference-v1-config.status"
  cat "$WORK/cfg" >>"$HERE/$label-inference-v1-config.status"; echo >>"$HERE/$label-inference-v1-config.status"
  curl -fs "$u/version" | "$VENV/bin/python" -m json.tool >"$HERE/$label-version.json"
  curl -fs "$u/v1/models" | "$VENV/bin/python" -m json.tool | redact >"$HERE/$label-models.json"
  for ep in server_info reset_prefix_cache start_profile; do
    m=GET; [ "$ep" = server_info ] || m=POST
    printf '%s /%s -> %s\n' "$m" "$ep" "$(curl -s -o /dev/null -w '%{http_code}' -X "$m" "$u/$ep")"
  done >"$HERE/$label-endpoints.txt"
  requests "$label" "$port"
  curl -fs "$u/metrics" | redact >"$HERE/$label-metrics.txt"
}

finish_log() {  # LABEL: the redacted log
  redact <"$WORK/$1.log" >"$HERE/$1-boot.log"
}

for what in $ONLY; do
  case $what in
    flags)
      "$VENV/bin/python" "$HERE/dump_flags.py" >"$HERE/serve-flags.txt"
      ;;
    tp1)
      boot tp1 46110 "0" --max-model-len 512 && capture_up tp1 "$PORT"
      stop_server; finish_log tp1 ;;
    pp2)
      boot pp2 46120 "0|1" --max-model-len 512 --pipeline-parallel-size 2 && capture_up pp2 "$PORT"
      stop_server; finish_log pp2 ;;
    tp2)
      boot tp2 46130 "0|1" --max-model-len 512 --tensor-parallel-size 2 && capture_up tp2 "$PORT"
      stop_server; finish_log tp2 ;;
    fail)
      # KV space too small for one request of the model's length: 64 KiB of KV cache (32 tokens
      # of this model) against --max-model-len 4096. VLLM_CPU_KVCACHE_SPACE, when set, overrides
      # --kv-cache-memory-bytes (vllm/platforms/cpu.py), so it is unset here.
      if ENV_EXTRA="-u VLLM_CPU_KVCACHE_SPACE" boot fail 46140 "0" --max-model-len 4096 \
           --kv-cache-memory-bytes 65536; then
        echo "== fail: it booted" >&2; stop_server; exit 1
      fi
      stop_server; finish_log fail ;;
    fail-maxlen)
      # KV space for some blocks but not for one request of the model's length: 1 MiB (512
      # tokens of this model) against --max-model-len 4096.
      if ENV_EXTRA="-u VLLM_CPU_KVCACHE_SPACE" boot fail-maxlen 46145 "0" --max-model-len 4096 \
           --kv-cache-memory-bytes 1048576; then
        echo "== fail-maxlen: it booted" >&2; stop_server; exit 1
      fi
      stop_server; finish_log fail-maxlen ;;
    fail-worker)
      # A bad environment value that only the workers read: VLLM_CPU_KVCACHE_SPACE='' makes
      # int('') raise in each worker (vllm/envs.py), under the EngineCore's own error.
      if ENV_EXTRA="VLLM_CPU_KVCACHE_SPACE=" boot fail-worker 46150 "0" --max-model-len 512; then
        echo "== fail-worker: it booted" >&2; stop_server; exit 1
      fi
      stop_server; finish_log fail-worker ;;
  esac
done
rm -rf "$WORK"
