#!/usr/bin/env bash
# KernelWatch on a real GPU, once: the quick suite through `kernelwatch run` (child process, capture of HLO, PTX,
# SASS via ptxas + cuobjdump, the profiler trace with device time, NVML clocks in host_health), ingested into the
# embedded SQLite store, plus a standalone probe of the GPU trace/dump/ptxas facts the capture path relies on.
#
# On the device (repo root, carry .whl):   bash tools/gpu_check/gpu_check.sh
# Dry run on a CPU host:   KW_CPU=1 PY=/path/to/python3.12 OUT=/tmp/kw_out_cpu bash tools/gpu_check/gpu_check.sh
#
# Brings back under $OUT (<= 8 files): log.txt, summary.txt, probe_summary.json, gpu_run.tgz (manifests, store db,
# artifacts, probe traces and dumps) and, only when that would pass 15 MiB, artifacts.tar.partN (cat them to untar).
# Every step is time-boxed and tolerant; steps are skipped when the script's own deadline (KW_DEADLINE s) nears.
set -u -o pipefail

ROOT=$(pwd)
OUT=${OUT:-/tmp/kw_out}
PY=${PY:-python3}
DEADLINE=${KW_DEADLINE:-375}
SAMPLES=${KW_SAMPLES:-10}
WORK=/tmp/kwwork
export KERNELWATCH_HOME=/tmp/kwhome
export PYTHONUNBUFFERED=1
mkdir -p "$OUT"
rm -rf "$WORK" "$KERNELWATCH_HOME" /tmp/kwrepo /tmp/site /tmp/kwpkg
mkdir -p "$WORK/manifests"

left() { echo $((DEADLINE - SECONDS)); }
# cap reserve -> the timeout a step gets: at most cap, leaving reserve seconds of the deadline.
budget() { local b=$(( $(left) - $2 )); [ "$b" -gt "$1" ] && b=$1; echo "$b"; }
# step TIMEOUT CMD...: echo, run time-boxed, echo rc; never aborts the script.
step() {
  local t=$1; shift
  echo; echo "=== [+${SECONDS}s] $* (timeout ${t}s)"
  if [ "$t" -lt 5 ]; then echo "--- SKIPPED: no time left"; return 99; fi
  timeout -k 10 "$t" "$@"; local rc=$?
  echo "--- rc=$rc [+${SECONDS}s]"; return $rc
}
sh_step() { local t=$1; shift; step "$t" bash -c "$*"; }

