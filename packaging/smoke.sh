#!/usr/bin/env bash
# Smoke-test the frozen app: `make smoke` or `bash packaging/smoke.sh` (builds first if there is no bundle).
#  1. the window: `MPS Studio --demo --screenshot smoke.png` offscreen must exit 0 and save a non-blank PNG;
#     and the window icon loads from the bundled resources (all 7 PNG sizes);
#  2. the startup code ran: the crash log exists under the (temporary) platformdirs log dir and records that
#     the app set PYTORCH_ENABLE_MPS_FALLBACK=1;
#  3. DataLoader workers work frozen: `bench` on a generated image folder with --workers 2, once with the
#     platform's start method and once with spawn (what macOS uses: each worker re-launches the frozen
#     binary, which multiprocessing.freeze_support() in mpsstudio.frozen must catch);
#  4. a Core ML export (coremltools collected with its native libraries).
# Everything is written under a temporary folder (kept on failure, printed).
set -euo pipefail
cd "$(dirname "$0")/.."
if [[ -z "${PYTHON:-}" ]]; then
    if [[ -x .venv/bin/python ]]; then PYTHON=.venv/bin/python; else PYTHON=python3; fi
fi
if [[ "$(uname)" == "Darwin" ]]; then
    BIN="dist/MPS Studio.app/Contents/MacOS/MPS Studio"
else
    BIN="dist/MPS Studio/MPS Studio"
fi
[[ -x "$BIN" ]] || bash packaging/build.sh

tmp=$(mktemp -d "${TMPDIR:-/tmp}/mpsstudio-smoke.XXXXXX")
fail() { echo "smoke: FAILED: $*" >&2; echo "smoke: files kept in $tmp" >&2; exit 1; }
export QT_QPA_PLATFORM=offscreen
export MPSSTUDIO_DATA_DIR="$tmp/data" MPSSTUDIO_CONFIG_DIR="$tmp/config"
export XDG_STATE_HOME="$tmp/state" XDG_CACHE_HOME="$tmp/cache" XDG_CONFIG_HOME="$tmp/config" XDG_DATA_HOME="$tmp/share"
mkdir -p "$tmp/home"
export HOME="$tmp/home"  # macOS platformdirs (~/Library/Logs, ...) and anything else end up in $tmp too
unset PYTORCH_ENABLE_MPS_FALLBACK MPSSTUDIO_SET_MPS_FALLBACK MPSSTUDIO_MP_START_METHOD

# 1. the window, offscreen
t0=$(date +%s)
rc=0
"$BIN" --demo --screenshot "$tmp/smoke.png" > "$tmp/demo.log" 2>&1 || rc=$?
[[ $rc == 0 ]] || { cat "$tmp/demo.log"; fail "--demo exited $rc"; }
"$PYTHON" - "$tmp/smoke.png" <<'PY' || fail "the screenshot is missing or blank"
import sys
from PIL import Image, ImageStat
im = Image.open(sys.argv[1]).convert("RGB")
colors = im.getcolors(maxcolors=1 << 20)
distinct = len(colors) if colors else 1 << 20
spread = max(ImageStat.Stat(im).stddev)
print(f"smoke: screenshot {im.width}x{im.height}, {distinct} colours, stddev {spread:.1f}")
sys.exit(0 if im.width >= 400 and im.height >= 300 and distinct > 50 and spread > 5 else 1)
PY
echo "smoke: window demo ok in $(( $(date +%s) - t0 )) s"

# the icon comes from the bundled mpsstudio.resources (importlib.resources in the frozen app)
"$BIN" --startup-timing > "$tmp/startup.log" 2>&1 || { cat "$tmp/startup.log"; fail "--startup-timing failed"; }
grep -q "window icon: 7 sizes, 16-1024 px" "$tmp/startup.log" || { cat "$tmp/startup.log"; fail "the window has no icon"; }
echo "smoke: $(grep 'window icon' "$tmp/startup.log")"

# 2. the frozen startup code: crash log in the platformdirs log dir, fallback recorded
log=$(find "$tmp" -name mpsstudio.log | head -n 1)
[[ -n "$log" && -f "$log" ]] || fail "no crash log under the platformdirs log dir"
grep -q "PYTORCH_ENABLE_MPS_FALLBACK=1 set by the app" "$log" || fail "$log does not record the MPS fallback"
echo "smoke: crash log $log ok"

