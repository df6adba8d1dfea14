#!/bin/sh
# Issue 34's proof on the GPU machine, in one device run (~2 min).  Results under $OUT.
#   python -m tools.compat_proof build .carry/compat     # here, first (nvcc wheels of 13.0-13.5)
#   sh bench/compat_h200.sh .carry/compat                # there, with .carry in `carry`
# 1. tools/compat_proof.py run: every module's PTX ISA as cudafix reads it and as cuobjdump
#    prints it, the model's prediction for this driver, and the real launch (compat-proof.json);
# 2. cupy's own kernels (cub, thrust, curand's generator, elementwise, raw) on this driver: its
#    modules carry a static CUDA runtime newer than the driver's CUDA (minor-version compatibility);
# 3. recordings with this tree: the image's rich env (h200-rich.json), a venv of the image's torch,
#    torchvision and torchaudio alone (h200-torch.json), and that venv plus one module built
#    PTX-only by nvcc 13.2 (h200-ptx132.json); `check --strict` and the first screen of each
#    (screens.txt).
cd "$(dirname "$0")/.." || exit 1
HERE=$(pwd)
MODS=$(cd "${1:?usage: compat_h200.sh MODULE_DIR}" && pwd) || exit 1
# The recordings put this checkout on sys.path (PYTHONPATH): the modules move out of it, so that
# the extension scan of the image's env does not find them there.
case $MODS in "$HERE"/*) rm -rf /tmp/cfx-mods; mv "$MODS" /tmp/cfx-mods; MODS=/tmp/cfx-mods ;; esac
PY=/opt/torch/.venv/bin/python3
[ -x "$PY" ] || PY=$(command -v python3)
export PYTHONUNBUFFERED=1
{ date -u; nvidia-smi --query-gpu=name,driver_version,compute_cap --format=csv; nvidia-smi | sed -n 3p; "$PY" -V; git -C "$HERE" log -1 --format=%H 2>/dev/null; } > "$OUT"/env.txt 2>&1
# 1. the model against the driver
( cd / && PYTHONPATH=$HERE "$PY" -m tools.compat_proof run "$MODS" "$OUT" ) > "$OUT"/proof.txt 2>&1
echo "compat_proof rc=$?" >> "$OUT"/proof.txt
# 2. cupy on this driver
( cd / && "$PY" - <<'EOF'
import cupy, numpy
rt, dv = cupy.cuda.runtime.runtimeGetVersion(), cupy.cuda.runtime.driverGetVersion()
print("cupy", cupy.__version__, "runtime", rt, "driver", dv)
def t(name, f):
    try:
        f(); cupy.cuda.Device().synchronize(); print("ok  ", name)
    except Exception as e:
        print("FAIL", name, type(e).__name__, e)
x = cupy.arange(1 << 20, dtype=cupy.float32)
from cupy._core import _accelerator as acc
acc.set_routine_accelerators(["cub"]); acc.set_reduction_accelerators(["cub"])
t("cub sum/cumsum", lambda: (x.sum(), cupy.cumsum(x)))
t("thrust sort", lambda: cupy.sort(x[::-1]))
t("curand generator", lambda: cupy.random.default_rng(0).random(1000))
t("curand legacy", lambda: cupy.random.rand(1000))
t("elementwise", lambda: cupy.ElementwiseKernel("float32 a", "float32 b", "b = a * 2", "dbl")(x))
t("raw kernel", lambda: cupy.RawKernel(r'extern "C" __global__ void k(float* a){a[threadIdx.x]+=1;}', "k")((1,), (32,), (x,)))
EOF
) > "$OUT"/cupy.txt 2>&1
# 3. recordings
SITE=$("$PY" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
mkvenv() {  # mkvenv DIR: a venv of the image's torch, torchvision, torchaudio and what torch imports, hard-linked
  rm -rf "$1"; "$PY" -m venv --without-pip "$1"
  vsite=$("$1/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
  for e in "$SITE"/*; do
    case $(basename "$e") in
    torch|torch-*|torchvision|torchvision-*|torchvision.libs|torchaudio|torchaudio-*|functorch|torchgen|nvidia|nvidia_*|cuda_toolkit-*|triton|triton-*|numpy|numpy-*|numpy.libs|typing_extensions*|filelock|filelock-*|sympy|sympy-*|mpmath|mpmath-*|networkx|networkx-*|jinja2|jinja2-*|markupsafe|markupsafe-*|MarkupSafe-*|fsspec|fsspec-*|PIL|pillow-*|pillow.libs|setuptools|setuptools-*|_distutils_hack|distutils-precedence.pth)
      # hard links (the extension scan does not follow a symlinked package into another tree)
      cp -al "$e" "$vsite/" 2>/dev/null || ln -s "$e" "$vsite/" ;;
    esac
  done
}
TOP=$(cd "$(dirname "$SITE")/../../.." && pwd)  # beside the image's env: one filesystem for cp -al
TV=$TOP/cfx-torch-only
mkvenv "$TV"
"$TV/bin/python" -c 'import torch, torchvision; print("torch-only venv:", torch.__version__, torchvision.__version__, torch.cuda.is_available())' > "$OUT"/screens.txt 2>&1
PV=$TOP/cfx-ptx132
mkvenv "$PV"
PSITE=$("$PV/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
mkdir -p "$PSITE/cfx_ptx132"; cp "$MODS/cfx_13_2_86_ptx90.so" "$PSITE/cfx_ptx132/_k.so"; touch "$PSITE/cfx_ptx132/__init__.py"
for pair in "h200-rich:$PY" "h200-torch:$TV/bin/python" "h200-ptx132:$PV/bin/python"; do
  name=${pair%%:*}; target=${pair#*:}
  X=$(mktemp -d)
  ( cd / && XDG_CACHE_HOME=$X PYTHONPATH=$HERE "$PY" -m cudafix snapshot --python "$target" -o "$OUT/$name.json" ) >> "$OUT"/screens.txt 2>&1
  { echo "== $name: cudafix check --strict"; cd /; PYTHONPATH=$HERE "$PY" -m cudafix check --strict --from "$OUT/$name.json"; echo "rc=$?"
    echo "== $name: cudafix status (first 20 lines)"; PYTHONPATH=$HERE "$PY" -m cudafix status --from "$OUT/$name.json" | head -20; cd "$HERE"; } >> "$OUT"/screens.txt 2>&1
done
# torch really loads the PTX-only module's kernel? (the user's view of the same failure)
( cd / && "$PY" -c "
import ctypes, torch
L = ctypes.CDLL('$MODS/cfx_13_2_86_ptx90.so'); L.cfx_error.restype = ctypes.c_char_p
torch.zeros(1, device='cuda'); e = L.cfx_launch(); print('after torch init: launch ->', e, L.cfx_error(e).decode())" ) >> "$OUT"/proof.txt 2>&1
ls -la "$OUT"
