# Sourced by the benchmarks/cuda_*.sh scripts on the lent CUDA machine: output folder, the two wheels its
# python3 lacks (carried in .wheels/), and what the machine is. Defines log().
OUT=${OUT:-/tmp/mpsstudio-cuda}
mkdir -p "$OUT"
export PYTHONUNBUFFERED=1 MPSSTUDIO_DATA_DIR=$OUT/data MPSSTUDIO_LOG_DIR=$OUT/log
log() { echo "=== $*"; }
describe_machine() {
  python3 -m pip install -q --no-index --find-links .wheels platformdirs psutil 2>&1 | tail -1
  log machine
  nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
  python3 -c "import torch, torchvision, platform; print('python', platform.python_version(), 'torch', torch.__version__, 'torchvision', torchvision.__version__, 'cpu threads', torch.get_num_threads())"
  lscpu | grep -E '^Model name|^CPU\(s\)'
}