# 3. DataLoader workers in the frozen app, on a generated class-per-folder image set
"$PYTHON" - "$tmp/images" <<'PY'
import sys
from pathlib import Path
from PIL import Image, ImageDraw
root = Path(sys.argv[1])
for c, colour in enumerate(["red", "blue"]):
    (root / f"class{c}").mkdir(parents=True)
    for i in range(24):
        im = Image.new("RGB", (32, 32), "white")
        ImageDraw.Draw(im).rectangle([i % 8, i % 8, 20 + i % 8, 20 + i % 8], fill=colour)
        im.save(root / f"class{c}" / f"{i}.png")
PY
for method in default spawn; do
    t0=$(date +%s)
    if [[ "$method" == spawn ]]; then export MPSSTUDIO_MP_START_METHOD=spawn; else unset MPSSTUDIO_MP_START_METHOD; fi
    rc=0
    "$BIN" bench --model mlp --dataset "$tmp/images" --devices cpu --batch-size 8 \
        --steps 5 --warmup 1 --workers 2 --no-save > "$tmp/bench-$method.log" 2>&1 || rc=$?
    [[ $rc == 0 ]] || { cat "$tmp/bench-$method.log"; fail "bench with 2 workers ($method start method) exited $rc"; }
    grep -q "finished" "$tmp/bench-$method.log" || { cat "$tmp/bench-$method.log"; fail "bench did not finish"; }
    echo "smoke: bench with 2 DataLoader workers ($method start method) ok in $(( $(date +%s) - t0 )) s"
done
# 4. Core ML export in the frozen app: coremltools and its native libraries are collected (a package converts here;
#    running it needs macOS)
t0=$(date +%s)
rc=0
"$BIN" export --model mnist_cnn --format coreml --out "$tmp/m.mlpackage" > "$tmp/export.log" 2>&1 || rc=$?
[[ $rc == 0 ]] || { cat "$tmp/export.log"; fail "export --format coreml exited $rc"; }
[[ -f "$tmp/m.mlpackage/Manifest.json" ]] || { cat "$tmp/export.log"; fail "no Core ML package was written"; }
echo "smoke: Core ML export ok in $(( $(date +%s) - t0 )) s"
# 5. A run in another Python environment (bench --python): that interpreter runs the engine's sources the app carries
t0=$(date +%s)
rc=0
"$BIN" bench --model mlp --dataset synthetic --devices cpu --steps 5 --warmup 1 --no-save --no-inspect \
    --python "$PYTHON" > "$tmp/python.log" 2>&1 || rc=$?
[[ $rc == 0 ]] || { cat "$tmp/python.log"; fail "bench --python exited $rc"; }
grep -q "finished" "$tmp/python.log" || { cat "$tmp/python.log"; fail "bench --python did not finish"; }
echo "smoke: bench in another Python environment ok in $(( $(date +%s) - t0 )) s"
# 6. A model folder's MLX side through mlx-lm in the frozen app (where the build had MLX): mlx-lm imports the
#    folder's architecture by name, which the spec lists; parity with PyTorch comes first
if "$PYTHON" -c "import mlx_lm" 2>/dev/null; then
    t0=$(date +%s)
    "$PYTHON" -c "import sys; sys.path.insert(0, '.'); from pathlib import Path; from tests.support import hf_folders
hf_folders.llama_text_lm(Path(sys.argv[1]) / 'llama'); (Path(sys.argv[1]) / 'text.txt').write_text(hf_folders.PATTERN_TEXT)" \
        "$tmp" > /dev/null 2>&1 || fail "the tiny model folder for the MLX smoke could not be made"
    rc=0
    "$BIN" bench --model "$tmp/llama" --dataset "$tmp/text.txt" --framework mlx --finetune lora --devices cpu \
        --steps 5 --warmup 1 --no-save > "$tmp/mlx.log" 2>&1 || rc=$?
    [[ $rc == 0 ]] || { cat "$tmp/mlx.log"; fail "bench --framework mlx on a model folder exited $rc"; }
    grep -q "parity passed" "$tmp/mlx.log" && grep -q "finished" "$tmp/mlx.log" \
        || { cat "$tmp/mlx.log"; fail "the folder's MLX side did not pass parity and finish"; }
    echo "smoke: a model folder in mlx-lm ok in $(( $(date +%s) - t0 )) s"
fi
rm -rf "$tmp"
echo "smoke: all passed"
