"""Determinism, said truthfully: checkpoints carry the CUDA RNG state too, model jobs switch torch to
its deterministic algorithms, and every result row says which kernels computed it."""
import os

import torch

from gna.jobs import script_job as pipeline
from gna.hybrid.distillation import distill
from gna.hybrid.student import build_student
from gna.models.llamba import kernels
from gna.models.tiny import build_tiny_model

torch.set_num_threads(1)


def test_checkpoints_save_and_restore_the_cuda_rng_state(tmp_path, monkeypatch):
    """A fake CUDA generator (the CPU has none): its state goes into trainer.pt and comes back on resume."""
    state = {"now": [torch.tensor([1, 2, 3], dtype=torch.uint8)]}
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "get_rng_state_all", lambda: [t.clone() for t in state["now"]])
    monkeypatch.setattr(torch.cuda, "set_rng_state_all", lambda states: state.update(now=list(states)))
    teacher = build_tiny_model("llama", num_key_value_heads=2, vocab_size=64)
    data = [torch.randint(3, 64, (2, 12), generator=torch.Generator().manual_seed(i)) for i in range(3)]
    distill(teacher, build_student(teacher, [], 8, chunk_size=8), 1, lambda i: data[i], steps=2, lr=1e-3,
            out_dir=tmp_path, save_every=1)
    saved = torch.load(tmp_path / "step-00000002" / "trainer.pt", weights_only=True)
    assert [t.tolist() for t in saved["cuda_rng"]] == [[1, 2, 3]]
    state["now"] = [torch.tensor([9], dtype=torch.uint8)]  # the generator moved on; resuming puts it back
    distill(teacher, build_student(teacher, [], 8, chunk_size=8), 1, lambda i: data[i], steps=3, lr=1e-3,
            out_dir=tmp_path, save_every=1)
    assert state["now"][0].tolist() == [1, 2, 3]
    resumed = torch.load(tmp_path / "step-00000003" / "trainer.pt", weights_only=True)
    assert [t.tolist() for t in resumed["cuda_rng"]] == [[1, 2, 3]]  # restored before step 3 ran


def test_every_result_row_records_the_kernels():
    row = pipeline.provenance()
    assert {"v_torch", "v_transformers", "v_mamba_ssm", "v_causal_conv1d", "fused_kernels"} <= set(row)
    assert row["v_mamba_ssm"] == "absent" or row["v_mamba_ssm"][0].isdigit()
    kernels._RAN.clear()
    assert pipeline.provenance()["fused_kernels"] == "none"
    xBC, w = torch.randn(1, 5, 8), torch.randn(8, 1, 4)
    kernels.fused_conv(lambda x, weight, bias, activation=None: x, xBC, w, None, "identity")
    assert pipeline.provenance()["fused_kernels"] == "conv"
    kernels._RAN.clear()


def test_model_jobs_run_torch_deterministically(monkeypatch):
    class Job:  # what _start_model_job reads of a Snakemake job
        params = {"spec": {"path": "data/models/micro-llama", "device": "cpu"}}
        config = {}

    monkeypatch.delenv("CUBLAS_WORKSPACE_CONFIG", raising=False)
    try:
        pipeline._start_model_job(Job())
        assert torch.are_deterministic_algorithms_enabled()
        assert torch.is_deterministic_algorithms_warn_only_enabled()
        assert os.environ["CUBLAS_WORKSPACE_CONFIG"] == ":4096:8"
    finally:
        torch.use_deterministic_algorithms(False)
