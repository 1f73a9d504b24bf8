#!/usr/bin/env bash
# Build MPS Studio with PyInstaller: `make app` or `bash packaging/build.sh`.
#   macOS: dist/MPS Studio.app and dist/MPS Studio.dmg      Linux: dist/MPS Studio/ (one folder)
# Uses the current Python (PYTHON=..., else .venv/bin/python if present, else python3), which must already
# have the app installed (`pip install -e .`); installs packaging/requirements.txt into it.
# MPSSTUDIO_TRIM=0 builds without the size trimming (see mpsstudio.spec).
set -euo pipefail
cd "$(dirname "$0")/.."
if [[ -z "${PYTHON:-}" ]]; then
    if [[ -x .venv/bin/python ]]; then PYTHON=.venv/bin/python; else PYTHON=python3; fi
fi
APP="MPS Studio"
start=$(date +%s)

"$PYTHON" -m pip install --quiet -c constraints.txt -r packaging/requirements.txt
if ! ls mpsstudio/resources/icons/icon-*.png >/dev/null 2>&1 || [[ ! -f mpsstudio/resources/icon.icns ]]; then
    QT_QPA_PLATFORM=offscreen "$PYTHON" packaging/make_icons.py
fi

"$PYTHON" -m PyInstaller --noconfirm --clean --log-level WARN \
    --distpath dist --workpath build/pyinstaller packaging/mpsstudio.spec

if [[ "$(uname)" == "Darwin" ]]; then
    bundle="dist/$APP.app"
    stage=build/dmg
    rm -rf "$stage" "dist/$APP.dmg"
    mkdir -p "$stage"
    cp -R "$bundle" "$stage/"
    ln -s /Applications "$stage/Applications"
    for attempt in 1 2 3; do  # hdiutil sometimes fails with "Resource busy" on CI machines
        hdiutil create -volname "$APP" -srcfolder "$stage" -ov -format UDZO "dist/$APP.dmg" && break
        [[ $attempt == 3 ]] && exit 1
        sleep 5
    done
    rm -rf "$stage"
else
    bundle="dist/$APP"
fi

end=$(date +%s)
echo "build: $bundle in $((end - start)) s; size $(du -sh "$bundle" | cut -f1)" \
     "($(find "$bundle" -type f | wc -l) files)"
if [[ -f "dist/$APP.dmg" ]]; then
    echo "build: dist/$APP.dmg $(du -h "dist/$APP.dmg" | cut -f1)"
fi