main() {
  echo "KernelWatch GPU device check; root=$ROOT OUT=$OUT PY=$PY deadline=${DEADLINE}s cpu_dry_run=${KW_CPU:-0}"
  date -u; uname -a
  git -C "$ROOT" log -1 --format='repo HEAD %H %s' 2>/dev/null || echo "(no .git in this copy)"

  # ---- 1. the machine ----
  sh_step 20 "nvidia-smi; nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.sm,clocks.mem,clocks.max.sm,power.draw,temperature.gpu --format=csv; nvidia-smi --query-gpu=clocks_event_reasons.active --format=csv || nvidia-smi --query-gpu=clocks_throttle_reasons.active --format=csv"
  sh_step 20 "nvidia-smi -q -d CLOCK,PERFORMANCE | head -70"
  sh_step 20 "head -3 /proc/meminfo; nproc; cat /proc/loadavg; df -h /tmp | tail -1; id -u"
  sh_step 30 "$PY -VV; $PY -m pip --version; $PY -m pip list 2>/dev/null | grep -i -E '^(jax|jaxlib|jax-cuda|nvidia-ml-py|numpy|scipy|typing.extensions|markupsafe|protobuf|ml.dtypes|nvidia-cuda-nvcc|nvidia-cuda-cupti|cuda-toolkit) '"
  sh_step 20 "for t in git ptxas cuobjdump nvdisasm nvcc; do printf '%s: ' \$t; command -v \$t || echo MISSING; done; ls -d /usr/local/cuda*/bin 2>/dev/null; ptxas --version 2>/dev/null | tail -1; cuobjdump --version 2>/dev/null | tail -1; echo PATH=\$PATH"

  # ---- 2. the runner's Python packages missing from the image, from the carried wheels ----
  if ls "$ROOT"/.whl/*.whl >/dev/null 2>&1; then
    sh_step 90 "$PY -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site $ROOT/.whl/*.whl"
  else
    echo "NO .whl/ carried: relying on installed packages"
  fi
  export PYTHONPATH=/tmp/site:$ROOT
  sh_step 60 "$PY -c 'import sqlalchemy, alembic, pydantic, pydantic_core, kombu, redis, jwt, slack_sdk, typing_extensions; import service.cli, service.context, runners.local; print(\"imports ok: sqlalchemy\", sqlalchemy.__version__, \"pydantic\", pydantic.__version__); import pynvml; print(\"pynvml ok\")'"

  # ---- 3. JAX sees the GPU; the SASS tools the capture path finds ----
  sh_step "$(budget 120 200)" "$PY -c 'import jax, jaxlib; print(\"jax\", jax.__version__, \"jaxlib\", jaxlib.__version__); print(jax.devices()); d = jax.devices()[0]; print(\"backend\", jax.default_backend(), \"kind\", d.device_kind, \"cc\", getattr(d, \"compute_capability\", None))'"
  local tools
  tools=$(timeout 30 "$PY" -c 'from runners.ptx_to_sass import find_tools; print(find_tools())' 2>&1)
  echo "runners.ptx_to_sass.find_tools() as the child would see it: $tools"
  if [ "$tools" = "None" ] && [ -z "${KW_CPU:-}" ]; then
    for d in /usr/local/cuda/bin /usr/local/cuda-13.0/bin /usr/local/cuda-13/bin; do
      if [ -x "$d/ptxas" ]; then export PATH=$PATH:$d; echo "NOTE: ptxas was not found by find_tools; appended $d to PATH"; break; fi
    done
    echo "find_tools() now: $(timeout 30 "$PY" -c 'from runners.ptx_to_sass import find_tools; print(find_tools())' 2>&1)"
  fi

  # ---- 4. the product path: kernelwatch run over a scratch git repository holding the project's suite ----
  local have_git=0
  if [ -z "${KW_NOGIT:-}" ] && command -v git >/dev/null 2>&1; then  # KW_NOGIT=1: test the fallback
    sh_step 30 "mkdir -p /tmp/kwrepo && cp -r $ROOT/kernels_under_test /tmp/kwrepo/ && find /tmp/kwrepo -name __pycache__ -prune -exec rm -rf {} + ; cd /tmp/kwrepo && git init -q -b main && git add -A && GIT_AUTHOR_NAME=kw GIT_AUTHOR_EMAIL=kw@localhost GIT_COMMITTER_NAME=kw GIT_COMMITTER_EMAIL=kw@localhost git -c commit.gpgsign=false commit -q --no-verify -m 'kernels_under_test (device check)' && git log --oneline -1" && have_git=1
  fi
  if [ "$have_git" = 1 ]; then
    step "$(budget 230 100)" "$PY" -m service.cli run --repo /tmp/kwrepo --commit HEAD --quick --samples "$SAMPLES" --output "$WORK/manifests"
    echo "kernelwatch run exit status: $?"
  else
    echo "NO git here: skipping kernelwatch run, using the direct fallback"
  fi
  ls -la "$WORK/manifests"

  # ---- 5. fallbacks: nothing came back -> the runner pieces directly; all failed -> once more, memory unlimited ----
  if ! ls "$WORK"/manifests/*.json >/dev/null 2>&1 && [ "$(left)" -lt 130 ]; then
    echo "no manifest, and too little time left for the direct fallback: keeping it for the probe"
  elif ! ls "$WORK"/manifests/*.json >/dev/null 2>&1; then
    local suite='*'; [ "$(left)" -lt 220 ] && suite='matmul/*,softmax/*'
    mkdir -p "$WORK/direct_root" && cp -r "$ROOT/kernels_under_test" "$WORK/direct_root/"
    step "$(budget 200 90)" "$PY" tools/gpu_check/direct_run.py "$WORK/direct_root" "$WORK/manifests" "$KERNELWATCH_HOME/artifacts" "$suite" "$SAMPLES"
    for m in "$WORK"/manifests/direct-*.json; do [ -f "$m" ] && step "$(budget 60 80)" "$PY" -m service.cli ingest "$m"; done
  fi
  local allfailed
  allfailed=$("$PY" - "$WORK/manifests" <<'EOF' 2>&1
import json, sys, pathlib
res = [r for p in pathlib.Path(sys.argv[1]).glob("*.json") for r in json.loads(p.read_text())["results"]
       if r["metric"] == "wall_time" and r["suite"] != "collectives"]
print("yes" if res and all(r["status"] != "ok" for r in res) else "no")
EOF
)
  echo "every single-device benchmark failed: $allfailed"
  if [ "$allfailed" = yes ] && [ "$(left)" -gt 170 ]; then
    echo "RETRY: matmul and softmax again with KERNELWATCH_RUNNER_MEMORY_LIMIT_MB=unlimited (is the rlimit the cause?)"
    mkdir -p "$WORK/manifests_retry"
    if [ "$have_git" = 1 ]; then
      KERNELWATCH_RUNNER_MEMORY_LIMIT_MB=unlimited step "$(budget 120 90)" "$PY" -m service.cli run --repo /tmp/kwrepo --commit HEAD --quick --samples "$SAMPLES" --suite 'matmul/*,softmax/*' --output "$WORK/manifests_retry"
    else
      KERNELWATCH_RUNNER_MEMORY_LIMIT_MB=unlimited step "$(budget 120 90)" "$PY" tools/gpu_check/direct_run.py "$WORK/direct_root" "$WORK/manifests_retry" "$KERNELWATCH_HOME/artifacts" 'matmul/*,softmax/*' "$SAMPLES"
    fi
  fi

  # ---- 6. the standalone probe: raw GPU trace planes, KernelWatch's parsers on them, dump files, ptxas arch ----
  step "$(budget 120 30)" "$PY" tools/gpu_check/gpu_probe.py "$WORK/probe"
  [ -f "$WORK/probe/probe_pick.sass" ] && step "$(budget 30 30)" bash -c "$PY -m service.cli parse sass $WORK/probe/probe_pick.sass --format json | head -c 2500; echo"

  # ---- 7. after: clocks, summary ----
  sh_step 15 "nvidia-smi --query-gpu=clocks.sm,clocks.mem,temperature.gpu,memory.used --format=csv; nvidia-smi --query-gpu=clocks_event_reasons.active --format=csv || nvidia-smi --query-gpu=clocks_throttle_reasons.active --format=csv"
  sh_step "$(budget 30 10)" "$PY tools/gpu_check/summarize.py $WORK/manifests $KERNELWATCH_HOME > $OUT/summary.txt 2>&1; [ -d $WORK/manifests_retry ] && $PY tools/gpu_check/summarize.py $WORK/manifests_retry >> $OUT/summary.txt 2>&1; cat $OUT/summary.txt"
  [ -f "$WORK/probe/probe_summary.json" ] && cp "$WORK/probe/probe_summary.json" "$OUT/probe_summary.json"
  du -sh "$KERNELWATCH_HOME"/* "$WORK"/* 2>/dev/null

  # ---- 8. package: one tarball; split the artifacts off only if it would pass 15 MiB ----
  package
  ls -la "$OUT"
  echo "=== done [+${SECONDS}s]"
}

package() {
  local limit=$((15 * 1024 * 1024)) excl=(--exclude='*.ll' --exclude='*.o' --exclude='*.bc' --exclude='kwhome/worktrees' --exclude='kwhome/repos' --exclude='kwhome/envs')
  echo; echo "=== [+${SECONDS}s] packaging"
  timeout 60 tar -czf "$OUT/gpu_run.tgz" "${excl[@]}" -C /tmp kwwork kwhome 2>&1 | tail -3
  local size; size=$(stat -c %s "$OUT/gpu_run.tgz" 2>/dev/null || echo 0)
  echo "gpu_run.tgz: $size bytes"
  if [ "$size" -gt "$limit" ]; then
    echo "over 15 MiB: the artifact store goes into artifacts.tar.partN (cat artifacts.tar.part* | tar -x)"
    timeout 60 tar -czf "$OUT/gpu_run.tgz" "${excl[@]}" --exclude='kwhome/artifacts' --exclude='kwwork/probe/dump' -C /tmp kwwork kwhome
    # the store's files are gzip already; 4 parts of 14 MiB at most (64 MiB in all may come back)
    local art; art=$(du -sb "$KERNELWATCH_HOME/artifacts" 2>/dev/null | cut -f1)
    if [ "${art:-0}" -gt $((54 * 1024 * 1024)) ]; then
      echo "artifact store is $art bytes: keeping only its files under 400 KiB"
      (cd /tmp && find kwhome/artifacts -type f -size -400k | timeout 60 tar -cf - -T -) | split -b 14m -d -a 1 - "$OUT/artifacts.tar.part"
    else
      timeout 60 tar -cf - -C /tmp kwhome/artifacts | split -b 14m -d -a 1 - "$OUT/artifacts.tar.part"
    fi
    rm -f "$OUT"/artifacts.tar.part[4-9]
  fi
}

main 2>&1 | tee "$OUT/log.txt"
