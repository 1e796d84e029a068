#!/usr/bin/env bash
# Fails when an #include goes against the direction of the layering (README "Layout",
# core/CMakeLists.txt). Headers do not fail to link, so the build alone cannot see these.
#   core:   interval ← tensor ← ir ← runfile;  interval ← kernels ← backend (core/*.h|cpp)
#           parallel (the thread pool) ← backend
#           {ir, backend} ← ops ← program ← analysis → runfile
#   gpu ← core;  widgets ← core;  app ← widgets, core, gpu/cuda_device.h (the CUDA firewall)
# core includes no Qt Widgets/Gui and no CUDA header; widgets include no gpu/.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
python3 - "$@" <<'PY'
import re, subprocess, sys

allowed_core = {
    "interval": {"interval"},
    "parallel": {"parallel"},
    "tensor": {"tensor", "interval"},
    "ir": {"ir", "tensor", "interval"},
    "kernels": {"kernels", "interval"},
    "backend": {"backend", "parallel", "kernels", "interval"},
    "ops": {"ops", "backend", "parallel", "kernels", "ir", "tensor", "interval"},
    "program": {"program", "ops", "backend", "parallel", "kernels", "ir", "tensor", "interval"},
    "runfile": {"runfile", "ir", "tensor", "interval"},
    "analysis": {"analysis", "program", "runfile", "ops", "backend", "parallel", "kernels", "ir",
                 "tensor", "interval"},
}
allowed_top = {"core": {"core"}, "gpu": {"gpu", "core"}, "widgets": {"widgets", "core"},
               "app": {"app", "widgets", "core", "gpu"}, "bench": {"bench", "core", "gpu"}}
forbidden_system = {"core": re.compile(r"^(QtWidgets|QtGui|QWidget|QApplication|QPainter|QImage|"
                                       r"cuda|cublas|cuda_runtime|qcustomplot)"),
                    "widgets": re.compile(r"^(cuda|cublas)")}

def core_module(path):
    parts = path.split("/")
    return "backend" if len(parts) == 2 else parts[1]

files = subprocess.run(["git", "ls-files", "*.h", "*.cpp", "*.cu", "*.cuh"], capture_output=True,
                       text=True, check=True).stdout.split()
include = re.compile(r'^\s*#\s*include\s*([<"])([^>"]+)[>"]')
errors = []
for path in files:
    top = path.split("/")[0]
    if top not in allowed_top:
        continue  # tests/ may include anything
    with open(path, encoding="utf-8") as f:
        for no, line in enumerate(f, 1):
            m = include.match(line)
            if not m:
                continue
            kind, target = m.groups()
            where = f"{path}:{no}: #include {kind}{target}{'>' if kind == '<' else kind}"
            if kind == "<":
                bad = forbidden_system.get(top)
                if bad and bad.match(target):
                    errors.append(f"{where}: {top}/ must not include this system header")
                continue
            ttop = target.split("/")[0]
            if ttop not in allowed_top and ttop != "tests":
                continue  # a header next to the file, e.g. a generated .moc
            if ttop not in allowed_top[top]:
                errors.append(f"{where}: {top}/ may include only {sorted(allowed_top[top])}")
                continue
            if top == "app" and ttop == "gpu" and target != "gpu/cuda_device.h":
                errors.append(f"{where}: the app reaches the GPU only through gpu/cuda_device.h")
            if top == "core" and ttop == "core":
                src, dst = core_module(path), core_module(target)
                if dst not in allowed_core.get(src, set()):
                    errors.append(f"{where}: core/{src} may include only "
                                  f"{sorted(allowed_core[src])} (layering)")
if errors:
    print(f"check-layering: {len(errors)} include(s) against the layering:", file=sys.stderr)
    for e in errors:
        print("  " + e, file=sys.stderr)
    sys.exit(1)
print(f"check-layering: {len(files)} files, every include follows the layering")
PY
