#!/usr/bin/env bash
# The fused kernels, built against the torch of the active env (envs/gpu.yaml). Snakemake runs this
# inside the env after creating it (--use-conda); by hand: conda run -n gna-gpu bash envs/gpu.post-deploy.sh
# Versions: pyproject.toml's `gpu` extra (tests/test_environments.py keeps them equal).
# Their setup downloads a prebuilt wheel for this torch / CUDA / Python when one exists, else
# compiles (needs nvcc of torch's CUDA major version, e.g. conda-forge's cuda-nvcc).
set -euo pipefail
pip install --no-build-isolation "causal-conv1d==1.7.0" "mamba-ssm==2.3.2.post1"
# fail here, not in the first job, if they installed without their compiled parts (what gna imports)
python -c "from causal_conv1d import causal_conv1d_fn; from mamba_ssm.ops.triton.ssd_combined import mamba_chunk_scan_combined"
