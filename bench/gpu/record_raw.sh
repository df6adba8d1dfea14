#!/bin/bash
# Record the raw state of a GPU machine (driver files, nvidia-smi, loader cache, torch build,
# cuobjdump of torch's fatbins) into $OUT/raw.tgz.  Used once on the H200 device machine to
# produce tests/fixtures/h200/ — real recordings for the probes' parsers and the rules.
set -u
d=$(mktemp -d); cd "$d" || exit 1
nvidia-smi > nvidia-smi.txt 2>&1
nvidia-smi -q > nvidia-smi-q.txt 2>&1
nvidia-smi -L > nvidia-smi-L.txt 2>&1
nvidia-smi --query-gpu=index,name,compute_cap,memory.total,uuid,pci.bus_id,driver_version,mig.mode.current --format=csv > nvidia-smi-query.csv 2>&1
cat /sys/module/nvidia/version > sys_module_nvidia_version.txt 2>&1
cat /proc/driver/nvidia/version > proc_driver_nvidia_version.txt 2>&1
for f in /proc/driver/nvidia/gpus/*/information; do echo "== $f"; cat "$f"; done > proc_gpus_information.txt 2>&1
ldconfig -p > ldconfig-p.txt 2>&1; cp /etc/ld.so.cache ld.so.cache 2>/dev/null
ls -la /usr/local/ /usr/local/cuda*/ /usr/local/cuda*/compat /usr/local/nvidia /usr/local/nvidia/lib64 /usr/lib/x86_64-linux-gnu/libcuda* /usr/lib/x86_64-linux-gnu/libnvidia-ml* > ls.txt 2>&1
cat /etc/ld.so.conf.d/* > ld.so.conf.d.txt 2>&1
find / -xdev \( -name 'libcuda.so*' -o -name 'libnvidia-ml.so*' -o -name 'libnvJitLink.so*' -o -name 'libcublasLt.so*' -o -name 'libcudnn.so*' \) -not -path '/proc/*' 2>/dev/null | xargs ls -la > lib_copies.txt 2>&1
env | sort > env.txt
cat /usr/local/cuda/version.json > cuda_version.json 2>&1
uname -a > uname.txt; ldd --version > ldd.txt 2>&1
python3 --version > python.txt 2>&1; which python3 >> python.txt
python3 -m pip list > piplist.txt 2>&1
TD=$(python3 -c "import os,importlib.util as u; print(os.path.dirname(u.find_spec('torch').origin))")
echo "$TD" > torch_dir.txt
cat "$TD/version.py" > torch_version_py.txt
ls -la "$TD/lib" > torch_lib_ls.txt
readelf -d "$TD/lib/libtorch_cuda.so" > readelf-d-libtorch_cuda.txt 2>&1
readelf -S -W "$TD/lib/libtorch_cuda.so" > readelf-S-libtorch_cuda.txt 2>&1
cuobjdump --list-elf "$TD/lib/libtorch_cuda.so" > cuobjdump-list-elf.txt 2>&1
cuobjdump --list-ptx "$TD/lib/libtorch_cuda.so" > cuobjdump-list-ptx.txt 2>&1
python3 - > torch_runtime.txt 2>&1 <<'PY'
import os, time, torch
t=time.time(); print("version", torch.__version__, torch.version.cuda)
print("arch_list", torch.cuda.get_arch_list())
print("available", torch.cuda.is_available(), torch.cuda.device_count())
for i in range(torch.cuda.device_count()):
    p=torch.cuda.get_device_properties(i); print("dev", i, p.name, p.major, p.minor, p.total_memory, getattr(p,'uuid',None))
x=torch.ones(1,device="cuda"); torch.cuda.synchronize()
print("env CUDA_MODULE_LOADING", os.environ.get("CUDA_MODULE_LOADING"))
open("maps.txt","w").write(open("/proc/self/maps").read())
PY
ls -la ~/.nv/ComputeCache > computecache.txt 2>&1
tar czf "$OUT/raw.tgz" .
echo recorded: $(ls | wc -l) files
