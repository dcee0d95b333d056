"""The retrieval-aware hybrid student's architecture (``model_type="gna_hybrid"``): a Llamba whose
layers may keep teacher attention heads. Importing it registers the model type with transformers'
Auto classes. How students are built and distilled lives in :mod:`gna.hybrid` (the experiment);
this package is the architecture only, beside :mod:`gna.models.llamba`, so describing or loading a
student never imports the distillation code."""
from .modeling import HybridConfig, HybridDecoderLayer, HybridForCausalLM, HybridModel, KeptHeadsAttention

__all__ = ["HybridConfig", "HybridDecoderLayer", "HybridForCausalLM", "HybridModel", "KeptHeadsAttention"]
